package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// slowBackend answers "app <path>", and holds /slow for hold first
// (counting the arrivals in slow).
type slowBackend struct {
	addr string
	hold time.Duration
	slow atomic.Int64
}

func newSlowBackend(t *testing.T, hold time.Duration) *slowBackend {
	t.Helper()
	b := &slowBackend{hold: hold}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			b.slow.Add(1)
			tm := time.NewTimer(b.hold) // the backend's work
			defer tm.Stop()
			select {
			case <-tm.C:
			case <-r.Context().Done():
				return
			}
		}
		fmt.Fprintf(w, "app %s", r.URL.Path)
	})}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close(); <-done })
	b.addr = ln.Addr().String()
	return b
}

// newClient returns an HTTP/1.1 keep-alive client (h2c false) or an h2c
// one with prior knowledge, closed at cleanup.
func newClient(t *testing.T, h2c bool) *http.Client {
	p := new(http.Protocols)
	if h2c {
		p.SetUnencryptedHTTP2(true)
	} else {
		p.SetHTTP1(true)
	}
	tr := &http.Transport{Protocols: p, MaxIdleConnsPerHost: 128}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 15 * time.Second}
}

// phaseCounts are the requests that started in one phase of the test.
type phaseCounts struct {
	sent, ok, failed, closes atomic.Int64 // closes: HTTP/1.1 answers with Connection: close
}

func (p *phaseCounts) String() string {
	return fmt.Sprintf("sent %d, ok %d, failed %d, Connection: close %d", p.sent.Load(), p.ok.Load(), p.failed.Load(), p.closes.Load())
}

// phasedLoad is an open-loop load: a 5 ms ticker sends whatever is due at
// rate per second since the start, each request on its own goroutine (at
// most 200 at once; a request due beyond that is skipped and counted),
// over the clients in turn. Each request is counted by the instant its
// goroutine starts it: before signalled (phase 0) or after (phase 1); one
// whose goroutine starts after cutoff — a starved machine can delay it
// that long — is not sent (late), and one whose connection was dialled
// only after closed (the listeners' close), so refused, is late too.
type phasedLoad struct {
	clients   []*http.Client
	url       string
	rate      float64
	signalled atomic.Int64 // unix ns; 0: not yet
	cutoff    atomic.Int64 // unix ns; 0: none
	closed    atomic.Int64 // unix ns the listeners close; 0: not known
	counts    [2]phaseCounts
	skipped   atomic.Int64
	late      atomic.Int64
	mu        sync.Mutex
	errs      []string
	stop      chan struct{}
	wg        sync.WaitGroup
}

func startPhasedLoad(url string, rate float64, clients ...*http.Client) *phasedLoad {
	l := &phasedLoad{clients: clients, url: url, rate: rate, stop: make(chan struct{})}
	l.wg.Add(1)
	go l.run()
	return l
}

func (l *phasedLoad) run() {
	defer l.wg.Done()
	sem := make(chan struct{}, 200)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	began, issued := time.Now(), int64(0)
	for {
		select {
		case <-l.stop:
			return
		case <-tick.C:
		}
		for due := int64(time.Since(began).Seconds() * l.rate); issued < due; issued++ {
			select {
			case sem <- struct{}{}:
			default:
				l.skipped.Add(1)
				continue
			}
			c := l.clients[issued%int64(len(l.clients))]
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				defer func() { <-sem }()
				l.one(c)
			}()
		}
	}
}

func (l *phasedLoad) one(c *http.Client) {
	now := time.Now().UnixNano()
	if co := l.cutoff.Load(); co != 0 && now >= co {
		l.late.Add(1)
		return
	}
	pc := &l.counts[0]
	if s := l.signalled.Load(); s != 0 && now >= s {
		pc = &l.counts[1]
	}
	var dialed atomic.Int64
	trace := &httptrace.ClientTrace{ConnectStart: func(string, string) { dialed.Store(time.Now().UnixNano()) }}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), "GET", l.url, nil)
	if err != nil {
		panic(err)
	}
	resp, err := c.Do(req)
	if cl := l.closed.Load(); err != nil && cl != 0 && dialed.Load() >= cl && errors.Is(err, syscall.ECONNREFUSED) {
		l.late.Add(1) // dialled after the delay, by a goroutine the machine held back
		return
	}
	pc.sent.Add(1)
	if err == nil {
		var body []byte
		body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil && (resp.StatusCode != 200 || string(body) != "app /load") {
			err = fmt.Errorf("status %d body %q", resp.StatusCode, body)
		}
		if resp.Close {
			pc.closes.Add(1)
		}
	}
	if err != nil {
		pc.failed.Add(1)
		l.mu.Lock()
		if len(l.errs) < 10 {
			l.errs = append(l.errs, err.Error())
		}
		l.mu.Unlock()
		return
	}
	pc.ok.Add(1)
}

// Stop stops sending and waits for the requests in flight.
func (l *phasedLoad) Stop() {
	close(l.stop)
	l.wg.Wait()
}

// fresh sends one GET on a new connection (a new transport, keep-alive
// on) and reports its error and whether the answer said Connection: close.
func fresh(url string, h2c bool) (closed bool, err error) {
	p := new(http.Protocols)
	if h2c {
		p.SetUnencryptedHTTP2(true)
	} else {
		p.SetHTTP1(true)
	}
	tr := &http.Transport{Protocols: p}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get(url)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && (resp.StatusCode != 200 || string(body) != "app /fresh") {
		err = fmt.Errorf("status %d body %q", resp.StatusCode, body)
	}
	return resp.Close, err
}

// Command client shows an http.Client that survives a flapping backend.
// It starts a loopback backend that fails in bursts — for -down of every
// -period it answers 503 (or, with -hang, does not answer at all) — and
// calls it for -duration with two clients side by side: a bare
// http.Client, and one whose Transport is client.Transport (adaptive
// throttling, retries under a budget with backoff, a circuit breaker, a
// bulkhead). It prints, per client, how many calls succeeded, how many
// attempts reached the backend (the load the client added), and latency.
//
//	go run ./examples/client
//	go run ./examples/client -down 400ms -period 1s -hang
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spillwayhq/spillway/breaker"
	"github.com/spillwayhq/spillway/client"
	"github.com/spillwayhq/spillway/httpserver"
	"github.com/spillwayhq/spillway/retry"
	"github.com/spillwayhq/spillway/throttle"
)

func main() {
	err := run(os.Args[1:], os.Stdout)
	if errors.Is(err, flag.ErrHelp) {
		return // -h: the usage is printed; not a failure
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		os.Exit(1)
	}
}

type options struct {
	period, down, duration, timeout, work time.Duration
	rate                                  float64
	hang                                  bool
}

func parse(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("client", flag.ContinueOnError)
	fs.DurationVar(&o.period, "period", time.Second, "the backend's flapping period")
	fs.DurationVar(&o.down, "down", 300*time.Millisecond, "how long of each period the backend fails")
	fs.BoolVar(&o.hang, "hang", false, "fail by hanging (until the client times out) instead of answering 503")
	fs.DurationVar(&o.duration, "duration", 4*time.Second, "how long each client calls (at most 60s)")
	fs.DurationVar(&o.timeout, "timeout", time.Second, "each call's deadline")
	fs.DurationVar(&o.work, "work", 2*time.Millisecond, "the backend's time per healthy answer")
	fs.Float64Var(&o.rate, "rate", 200, "calls per second each client makes (open loop, at most 2000)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case o.period <= 0 || o.down < 0 || o.down >= o.period:
		return o, fmt.Errorf("-down must be in [0, -period), got %v of %v", o.down, o.period)
	case o.duration <= 0 || o.duration > time.Minute:
		return o, fmt.Errorf("-duration: want (0, 60s], got %v", o.duration)
	case o.timeout <= 0:
		return o, fmt.Errorf("-timeout: want > 0, got %v", o.timeout)
	case o.rate <= 0 || o.rate > 2000:
		return o, fmt.Errorf("-rate: want (0, 2000], got %v", o.rate)
	case o.work < 0:
		return o, fmt.Errorf("-work: want ≥ 0, got %v", o.work)
	}
	return o, nil
}

// flapping is the backend: down for the last o.down of every o.period.
type flapping struct {
	o     options
	start time.Time
	hits  atomic.Int64
}

func (f *flapping) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.hits.Add(1)
	if time.Since(f.start)%f.o.period >= f.o.period-f.o.down {
		if f.o.hang {
			<-r.Context().Done()
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	time.Sleep(f.o.work)
	_, _ = io.WriteString(w, "ok\n")
}

// resilient is the http.Client the example recommends.
func resilient(inner http.RoundTripper) (*http.Client, *client.Transport, error) {
	th, err := throttle.New(throttle.Config{}) // K = 2, 2-minute window
	if err != nil {
		return nil, nil, err
	}
	budget, err := retry.NewBudget(retry.BudgetConfig{Ratio: 0.2, MinPerSecond: 5})
	if err != nil {
		return nil, nil, err
	}
	pol, err := retry.NewPolicy(retry.Policy{MaxAttempts: 5, Backoff: retry.Backoff{Base: 0.05, Cap: 0.4}, Budget: budget})
	if err != nil {
		return nil, nil, err
	}
	br, err := breaker.New(breaker.Config{Threshold: 5, Recovery: 0.2})
	if err != nil {
		return nil, nil, err
	}
	bh, err := client.NewBulkhead(64, 20*time.Millisecond)
	if err != nil {
		return nil, nil, err
	}
	tr, err := client.New(client.Config{Transport: inner, Throttle: th, Retry: pol, Breaker: br, Bulkhead: bh})
	if err != nil {
		return nil, nil, err
	}
	return &http.Client{Transport: tr}, tr, nil
}

type result struct {
	calls, ok, local int64
	hits             int64
	p50, p99         time.Duration
}

func run(args []string, out io.Writer) error {
	o, err := parse(args)
	if err != nil {
		return err
	}
	inner := &http.Transport{MaxIdleConnsPerHost: 512}
	defer inner.CloseIdleConnections()
	bare := &http.Client{Transport: inner}
	res, tr, err := resilient(inner)
	if err != nil {
		return err
	}
	var rows [2]result
	for i, c := range []*http.Client{bare, res} {
		r, err := drive(o, c)
		if err != nil {
			return err
		}
		rows[i] = r
	}
	fmt.Fprintf(out, "backend down %v of every %v (%s), %0.f calls/s for %v, deadline %v per call\n\n",
		o.down, o.period, map[bool]string{false: "503", true: "hanging"}[o.hang], o.rate, o.duration, o.timeout)
	fmt.Fprintf(out, "%-10s %7s %9s %12s %16s %8s %8s\n", "client", "calls", "ok %", "local fails", "backend hits", "p50 ms", "p99 ms")
	for i, name := range []string{"bare", "spillway"} {
		r := rows[i]
		fmt.Fprintf(out, "%-10s %7d %8.1f%% %12d %8d (%.2f×) %8.1f %8.1f\n", name, r.calls,
			100*float64(r.ok)/float64(r.calls), r.local, r.hits, float64(r.hits)/float64(r.calls),
			float64(r.p50.Microseconds())/1000, float64(r.p99.Microseconds())/1000)
	}
	st := tr.Stats()
	fmt.Fprintf(out, "\nspillway: %d retries, %d refused locally (throttle, breaker, bulkhead), %d stopped by the budget\n",
		st.Retried, st.Refused, st.Stops[retry.StopBudget])
	return nil
}

// drive calls a fresh flapping backend with c at o.rate for o.duration.
func drive(o options, c *http.Client) (result, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return result{}, err
	}
	be := &flapping{o: o, start: time.Now()}
	srv := httpserver.New(httpserver.Config{Handler: be}) // header, idle, body and send timeouts
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	url := "http://" + ln.Addr().String() + "/"

	var r result
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	interval := time.Duration(float64(time.Second) / o.rate)
	for next := time.Now(); time.Since(be.start) < o.duration; next = next.Add(interval) {
		time.Sleep(time.Until(next))
		r.calls++
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			t0 := time.Now()
			resp, err := c.Do(req)
			d := time.Since(t0)
			var ce *client.Error
			ok := false
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				ok = resp.StatusCode == http.StatusOK
			}
			mu.Lock()
			defer mu.Unlock()
			lat = append(lat, d)
			if ok {
				r.ok++
			} else if errors.As(err, &ce) {
				r.local++
			}
		}()
	}
	wg.Wait()
	r.hits = be.hits.Load()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	if n := len(lat); n > 0 {
		r.p50, r.p99 = lat[(n+1)/2-1], lat[(n*99+99)/100-1]
	}
	return r, nil
}

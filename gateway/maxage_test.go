package gateway

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// ageConfig is a gateway in front of app whose listener has limits
// (YAML inside the braces) and whose route adds X-Gateway: name.
func ageConfig(name, limits, app string) string {
	return `version: 1
admin: {address: off}
reload: {watch: false}
listeners: [{name: web, address: "127.0.0.1:0", limits: {` + limits + `}}]
routes: [{name: main, cluster: app, response_headers: {add: {X-Gateway: ` + name + `}}}]
clusters: [{name: app, endpoints: ["` + app + `"]}]
`
}

func startAged(t *testing.T, name, limits, app string) *Gateway {
	t.Helper()
	file := filepath.Join(t.TempDir(), "gateway.yaml")
	writeFile(t, file, ageConfig(name, limits, app))
	return startFile(t, file)
}

// h2cTransport is x/net's HTTP/2 client with prior knowledge over plain
// TCP; dial picks the address of each new connection.
func h2cTransport(t *testing.T, dial func() string) *http2.Transport {
	tr := &http2.Transport{AllowHTTP: true, DialTLSContext: func(ctx context.Context, network, _ string, _ *tls.Config) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, dial())
	}}
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// paced sends a GET every 20 ms for d through rt and returns how many
// were sent and the failures (transport errors and non-200s).
func paced(rt http.RoundTripper, url string, d time.Duration, seen func(*http.Response)) (sent int, failed []string) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for end := time.Now().Add(d); time.Now().Before(end); <-tick.C {
		sent++
		req, _ := http.NewRequest("GET", url, nil)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			failed = append(failed, err.Error())
			continue
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			failed = append(failed, fmt.Sprintf("status %d, body %v", resp.StatusCode, err))
			continue
		}
		if seen != nil {
			seen(resp)
		}
	}
	return sent, failed
}

// TestMaxAgeH2C: with max_connection_age 300ms and no jitter, an h2c
// client sending every 20 ms for 3 s is sent GOAWAY on each connection
// in turn and opens new ones (at least 3), and no request fails.
func TestMaxAgeH2C(t *testing.T) {
	noLeaks(t)
	g := startAged(t, "a", "max_connection_age: 300ms, max_connection_age_jitter: 0", named(t, "app"))
	var dials atomic.Int64
	addr := g.Addr("web")
	tr := h2cTransport(t, func() string { dials.Add(1); return addr })
	sent, failed := paced(tr, "http://"+addr+"/x", 3*time.Second, nil)
	if len(failed) != 0 || dials.Load() < 3 || sent < 50 {
		t.Fatalf("%d requests, %d dials, failures %q; want none failed, at least 3 dials and 50 requests", sent, dials.Load(), failed)
	}
	t.Logf("h2c: %d requests, 0 failed, %d connections", sent, dials.Load())
}

// TestMaxAgeH1: the same over HTTP/1.1 keep-alive: responses past the age
// carry Connection: close, the client opens new connections, no request
// fails.
func TestMaxAgeH1(t *testing.T) {
	noLeaks(t)
	g := startAged(t, "a", "max_connection_age: 300ms, max_connection_age_jitter: 0", named(t, "app"))
	var dials atomic.Int64
	p := new(http.Protocols)
	p.SetHTTP1(true)
	tr := &http.Transport{Protocols: p, DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	closes := 0
	sent, failed := paced(tr, "http://"+g.Addr("web")+"/x", 3*time.Second, func(r *http.Response) {
		if r.Close {
			closes++
		}
	})
	if len(failed) != 0 || closes < 3 || dials.Load() < 3 || sent < 50 {
		t.Fatalf("%d requests, %d with Connection: close, %d dials, failures %q; want none failed, at least 3 closes and dials, 50 requests",
			sent, closes, dials.Load(), failed)
	}
	t.Logf("HTTP/1.1: %d requests, 0 failed, %d Connection: close, %d connections", sent, closes, dials.Load())
}

// TestMaxAgeRebalances is seed 001's story: 8 long-lived h2c clients all
// connected to gateway A; from then on their dialers alternate between B
// and A for new connections. With a max connection age on A (500 ms), B
// serves a share of the requests within a few seconds: at least 25% of
// the last second's (counted by the X-Gateway header each adds).
func TestMaxAgeRebalances(t *testing.T) {
	noLeaks(t)
	app := named(t, "app")
	ga := startAged(t, "A", "max_connection_age: 500ms", app)
	gb := startAged(t, "B", "", app)
	addrA, addrB := ga.Addr("web"), gb.Addr("web")
	const clients, run = 8, 3 * time.Second
	type hit struct {
		at time.Duration
		gw string
	}
	var mu sync.Mutex
	var hits []hit
	var failures []string
	var wg sync.WaitGroup
	began := time.Now()
	for range clients {
		var n atomic.Int64
		tr := h2cTransport(t, func() string {
			if n.Add(1)%2 == 0 {
				return addrB
			}
			return addrA
		})
		wg.Go(func() {
			_, failed := paced(tr, "http://"+addrA+"/x", run, func(r *http.Response) {
				mu.Lock()
				hits = append(hits, hit{time.Since(began), r.Header.Get("X-Gateway")})
				mu.Unlock()
			})
			mu.Lock()
			failures = append(failures, failed...)
			mu.Unlock()
		})
	}
	wg.Wait()
	var firstA, lastA, lastB int
	for _, h := range hits {
		switch {
		case h.at < 200*time.Millisecond && h.gw == "A":
			firstA++
		case h.at < 200*time.Millisecond:
			t.Errorf("a request at %v reached %q before any connection was old enough to leave A", h.at, h.gw)
		case h.at >= run-time.Second && h.gw == "A":
			lastA++
		case h.at >= run-time.Second && h.gw == "B":
			lastB++
		}
	}
	if len(failures) != 0 {
		t.Errorf("%d requests failed: %q", len(failures), failures)
	}
	if lastA+lastB < 100 || float64(lastB) < 0.25*float64(lastA+lastB) {
		t.Fatalf("last second: %d requests to A, %d to B; want at least 100, a quarter or more to B", lastA, lastB)
	}
	t.Logf("%d requests: first 200 ms %d to A; last second %d to A, %d to B", len(hits), firstA, lastA, lastB)
}

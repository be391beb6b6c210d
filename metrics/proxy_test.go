package metrics

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"testing"
	"time"

	"github.com/spillwayhq/spillway/balancer"
	"github.com/spillwayhq/spillway/proxy"
	"github.com/spillwayhq/spillway/request"
	"github.com/spillwayhq/spillway/upstream"
)

// fixedBackend answers every bodiless request head with one canned
// response, allocating nothing per request, and returns its address.
func fixedBackend(tb testing.TB) string {
	tb.Helper()
	resp := []byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n\r\nok\n")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serveFixed(c, resp)
		}
	}()
	return ln.Addr().String()
}

func serveFixed(c net.Conn, resp []byte) {
	defer c.Close()
	br := bufio.NewReaderSize(c, 4096)
	for {
		for {
			line, err := br.ReadSlice('\n')
			if err != nil {
				return
			}
			if len(line) == 2 { // the blank line ending the head
				break
			}
		}
		if _, err := c.Write(resp); err != nil {
			return
		}
	}
}

// refusingAddr returns a loopback address nothing listens on.
func refusingAddr(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

type oneRoute struct{ rt *proxy.Route }

func (o oneRoute) Route(*request.View) (*proxy.Route, bool) { return o.rt, true }

// proxiedRoute builds a route to a one-endpoint round-robin cluster, as
// the gateway's build does, and serves it on a loopback proxy.Server.
func proxiedRoute(tb testing.TB, backend string) (*proxy.Route, string) {
	tb.Helper()
	set, err := balancer.NewSet(balancer.SetConfig{})
	if err != nil {
		tb.Fatal(err)
	}
	set.Update(0, []balancer.Endpoint{{Addr: backend}})
	pool := upstream.NewPool(backend, upstream.Config{MaxIdle: 256, ConnectTimeout: time.Second})
	tb.Cleanup(pool.Close)
	pools := map[string]*upstream.Pool{backend: pool}
	cl := &proxy.Cluster{Name: "app", Set: set, Picker: balancer.Loaded{Picker: &balancer.RoundRobin{}}}
	cl.Pools.Store(&pools)
	cl.Init()
	rt := &proxy.Route{Name: "api", Cluster: cl}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	s := proxy.NewServer(proxy.Config{}, oneRoute{rt})
	done := make(chan struct{})
	go func() { _ = s.Serve(ln); close(done) }()
	tb.Cleanup(func() {
		_ = ln.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
		<-done
	})
	return rt, ln.Addr().String()
}

// observe gives rt and its cluster observers of a fresh Metrics.
func observe(tb testing.TB, rt *proxy.Route) *Metrics {
	tb.Helper()
	m := newMetrics(tb, Options{})
	g := m.Generation([]RouteInfo{{rt.Name, rt.Cluster.Name}}, []ClusterInfo{ClusterOf(rt.Cluster)})
	rt.Observer, rt.Cluster.Observer = g.Route(rt.Name), g.Cluster(rt.Cluster.Name)
	return m
}

var benchRequest = []byte("GET / HTTP/1.1\r\nHost: bench\r\nUser-Agent: bench\r\nAccept: */*\r\n\r\n")

// exchange sends benchRequest on c and reads the response; it reports
// the status (0 when the response could not be read).
func exchange(c net.Conn, br *bufio.Reader) int {
	if _, err := c.Write(benchRequest); err != nil {
		return 0
	}
	status, n := 0, -1
	for first := true; ; first = false {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return 0
		}
		if first && len(line) >= 12 {
			status = int(line[9]-'0')*100 + int(line[10]-'0')*10 + int(line[11]-'0')
		}
		if len(line) == 2 {
			break
		}
		if len(line) > 16 && bytes.EqualFold(line[:16], []byte("content-length: ")) {
			n = 0
			for _, d := range bytes.TrimSpace(line[16:]) {
				n = n*10 + int(d-'0')
			}
		}
	}
	if n < 0 {
		return 0
	}
	if _, err := br.Discard(n); err != nil {
		return 0
	}
	return status
}

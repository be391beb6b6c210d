package gateway

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The policy chain's cost on the request path (issue 13 item 8): a gateway
// built from a configuration as spillway serve builds it (metrics on, admin
// endpoint off), measured the way proxy's BenchmarkProxyH1 measures the
// bare engine — kept-alive HTTP/1.1 connections on loopback, a canned
// client and canned backends that allocate nothing per request, so ns/op
// and allocs/op are the gateway's (plus the loopback's syscalls). Compare
// req/s as 1e9 / ns/op: the full chain should cost at most 10 % of Bare's
// rate, a refusal at least 5 times the proxied rate. cpu-ns/op is the
// process's CPU time per request (gateway, canned client and upstreams,
// kernel included): on a shared machine it moves less than ns/op.

// benchRoute is the route every benchmark sends to.
const benchRoute = `
routes:
  - cluster: app
    policies: %s
`

// BenchmarkGatewayBare: a route with no policy at all (retries off, so
// not even the budget), one endpoint.
func BenchmarkGatewayBare(b *testing.B) {
	be := cannedUpstream(b)
	benchGateway(b, fmt.Sprintf(benchRoute, "{retry: {attempts: 1}}")+`
clusters: [{name: app, picker: round_robin, endpoints: ["`+be+`"]}]
`, 200, "")
}

// BenchmarkGatewayDefault: a route as written without policies — retries
// within a budget, which every request pays a deposit into.
func BenchmarkGatewayDefault(b *testing.B) {
	be := cannedUpstream(b)
	benchGateway(b, fmt.Sprintf(benchRoute, "{}")+`
clusters: [{name: app, picker: round_robin, endpoints: ["`+be+`"]}]
`, 200, "")
}

// fullChain is the route and cluster of the full-chain benchmarks: a
// memory or Redis rate-limit rule per client IP that never refuses,
// gradient2 admission whose limit stays far above the benchmark's
// concurrency (so it samples every request and refuses none), a retry
// budget, a consecutive-failures breaker, and least_request (P2C) over two
// endpoints.
const fullChain = `
routes:
  - cluster: app
    policies:
      ratelimit:
        rules: [{id: bench-ip, key: [ip], rate: 1000000000, per: 1s}]
      retry: {attempts: 2}
clusters:
  - name: app
    picker: least_request
    endpoints: ["%s", "%s"]
    admission: {algorithm: gradient2, initial_limit: 256, min_limit: 128, max_limit: 1000}
    breaker: {window: consecutive, threshold: 5}
`

// BenchmarkGatewayFullChain: fullChain with the memory store.
func BenchmarkGatewayFullChain(b *testing.B) {
	benchGateway(b, fmt.Sprintf(fullChain, cannedUpstream(b), cannedUpstream(b)), 200, "")
}

// BenchmarkGatewayFullChainRedis: fullChain with the rule on the shared
// Redis (SPILLWAY_REDIS_ADDR, else 127.0.0.1:6379; skipped without one),
// under a prefix of its own: every request is one round trip to Redis.
func BenchmarkGatewayFullChainRedis(b *testing.B) {
	addr := benchRedis(b)
	store := fmt.Sprintf("ratelimit: {store: redis, redis: {addresses: [%q], prefix: bench-%d-%d}}\n", addr, os.Getpid(), time.Now().UnixNano())
	benchGateway(b, store+fmt.Sprintf(fullChain, cannedUpstream(b), cannedUpstream(b)), 200, "")
}

// BenchmarkGatewayRefused429: every request past the first is refused by
// a rate-limit rule (one budget for all, one request an hour) with its
// pre-built 429; nothing reaches the backend.
func BenchmarkGatewayRefused429(b *testing.B) {
	be := cannedUpstream(b)
	benchGateway(b, fmt.Sprintf(benchRoute, "{ratelimit: {rules: [{id: closed, rate: 1, per: 1h}]}}")+`
clusters: [{name: app, endpoints: ["`+be+`"]}]
`, 429, "ratelimit:closed", spendOne)
}

// spendOne sends the one request the rule lets through.
func spendOne(b *testing.B, addr string) {
	if code, _, err := exchange(b, addr); code != 200 {
		b.Fatalf("the first request: %d (%v), want 200", code, err)
	}
}

// BenchmarkGatewayRefused503: the cluster's admission holds one place
// (fixed limit 1, no queue; the route's class is critical, whose share is
// the whole limit), taken by a request its endpoint never answers; every
// other request is refused 503 admit:limit.
func BenchmarkGatewayRefused503(b *testing.B) {
	be, heads := silentUpstream(b)
	benchGateway(b, fmt.Sprintf(benchRoute, "{class: critical, retry: {attempts: 1}}")+`
    timeouts: {response_header: 1h, request: 1h}
clusters:
  - name: app
    endpoints: ["`+be+`"]
    admission: {algorithm: fixed, initial_limit: 1, queue: {discipline: reject}}
`, 503, "admit:limit", func(b *testing.B, addr string) { holdOne(b, addr, heads) })
}

// holdOne sends one request that takes the admission's only place, waits
// until the upstream has it (heads), then until the gateway refuses the
// next one.
func holdOne(b *testing.B, addr string, heads <-chan struct{}) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	if _, err := c.Write(benchRequest); err != nil {
		b.Fatal(err)
	}
	select {
	case <-heads:
	case <-time.After(5 * time.Second):
		b.Fatal("the held request did not reach the upstream")
	}
	for deadline := time.Now().Add(5 * time.Second); ; {
		if code, _, _ := exchange(b, addr); code == 503 {
			return
		}
		if time.Now().After(deadline) {
			b.Fatal("the held request did not take the admission's place")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

var benchRequest = []byte("GET / HTTP/1.1\r\nHost: bench\r\nUser-Agent: wrk\r\nAccept: */*\r\n\r\n")

// benchGateway starts a gateway from routes (the file past its listeners),
// runs prepare (if any) with its address, checks that a request is
// answered want with the reason code wantReason ("": none), and then
// measures requests from 8 × GOMAXPROCS kept-alive connections, each
// answered want.
func benchGateway(b *testing.B, routes string, want int, wantReason string, prepare ...func(*testing.B, string)) {
	text := "version: 1\nadmin: {address: \"off\"}\nreload: {watch: false}\nlisteners: [{name: web, address: \"127.0.0.1:0\"}]\n" + routes
	g := startOpts(b, text, Options{Logger: slog.New(slog.DiscardHandler)})
	addr := g.Addr("web")
	for _, p := range prepare {
		p(b, addr)
	}
	if code, reason, err := exchange(b, addr); code != want || reason != wantReason || err != nil {
		b.Fatalf("first request: status %d, reason %q (%v); want %d %q", code, reason, err, want, wantReason)
	}
	b.ReportAllocs()
	b.SetParallelism(8)
	cpu0 := cpuTime(b)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Error(err)
			return
		}
		defer c.Close()
		br := bufio.NewReaderSize(c, 8192)
		for pb.Next() {
			if _, err := c.Write(benchRequest); err != nil {
				b.Error(err)
				return
			}
			if code, ok := readAnswer(br); !ok || code != want {
				b.Errorf("status %d (read ok %v), want %d", code, ok, want)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
}

// cpuTime is the process's CPU time so far (user and system), in
// nanoseconds: per request it is the work done, which other processes on
// the machine inflate less than they inflate the wall clock's ns/op.
func cpuTime(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// exchange sends one request on a new connection and returns the status
// and the Spillway-Reason field of the answer.
func exchange(b *testing.B, addr string) (int, string, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return 0, "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(benchRequest); err != nil {
		return 0, "", err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, "", err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Spillway-Reason"), err
}

// readAnswer reads one response with a Content-Length body and returns
// its status.
func readAnswer(br *bufio.Reader) (code int, ok bool) {
	n := -1
	for first := true; ; first = false {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return code, false
		}
		if first && len(line) >= 12 {
			code = int(line[9]-'0')*100 + int(line[10]-'0')*10 + int(line[11]-'0')
		}
		if len(line) == 2 {
			break
		}
		if len(line) > 16 && bytes.EqualFold(line[:16], []byte("Content-Length: ")) {
			n = 0
			for _, c := range line[16 : len(line)-2] {
				n = n*10 + int(c-'0')
			}
		}
	}
	if n < 0 {
		return code, false
	}
	_, err := br.Discard(n)
	return code, err == nil
}

// cannedUpstream answers every bodiless request head with one fixed
// response, allocating nothing per request; closed when b ends.
func cannedUpstream(b *testing.B) string {
	resp := []byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\nhello, world\n")
	return upstreamServer(b, func(c net.Conn, br *bufio.Reader) bool {
		_, err := c.Write(resp)
		return err == nil
	})
}

// silentUpstream reads requests and never answers, signalling each head
// on the channel it returns; closed when b ends.
func silentUpstream(b *testing.B) (string, <-chan struct{}) {
	heads := make(chan struct{}, 16)
	return upstreamServer(b, func(net.Conn, *bufio.Reader) bool {
		select {
		case heads <- struct{}{}:
		default:
		}
		return true
	}), heads
}

// upstreamServer serves each connection's request heads with answer until
// it returns false or the connection ends.
func upstreamServer(b *testing.B, answer func(net.Conn, *bufio.Reader) bool) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	conns := make(chan net.Conn, 1024)
	b.Cleanup(func() {
		_ = ln.Close()
		for {
			select {
			case c := <-conns:
				_ = c.Close()
			default:
				return
			}
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			select {
			case conns <- c:
			default:
			}
			go func() {
				defer c.Close()
				br := bufio.NewReaderSize(c, 8192)
				for headDone(br) && answer(c, br) {
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// headDone reads one bodiless request head.
func headDone(br *bufio.Reader) bool {
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return false
		}
		if len(line) == 2 {
			return true
		}
	}
}

// benchRedis returns the shared Redis's address, or skips b.
func benchRedis(b *testing.B) string {
	addr := os.Getenv("SPILLWAY_REDIS_ADDR")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: time.Second, MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		b.Skipf("no Redis at %s (SPILLWAY_REDIS_ADDR): %v", addr, err)
	}
	return strings.TrimSpace(addr)
}

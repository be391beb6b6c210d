package main

import (
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/spillwayhq/spillway/internal/leakcheck"
	"github.com/spillwayhq/spillway/internal/maintest"
)

// TestServeLogsGoRedisThroughSlog: with the rate-limit store on a Redis
// that is not there, go-redis's own complaints (failed dials) reach the
// serve command's log as structured slog records (source=go-redis), and
// none is printed by go-redis's default logger ("redis: <date> …").
func TestServeLogsGoRedisThroughSlog(t *testing.T) {
	maintest.Child(t, main)
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.Verify(t, 10*time.Second, ignore) })
	be := newSlowBackend(t, time.Millisecond)
	gone := closedAddr(t)
	cfg := "version: 1\nadmin: {address: off}\nreload: {watch: false}\n" +
		"listeners: [{name: web, address: \"127.0.0.1:0\"}]\n" +
		"ratelimit: {store: redis, redis: {addresses: [\"" + gone + "\"], timeout: 20ms, dial_timeout: 20ms}}\n" +
		"routes: [{name: main, cluster: app, policies: {ratelimit: {rules: [{id: per-ip, key: [ip], rate: 100, per: 1s}]}}}]\n" +
		"clusters: [{name: app, endpoints: [\"" + be.addr + "\"]}]\n"
	file := tempFile(t, "gateway.yaml", cfg)
	p := maintest.Start(t, main, "serve", "--config", file)
	web := p.WaitStderr(listeningRE, 30*time.Second)
	if web == nil {
		t.Fatalf("the child did not say where it listens; stderr:\n%s", p.Stderr())
	}
	c := &http.Client{Timeout: 5 * time.Second}
	waitFor(t, 10*time.Second, "a go-redis line in the log", func() bool {
		if resp, err := c.Get("http://" + web[1] + "/x"); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		return strings.Contains(p.Stderr(), "source=go-redis")
	})
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code, ok := p.Wait(20 * time.Second); !ok || code != 0 {
		t.Fatalf("exit %d (ended %v); stderr:\n%s", code, ok, p.Stderr())
	}
	for _, line := range strings.Split(p.Stderr(), "\n") {
		if strings.HasPrefix(line, "redis: ") {
			t.Errorf("an unstructured go-redis line: %q", line)
		}
	}
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

package main

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/spillwayhq/spillway/internal/leakcheck"
	"github.com/spillwayhq/spillway/internal/maintest"
)

var (
	listeningRE = regexp.MustCompile(`msg="gateway: listening" listener=web address=(127\.0\.0\.1:\d+)`)
	adminRE     = regexp.MustCompile(`msg=admin address=(127\.0\.0\.1:\d+)`)
)

// TestServeDrainsOnSIGTERM runs spillway serve in a child process (drain
// delay 1s, timeout 5s) under 500 requests a second, HTTP/1.1 keep-alive
// and h2c in turn, with 4 slow requests (the backend holds them 1.5 s) in
// flight, and sends it SIGTERM: /ready turns 503 at once; during the
// delay fresh connections are accepted and served (HTTP/1.1 answers say
// Connection: close); every request started before SIGTERM or during the
// delay completes with 200, the slow ones too; after the delay new
// connections are refused while the slow requests still run; the process
// exits 0.
func TestServeDrainsOnSIGTERM(t *testing.T) {
	maintest.Child(t, main)
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.Verify(t, 10*time.Second, ignore) })
	be := newSlowBackend(t, 1500*time.Millisecond)
	file := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(file, []byte(`version: 1
admin: {address: "127.0.0.1:0"}
drain: {delay: 1s, timeout: 5s}
reload: {watch: false}
listeners: [{name: web, address: "127.0.0.1:0"}]
routes: [{name: main, cluster: app}]
clusters: [{name: app, endpoints: ["`+be.addr+`"]}]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	p := maintest.Start(t, main, "serve", "--config", file)
	web, adm := p.WaitStderr(listeningRE, 30*time.Second), p.WaitStderr(adminRE, 30*time.Second)
	if web == nil || adm == nil {
		t.Fatalf("the child did not say where it listens; stderr:\n%s", p.Stderr())
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("child stderr:\n%s", p.Stderr())
		}
	})
	base, ready := "http://"+web[1], "http://"+adm[1]+"/ready"
	probe := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	waitFor(t, 10*time.Second, "/ready 200", func() bool { return status(probe, ready) == 200 })

	load := startPhasedLoad(base+"/load", 500, newClient(t, false), newClient(t, true))
	waitFor(t, 10*time.Second, "1,000 load requests answered", func() bool { return load.counts[0].ok.Load() >= 1000 })
	slow := make(chan error, 4)
	for i := range 4 {
		c := newClient(t, i%2 == 1)
		go func() { slow <- getWant(c, base+"/slow", "app /slow") }()
	}
	waitFor(t, 10*time.Second, "4 slow requests at the backend", func() bool { return be.slow.Load() == 4 })

	sigterm := time.Now()
	load.signalled.Store(sigterm.UnixNano())
	load.cutoff.Store(sigterm.Add(500 * time.Millisecond).UnixNano()) // well inside the 1s delay
	load.closed.Store(sigterm.Add(time.Second).UnixNano())            // the listeners close after the delay
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	loadDone := make(chan struct{})
	time.AfterFunc(500*time.Millisecond, func() { load.Stop(); close(loadDone) })
	readyAfter, oks := time.Duration(0), 0
	for readyAfter == 0 && time.Since(sigterm) < 900*time.Millisecond {
		switch status(probe, ready) {
		case 503:
			readyAfter = time.Since(sigterm)
		case 200:
			oks++
		}
	}
	if readyAfter == 0 {
		t.Fatalf("/ready not 503 within 900ms of SIGTERM (%d answers 200)", oks)
	}
	// Fresh connections during the delay, until 500ms after SIGTERM.
	var freshOK, freshClose, freshSent int
	for i := 0; time.Since(sigterm) < 500*time.Millisecond; i++ {
		freshSent++
		closed, err := fresh(base+"/fresh", i%2 == 1)
		switch {
		case err != nil:
			t.Errorf("fresh connection %d, %v after SIGTERM (h2c %v): %v", i, time.Since(sigterm), i%2 == 1, err)
		case i%2 == 0 && !closed:
			t.Errorf("fresh HTTP/1.1 connection %d during the drain delay: the answer lacks Connection: close", i)
		default:
			freshOK++
			if closed {
				freshClose++
			}
		}
		time.Sleep(10 * time.Millisecond) // pacing: about 50 connections in the delay
	}
	// After the delay the listener closes: refused while the slow requests run.
	var refusedAfter time.Duration
	for refusedAfter == 0 && time.Since(sigterm) < 5*time.Second {
		c, err := net.DialTimeout("tcp", web[1], time.Second)
		if err == nil {
			c.Close()
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("dial after the delay: %v, want connection refused", err)
		}
		refusedAfter = time.Since(sigterm)
	}
	slowRunning := len(slow) < 4 && !p.Exited()
	for range 4 {
		if err := <-slow; err != nil {
			t.Errorf("slow request in flight at SIGTERM: %v", err)
		}
	}
	code, exited := p.Wait(15 * time.Second)
	total := time.Since(sigterm)
	<-loadDone
	before, during := &load.counts[0], &load.counts[1]
	if !exited || code != 0 {
		t.Errorf("exit: status %d, exited %v; want 0", code, exited)
	}
	if refusedAfter < time.Second || !slowRunning {
		t.Errorf("connections refused %v after SIGTERM, slow requests still running %v; want refused after the 1s delay, before they end", refusedAfter, slowRunning)
	}
	if before.failed.Load() != 0 || during.failed.Load() != 0 || before.ok.Load() != before.sent.Load() || during.ok.Load() != during.sent.Load() {
		t.Errorf("load before SIGTERM: %v; during the delay: %v; failures %q", before, during, load.errs)
	}
	if during.closes.Load() == 0 {
		t.Errorf("load during the delay: %v; want HTTP/1.1 answers with Connection: close", during)
	}
	t.Logf("load before SIGTERM: %v; during the delay: %v; skipped %d, late %d; /ready 503 after %v (%d answers 200 before); "+
		"fresh connections in the delay: %d sent, %d ok, %d with Connection: close; slow requests 4, ok 4; refused after %v; exit %d after %v",
		before, during, load.skipped.Load(), load.late.Load(), readyAfter.Round(time.Millisecond), oks, freshSent, freshOK, freshClose,
		refusedAfter.Round(time.Millisecond), code, total.Round(time.Millisecond))
}

// waitFor polls cond every 10 ms for at most timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", timeout, what)
		}
	}
}

// status returns the answer's status, 0 on a transport error.
func status(c *http.Client, url string) int {
	resp, err := c.Get(url)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// getWant sends a GET and wants 200 with body want.
func getWant(c *http.Client, url, want string) error {
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && (resp.StatusCode != 200 || string(body) != want) {
		err = errors.New("status " + resp.Status + " body " + string(body))
	}
	return err
}

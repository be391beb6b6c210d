package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/spillwayhq/spillway/internal/leakcheck"
	"github.com/spillwayhq/spillway/internal/maintest"
)

// TestServeReloadsOnSIGHUP: with the watch off, a changed file is applied
// on SIGHUP (a response header appears), a broken one sent the same way is
// refused with its position in the log while the running configuration
// keeps serving, and SIGTERM still ends the process with status 0.
func TestServeReloadsOnSIGHUP(t *testing.T) {
	maintest.Child(t, main)
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.Verify(t, 10*time.Second, ignore) })
	be := newSlowBackend(t, time.Millisecond)
	file := filepath.Join(t.TempDir(), "gateway.yaml")
	head := "version: 1\nadmin: {address: off}\nreload: {watch: false}\nlisteners: [{name: web, address: \"127.0.0.1:0\"}]\n"
	clusters := "clusters: [{name: app, endpoints: [\"" + be.addr + "\"]}]\n"
	write := func(routes string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(head+routes+clusters), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("routes: [{name: main, cluster: app}]\n")
	p := maintest.Start(t, main, "serve", "--config", file)
	web := p.WaitStderr(listeningRE, 30*time.Second)
	if web == nil {
		t.Fatalf("the child did not say where it listens; stderr:\n%s", p.Stderr())
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("child stderr:\n%s", p.Stderr())
		}
	})
	c := &http.Client{Timeout: 5 * time.Second}
	header := func() (int, string) {
		resp, err := c.Get("http://" + web[1] + "/x")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, resp.Header.Get("Via-Gateway")
	}
	if code, via := header(); code != 200 || via != "" {
		t.Fatalf("before the reload: %d, Via-Gateway %q", code, via)
	}

	write("routes: [{name: main, cluster: app, response_headers: {add: {Via-Gateway: reloaded}}}]\n")
	if err := p.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the reloaded header", func() bool { _, via := header(); return via == "reloaded" })

	write("routes: [{name: main, cluster: nope}]\n")
	if err := p.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	want := file + `:5:32: routes[0].cluster: no cluster is named` // the text handler quotes the rest
	waitFor(t, 10*time.Second, "the refusal in the log", func() bool { return strings.Contains(p.Stderr(), want) })
	if code, via := header(); code != 200 || via != "reloaded" {
		t.Fatalf("after a refused reload: %d, Via-Gateway %q; want the running configuration's answer", code, via)
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code, ok := p.Wait(20 * time.Second); !ok || code != 0 {
		t.Fatalf("exit status %d (exited %v), want 0", code, ok)
	}
}

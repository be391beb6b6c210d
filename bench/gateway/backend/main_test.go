package main

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/spillwayhq/spillway/internal/leakcheck"
)

// serve starts the benchmark server on a loopback port and returns its URL
// and a stop function that closes it.
func serve(t *testing.T) (url string, stop func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer()
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), func() { srv.Close(); <-done }
}

// client speaks HTTP/1.1 only, or h2c with prior knowledge only.
func client(h2c bool) *http.Client {
	var p http.Protocols
	if h2c {
		p.SetUnencryptedHTTP2(true)
	} else {
		p.SetHTTP1(true)
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Protocols: &p}}
}

// get sends one request and returns the status, protocol, headers and body.
func get(t *testing.T, c *http.Client, method, url string) (int, string, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Proto, resp.Header, string(b)
}

// GET / answers the fixed body over HTTP/1.1 and over h2c prior knowledge,
// on one port; other paths and methods are refused.
func TestBackendAnswers(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	url, stop := serve(t)
	for _, h2c := range []bool{false, true} {
		c := client(h2c)
		wantProto := "HTTP/1.1"
		if h2c {
			wantProto = "HTTP/2.0"
		}
		for i := 0; i < 2; i++ { // the second request reuses the connection
			code, proto, h, b := get(t, c, "GET", url+"/")
			if code != 200 || proto != wantProto || b != "hello, world\n" {
				t.Errorf("h2c=%v GET /: got %d %s %q, want 200 %s %q", h2c, code, proto, b, wantProto, "hello, world\n")
			}
			if h.Get("Content-Type") != "text/plain; charset=utf-8" || h.Get("Content-Length") != "13" {
				t.Errorf("h2c=%v GET /: headers %v", h2c, h)
			}
		}
		if code, _, h, b := get(t, c, "HEAD", url+"/"); code != 200 || b != "" || h.Get("Content-Length") != "13" {
			t.Errorf("h2c=%v HEAD /: got %d %q %v", h2c, code, b, h)
		}
		if code, _, _, _ := get(t, c, "GET", url+"/other"); code != 404 {
			t.Errorf("h2c=%v GET /other: got %d, want 404", h2c, code)
		}
		if code, _, h, _ := get(t, c, "POST", url+"/"); code != 405 || h.Get("Allow") != "GET, HEAD" {
			t.Errorf("h2c=%v POST /: got %d Allow %q, want 405 Allow %q", h2c, code, h.Get("Allow"), "GET, HEAD")
		}
		c.CloseIdleConnections()
	}
	stop()
	leakcheck.Verify(t, 5*time.Second, ignore)
}

// Bad usage exits 2 with a message; an address already taken exits 1.
func TestBackendBadUsage(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"-nope"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "-nope") {
		t.Errorf("-nope: exit %d, stderr %q", code, errb.String())
	}
	errb.Reset()
	if code := run([]string{"extra"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), `unexpected argument "extra"`) {
		t.Errorf("extra: exit %d, stderr %q", code, errb.String())
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	errb.Reset()
	if code := run([]string{"-addr", ln.Addr().String()}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "cannot listen") {
		t.Errorf("taken address: exit %d, stderr %q", code, errb.String())
	}
}

package gateway

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// client is one way of speaking to the gateway.
type client struct {
	name  string
	proto string // the response's Proto the client must see
	tls   bool   // dials the TLS listener
	rt    *http.Transport
}

// clients returns an HTTP/1.1 client (plaintext), an h2 client (TLS,
// ALPN) trusting ca for gw.test, and an h2c prior-knowledge client.
func clients(ca *testCert) []client {
	h1, h2, h2c := new(http.Protocols), new(http.Protocols), new(http.Protocols)
	h1.SetHTTP1(true)
	h2.SetHTTP2(true)
	h2c.SetUnencryptedHTTP2(true)
	return []client{
		{"http1", "HTTP/1.1", false, &http.Transport{Protocols: h1}},
		{"h2", "HTTP/2.0", true, &http.Transport{Protocols: h2,
			TLSClientConfig: &tls.Config{RootCAs: pool(ca), ServerName: ca.host}}},
		{"h2c", "HTTP/2.0", false, &http.Transport{Protocols: h2c}},
	}
}

// TestProtocolMatrix sends a GET and a POST with a body from each client
// protocol (HTTP/1.1, h2 over TLS, h2c with prior knowledge) to each
// upstream protocol (an HTTP/1.1-only backend, an h2c-only backend), all
// from one YAML file.
func TestProtocolMatrix(t *testing.T) {
	noLeaks(t)
	gw := newCert(t, t.TempDir(), "gw.test")
	h1 := protoBackend(t, "one", false)
	h2c := protoBackend(t, "two", true)
	g := start(t, `
version: 1
admin: {address: off}
listeners:
  - {name: plain, address: "127.0.0.1:0"}
  - {name: secure, address: "127.0.0.1:0", tls: {certificates: [`+gw.yaml()+`]}}
routes:
  - {match: {prefix: /h1}, cluster: h1}
  - {match: {prefix: /h2c}, cluster: h2c}
clusters:
  - {name: h1, endpoints: ["`+h1+`"]}
  - {name: h2c, protocol: h2c, endpoints: ["`+h2c+`"]}
`)
	for _, cl := range clients(gw) {
		base := "http://" + g.Addr("plain")
		if cl.tls {
			base = "https://" + g.Addr("secure")
		}
		c := &http.Client{Transport: cl.rt}
		for _, tc := range []struct{ path, want string }{
			{"/h1/x", `one HTTP/1.1 %s /h1/x upgrade="" body=%q`},
			{"/h2c/y", `two HTTP/2.0 %s /h2c/y upgrade="" body=%q`},
		} {
			for _, method := range []string{"GET", "POST"} {
				body := ""
				if method == "POST" {
					body = "ping from " + cl.name
				}
				want := strings.Replace(strings.Replace(tc.want, "%s", method, 1), "%q", `"`+body+`"`, 1)
				proto, got := do(t, c, method, base+tc.path, body)
				if proto != cl.proto || got != want {
					t.Errorf("%s %s %s: %s %q, want %s %q", cl.name, method, tc.path, proto, got, cl.proto, want)
				}
			}
		}
		cl.rt.CloseIdleConnections()
	}
}

// do sends one request and returns the response's protocol and body; any
// status but 200 fails the test.
func do(t *testing.T, c *http.Client, method, url, body string) (string, string) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, url, err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("%s %s: status %d: %s", method, url, resp.StatusCode, b)
	}
	return resp.Proto, string(b)
}

// switcher is an HTTP/1.1 backend that would switch to h2c for any
// request asking to (it answers 101 and closes), and answers every other
// request 200. It counts the requests it reads.
type switcher struct {
	addr     string
	requests atomic.Int64
	switched atomic.Int64
}

func newSwitcher(t *testing.T) *switcher {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &switcher{addr: ln.Addr().String()}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.serve(c) // one connection at a time is enough here
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); <-done })
	return s
}

func (s *switcher) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, req.Body)
		s.requests.Add(1)
		if strings.EqualFold(req.Header.Get("Upgrade"), "h2c") {
			s.switched.Add(1)
			_, _ = io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n")
			return
		}
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nplain")
	}
}

// h2cUpgrade is the deprecated RFC 7540 h2c upgrade request (with an
// empty HTTP2-Settings payload, as curl --http2 sends it).
const h2cUpgrade = `GET /up HTTP/1.1
Host: gw.test
Connection: Upgrade, HTTP2-Settings
Upgrade: h2c
HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA

`

// TestH2CUpgradeNotHonoured sends the deprecated h2c Upgrade to a listener
// with http2 on: the gateway refuses it with 400, on a route with the
// default upgrades (websocket) and on one that lists h2c, never reaching
// the backend (which would switch) and never answering 101; the same
// connection is then still an HTTP/1.1 connection that serves a plain
// request.
func TestH2CUpgradeNotHonoured(t *testing.T) {
	noLeaks(t)
	sw := newSwitcher(t)
	g := start(t, `
version: 1
admin: {address: off}
listeners: [{name: plain, address: "127.0.0.1:0"}]
routes:
  - {match: {path: /up}, cluster: sw}
  - {match: {path: /listed}, cluster: sw, upgrades: [websocket, H2C]}
  - {cluster: sw}
clusters: [{name: sw, endpoints: ["`+sw.addr+`"]}]
`)
	for i, path := range []string{"/up", "/listed"} {
		c, br := dialRaw(t, g.Addr("plain"))
		req := strings.Replace(h2cUpgrade, "/up", path, 1)
		if _, err := io.WriteString(c, crlf(req)); err != nil {
			t.Fatal(err)
		}
		code, upgrade, body := readRaw(t, br)
		if code != 400 || upgrade != "" || !strings.Contains(body, `"status":400`) {
			t.Fatalf("h2c Upgrade on %s: %d (Upgrade: %q) %s, want a 400 problem without Upgrade", path, code, upgrade, body)
		}
		if _, err := io.WriteString(c, "GET /after HTTP/1.1\r\nHost: gw.test\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		if code, _, body := readRaw(t, br); code != 200 || body != "plain" {
			t.Fatalf("plain request after the refused upgrade on %s: %d %q, want 200 \"plain\"", path, code, body)
		}
		if n, s := sw.requests.Load(), sw.switched.Load(); n != int64(i+1) || s != 0 {
			t.Fatalf("after %s the backend read %d requests and switched %d, want %d (the plain ones) and 0", path, n, s, i+1)
		}
	}
}

// readRaw reads one response: its status, Upgrade field and body.
func readRaw(t *testing.T, br *bufio.Reader) (int, string, string) {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Upgrade"), string(b)
}

package gateway

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
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
// request 200 "plain". It counts the requests it reads, those that still
// carried Upgrade or HTTP2-Settings, and the switches.
type switcher struct {
	addr     string
	requests atomic.Int64
	carried  atomic.Int64
	switched atomic.Int64
}

func newSwitcher(t *testing.T) *switcher {
	t.Helper()
	s := &switcher{}
	s.addr, _ = rawServer(t, s.serve)
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
		up := req.Header.Get("Upgrade")
		if up != "" || req.Header.Get("Http2-Settings") != "" {
			s.carried.Add(1)
		}
		if strings.Contains(strings.ToLower(up), "h2c") {
			s.switched.Add(1)
			_, _ = io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n")
			return
		}
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nplain")
	}
}

// h2cUpgrade is the deprecated RFC 7540 h2c upgrade request (with the
// HTTP2-Settings payload curl --http2 sends).
const h2cUpgrade = `GET /up HTTP/1.1
Host: gw.test
Connection: Upgrade, HTTP2-Settings
Upgrade: h2c
HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA

`

// TestH2CUpgradeNotHonoured sends the deprecated h2c Upgrade to a listener
// with http2 on. The engine ignores it, as a server may ignore any
// Upgrade: the request goes on in HTTP/1.1 without Upgrade and
// HTTP2-Settings (the backend, which would switch, never sees them), the
// answer is the backend's 200, never a 101, and the connection then
// serves another HTTP/1.1 request. That holds on a route with the default
// upgrades (websocket) and on one that lists h2c; there an Upgrade
// offering websocket and h2c together is refused with 400, h2c never
// being an allowed token.
func TestH2CUpgradeNotHonoured(t *testing.T) {
	noLeaks(t)
	sw := newSwitcher(t)
	g := start(t, `
version: 1
admin: {address: off}
listeners: [{name: plain, address: "127.0.0.1:0"}]
routes:
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
		if code, upgrade, body := readRaw(t, br); code != 200 || upgrade != "" || body != "plain" {
			t.Fatalf("h2c Upgrade on %s: %d (Upgrade: %q) %q, want the backend's 200 \"plain\" without Upgrade", path, code, upgrade, body)
		}
		if _, err := io.WriteString(c, "GET /after HTTP/1.1\r\nHost: gw.test\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		if code, _, body := readRaw(t, br); code != 200 || body != "plain" {
			t.Fatalf("plain request after the h2c Upgrade on %s: %d %q, want 200 \"plain\"", path, code, body)
		}
		n, carried, switched := sw.requests.Load(), sw.carried.Load(), sw.switched.Load()
		if n != int64(2*(i+1)) || carried != 0 || switched != 0 {
			t.Fatalf("after %s the backend read %d requests, %d with Upgrade or HTTP2-Settings, switched %d; want %d, 0, 0",
				path, n, carried, switched, 2*(i+1))
		}
	}
	c, br := dialRaw(t, g.Addr("plain"))
	both := strings.Replace(strings.Replace(h2cUpgrade, "/up", "/listed", 1), "Upgrade: h2c", "Upgrade: websocket, h2c", 1)
	if _, err := io.WriteString(c, crlf(both)); err != nil {
		t.Fatal(err)
	}
	if code, upgrade, body := readRaw(t, br); code != 400 || upgrade != "" || !strings.Contains(body, `"status":400`) {
		t.Fatalf("Upgrade: websocket, h2c on a route listing both: %d (Upgrade: %q) %s, want a 400 problem", code, upgrade, body)
	}
	if n := sw.requests.Load(); n != 4 {
		t.Fatalf("the refused upgrade reached the backend: %d requests, want 4", n)
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

// stallBackend starts an h2c backend that sends its head and "part", then
// waits until the request is cancelled (reported on cancelled) or the
// test ends.
func stallBackend(t *testing.T) (string, chan struct{}) {
	t.Helper()
	cancelled := make(chan struct{}, 8)
	release := make(chan struct{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Protocols: p, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "part")
		_ = http.NewResponseController(w).Flush()
		select {
		case <-r.Context().Done():
			cancelled <- struct{}{}
		case <-release:
		}
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { close(release); _ = srv.Close() })
	return ln.Addr().String(), cancelled
}

// TestH2RequestTimeoutCutsStalledBody: an h2c upstream that sends its head
// and part of a body, then stalls, is cut by the route's request timeout
// (300ms), for an HTTP/1.1 client and for an h2c client: the client's
// body read fails after "part" (the head was sent, so cutting the
// connection or resetting the stream is the only signal left; a clean end
// would pass the truncated body for a whole one) and the upstream stream
// is reset, which cancels the backend's request context.
func TestH2RequestTimeoutCutsStalledBody(t *testing.T) {
	noLeaks(t)
	be, cancelled := stallBackend(t)
	g := start(t, `
version: 1
admin: {address: off}
listeners: [{name: plain, address: "127.0.0.1:0"}]
routes: [{cluster: stall, timeouts: {request: 300ms}}]
clusters: [{name: stall, protocol: h2c, endpoints: ["`+be+`"]}]
`)
	h1, h2c := new(http.Protocols), new(http.Protocols)
	h1.SetHTTP1(true)
	h2c.SetUnencryptedHTTP2(true)
	for _, p := range []*http.Protocols{h1, h2c} {
		tr := &http.Transport{Protocols: p}
		began := time.Now()
		resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get("http://" + g.Addr("plain") + "/slow")
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		tr.CloseIdleConnections()
		took := time.Since(began)
		if resp.StatusCode != 200 || string(b) != "part" || err == nil {
			t.Fatalf("%s, stalled body: %d %q, read error %v; want 200 \"part\" then an error", resp.Proto, resp.StatusCode, b, err)
		}
		if took < 300*time.Millisecond || took > 5*time.Second {
			t.Fatalf("%s: stalled body cut after %v, want after the 300ms request timeout and well before the client's 10s", resp.Proto, took)
		}
		select {
		case <-cancelled:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: the backend's request was not cancelled within 5s of the cut", resp.Proto)
		}
	}
}

// TestStreamingIdleCutsStalledStream: on a streaming route to an h2c
// cluster, timeouts.idle (300ms) bounds a silence in both directions: an
// upstream that sends its head and "part", then stalls, is cut (the
// client's body read fails) and its request cancelled, after the idle
// timeout — not the route's 100ms request timeout, which a streaming
// route does not use — and well before the client's own 10s. Both
// engines: an HTTP/1.1 client (h1std.go's path) and an h2c one (std.go's).
func TestStreamingIdleCutsStalledStream(t *testing.T) {
	noLeaks(t)
	for _, h2 := range []bool{false, true} {
		be, cancelled := stallBackend(t)
		g := start(t, `
version: 1
admin: {address: off}
listeners: [{name: plain, address: "127.0.0.1:0"}]
routes: [{cluster: stall, streaming: true, timeouts: {request: 100ms, idle: 300ms}}]
clusters: [{name: stall, protocol: h2c, endpoints: ["`+be+`"]}]
`)
		p := new(http.Protocols)
		if h2 {
			p.SetUnencryptedHTTP2(true)
		} else {
			p.SetHTTP1(true)
		}
		tr := &http.Transport{Protocols: p}
		began := time.Now()
		resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get("http://" + g.Addr("plain") + "/events")
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		tr.CloseIdleConnections()
		took := time.Since(began)
		if string(b) != "part" || err == nil {
			t.Fatalf("%s: stalled stream: %q, read error %v; want \"part\" then an error", resp.Proto, b, err)
		}
		if took < 300*time.Millisecond || took > 5*time.Second {
			t.Fatalf("%s: stalled stream cut after %v, want after the 300ms idle timeout (not the 100ms request timeout) and well before the client's 10s", resp.Proto, took)
		}
		select {
		case <-cancelled:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: the backend's request was not cancelled within 5s of the cut", resp.Proto)
		}
	}
}

// pacedBackend starts an h2c backend whose /held answer sends "part",
// flushes, and sends "rest" only once release is closed, and whose
// /paced answer sends eight pieces 100 ms apart.
func pacedBackend(t *testing.T, release chan struct{}) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Protocols: p, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if r.URL.Path == "/held" {
			_, _ = io.WriteString(w, "part")
			_ = rc.Flush()
			select {
			case <-release:
				_, _ = io.WriteString(w, "rest")
			case <-r.Context().Done():
			}
			return
		}
		for i := range 8 {
			if i > 0 {
				time.Sleep(100 * time.Millisecond) // the pacing under test, not a wait for a result
			}
			_, _ = fmt.Fprintf(w, "%d", i)
			_ = rc.Flush()
		}
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// TestH1ClientStreamsFromH2Upstream: an HTTP/1.1 client reading from an
// h2c cluster gets each piece as the upstream sends it (the head and
// "part" arrive while the upstream still holds the rest), and a body that
// keeps moving outlives the listener's send inactivity bound (300ms),
// which is re-armed on every write rather than set once for the whole
// body.
func TestH1ClientStreamsFromH2Upstream(t *testing.T) {
	noLeaks(t)
	release := make(chan struct{})
	be := pacedBackend(t, release)
	g := start(t, `
version: 1
admin: {address: off}
listeners: [{name: plain, address: "127.0.0.1:0", limits: {body_inactivity: 300ms}}]
routes: [{cluster: h2c, streaming: true, timeouts: {idle: 30s}}]
clusters: [{name: h2c, protocol: h2c, endpoints: ["`+be+`"]}]
`)
	c, br := dialRaw(t, g.Addr("plain"))
	if _, err := io.WriteString(c, "GET /held HTTP/1.1\r\nHost: gw.test\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		close(release)
		t.Fatalf("head while the upstream holds its body: %v", err)
	}
	part := make([]byte, 4)
	if _, err := io.ReadFull(resp.Body, part); err != nil || string(part) != "part" {
		close(release)
		t.Fatalf("first piece %q (%v), want \"part\" before the upstream's rest", part, err)
	}
	close(release)
	rest, err := io.ReadAll(resp.Body)
	if err != nil || string(rest) != "rest" {
		t.Fatalf("rest %q (%v), want \"rest\"", rest, err)
	}

	if _, err := io.WriteString(c, "GET /paced HTTP/1.1\r\nHost: gw.test\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	all, err := io.ReadAll(resp.Body)
	if err != nil || string(all) != "01234567" {
		t.Fatalf("paced body %q (%v), want \"01234567\" (700ms of steady writes past a 300ms send bound)", all, err)
	}
}

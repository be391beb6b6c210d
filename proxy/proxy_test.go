package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spillwayhq/spillway/upstream"
)

// echo answers with what it received: method, target, selected headers
// and the body.
func echo(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	w.Header().Set("X-Seen-Host", r.Host)
	fmt.Fprintf(w, "%s %s\n", r.Method, r.RequestURI)
	for _, k := range []string{"X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host", "Forwarded", "Connection", "X-Hop", "Te", "Keep-Alive", "Upgrade"} {
		if v := r.Header.Values(k); len(v) > 0 {
			fmt.Fprintf(w, "%s: %s\n", k, strings.Join(v, " | "))
		}
	}
	if id := r.Header.Get("X-Request-Id"); id != "" {
		fmt.Fprintf(w, "id-len: %d\n", len(id))
	}
	fmt.Fprintf(w, "body: %q\n", b)
}

func TestProxyBasics(t *testing.T) {
	noLeaks(t)
	be := backend(t, http.HandlerFunc(echo))
	rt := &Route{Name: "r", Cluster: newCluster(t, "app", upstream.Config{}, be), Upgrades: []string{"websocket"}}
	addr, _ := startProxy(t, Config{}, one(rt))

	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	// Keep-alive: three requests on one connection, hop-by-hop fields gone.
	fmt.Fprint(c, "GET /a?x=1 HTTP/1.1\r\nHost: Example.COM:8080\r\nConnection: keep-alive, X-Hop\r\nX-Hop: secret\r\nKeep-Alive: timeout=5\r\nX-Forwarded-For: 6.6.6.6\r\n\r\n")
	resp, body := readResponse(t, br, "GET")
	want := "GET /a?x=1\nX-Forwarded-For: 127.0.0.1\nX-Forwarded-Proto: http\nX-Forwarded-Host: Example.COM:8080\nForwarded: for=127.0.0.1;proto=http;host=\"Example.COM:8080\"\nid-len: 32\nbody: \"\"\n"
	if resp.StatusCode != 200 || body != want {
		t.Fatalf("got %d\n%s\nwant\n%s", resp.StatusCode, body, want)
	}
	if got := resp.Header.Get("X-Seen-Host"); got != "Example.COM:8080" {
		t.Fatalf("backend saw Host %q", got)
	}
	fmt.Fprint(c, "POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello")
	_, body = readResponse(t, br, "POST")
	if !strings.HasSuffix(body, "body: \"hello\"\n") {
		t.Fatalf("POST body: %s", body)
	}
	fmt.Fprint(c, "PUT /c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n")
	_, body = readResponse(t, br, "PUT")
	if !strings.HasSuffix(body, "body: \"abcde\"\n") {
		t.Fatalf("chunked body: %s", body)
	}
}

func TestMalformedRefused(t *testing.T) {
	noLeaks(t)
	var hits atomic.Int32
	be := backend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	rt := &Route{Name: "r", Cluster: newCluster(t, "app", upstream.Config{}, be)}
	addr, _ := startProxy(t, Config{}, one(rt))
	cases := map[string]string{
		"CL+TE":          "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
		"duplicate CL":   "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc",
		"TE chunked,id":  "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, identity\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
		"obs-fold":       "GET / HTTP/1.1\r\nHost: a\r\nX-A: b\r\n c\r\n\r\n",
		"bare LF":        "GET / HTTP/1.1\nHost: a\n\n",
		"bare LF inside": "GET / HTTP/1.1\r\nHost: a\r\nX-A: b\nX-B: c\r\n\r\n",
		"CR in value":    "GET / HTTP/1.1\r\nHost: a\r\nX-A: b\rc\r\n\r\n",
		"NUL in value":   "GET / HTTP/1.1\r\nHost: a\r\nX-A: b\x00c\r\n\r\n",
		"no Host":        "GET / HTTP/1.1\r\n\r\n",
		"dot-segments":   "GET /public/../admin HTTP/1.1\r\nHost: a\r\n\r\n",
		"encoded dots":   "GET /public/%2e%2E/admin HTTP/1.1\r\nHost: a\r\n\r\n",
	}
	for name, req := range cases {
		got := statusOf(raw(t, addr, req))
		if !strings.HasPrefix(got, "HTTP/1.1 400 ") {
			t.Errorf("%s: got %q, want a 400", name, got)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the backend saw %d malformed requests", n)
	}
}

func TestMaxConns(t *testing.T) {
	noLeaks(t)
	be := backend(t, http.HandlerFunc(echo))
	rt := &Route{Name: "r", Cluster: newCluster(t, "app", upstream.Config{}, be)}
	addr, s := startProxy(t, Config{MaxConns: 1}, one(rt))
	first, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	fmt.Fprint(first, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	if resp, _ := readResponse(t, bufio.NewReader(first), "GET"); resp.StatusCode != 200 {
		t.Fatalf("first connection: %d", resp.StatusCode)
	}
	// The first connection is open (kept alive): a second is closed at once.
	if got := raw(t, addr, "GET / HTTP/1.1\r\nHost: a\r\n\r\n"); got != "" {
		t.Fatalf("second connection answered %q, want it closed", got)
	}
	if st := s.Stats(); st.Refused != 1 || st.Active != 1 {
		t.Fatalf("stats %+v, want 1 refused, 1 active", st)
	}
}

// TestTransferCodingsKept: a body the upstream sent as "gzip, chunked" is
// dechunked and re-chunked, and keeps its gzip coding on the way out.
func TestTransferCodingsKept(t *testing.T) {
	noLeaks(t)
	be := rawServer(t, func(c net.Conn) {
		defer c.Close()
		br := bufio.NewReader(c)
		if !skipHead(br) {
			return
		}
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n")
	})
	rt := &Route{Name: "r", Cluster: newCluster(t, "app", upstream.Config{}, be)}
	addr, _ := startProxy(t, Config{}, one(rt))
	resp := raw(t, addr, "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
	if !strings.Contains(resp, "\r\nTransfer-Encoding: gzip, chunked\r\n") || !strings.HasSuffix(resp, "\r\n\r\n3\r\nabc\r\n0\r\n\r\n") {
		t.Fatalf("response:\n%q", resp)
	}
}

// TestH2CUpgradeIgnored: the deprecated h2c Upgrade is not honoured: the
// request is answered in HTTP/1.1 and the backend never sees the Upgrade.
func TestH2CUpgradeIgnored(t *testing.T) {
	noLeaks(t)
	be := backend(t, http.HandlerFunc(echo))
	rt := &Route{Name: "r", Cluster: newCluster(t, "app", upstream.Config{}, be)}
	addr, _ := startProxy(t, Config{HTTP2: true}, one(rt))
	resp := raw(t, addr, "GET /u HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, HTTP2-Settings, close\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n")
	if statusOf(resp) != "HTTP/1.1 200 OK" || strings.Contains(resp, "Upgrade: h2c") || strings.Contains(resp, "Http2-Settings") {
		t.Fatalf("response:\n%s", resp)
	}
}

// TestConnectRefused: CONNECT is a tunnel to any authority, not a route:
// 501 on both engines, and the backend never sees it.
func TestConnectRefused(t *testing.T) {
	noLeaks(t)
	be := backend(t, http.HandlerFunc(echo))
	rt := &Route{Name: "r", Cluster: newCluster(t, "app", upstream.Config{}, be)}
	addr, _ := startProxy(t, Config{HTTP2: true}, one(rt))
	resp := raw(t, addr, "CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n")
	if statusOf(resp) != "HTTP/1.1 501 Not Implemented" || !strings.Contains(resp, "connect-refused") {
		t.Fatalf("HTTP/1.1 CONNECT:\n%s", resp)
	}
}

// TestDateAdded: an upstream answer without Date gets one.
func TestDateAdded(t *testing.T) {
	noLeaks(t)
	be := cannedBackend(t)
	rt := &Route{Name: "r", Cluster: newCluster(t, "app", upstream.Config{}, be)}
	addr, _ := startProxy(t, Config{}, one(rt))
	resp := raw(t, addr, "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
	i := strings.Index(resp, "\r\nDate: ")
	if i < 0 {
		t.Fatalf("no Date:\n%s", resp)
	}
	line, _, _ := strings.Cut(resp[i+8:], "\r\n")
	if d, err := http.ParseTime(line); err != nil || time.Since(d) > time.Minute || time.Until(d) > time.Minute {
		t.Fatalf("Date %q: %v", line, err)
	}
}

// TestUnderscoreSpoofDropped: X_Forwarded_For (which CGI-style backends
// read as X-Forwarded-For) is dropped; other underscored names pass.
func TestUnderscoreSpoofDropped(t *testing.T) {
	noLeaks(t)
	be := backend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%q %q", r.Header.Values("X_forwarded_for"), r.Header.Values("X_custom"))
	}))
	rt := &Route{Name: "r", Cluster: newCluster(t, "app", upstream.Config{}, be)}
	addr, _ := startProxy(t, Config{}, one(rt))
	resp := raw(t, addr, "GET / HTTP/1.1\r\nHost: a\r\nX_Forwarded_For: 6.6.6.6\r\nX_Custom: ok\r\nConnection: close\r\n\r\n")
	if !strings.HasSuffix(resp, `[] ["ok"]`) {
		t.Fatalf("backend saw:\n%s", resp)
	}
}

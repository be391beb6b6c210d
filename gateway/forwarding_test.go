package gateway

import (
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// heardHeaders starts a backend (startBackendFunc) that hands the header
// of every request to /echo to the returned channel, then answers with
// the fields in answer set. Other paths (health checks) are not recorded.
func heardHeaders(t *testing.T, answer http.Header) (string, <-chan http.Header) {
	t.Helper()
	heard := make(chan http.Header, 16)
	addr := startBackendFunc(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/echo" {
			return
		}
		heard <- r.Header.Clone() // before answering: sent once the client has its answer
		for k, v := range answer {
			w.Header()[k] = v
		}
		fmt.Fprint(w, "ok")
	})
	return addr, heard
}

// sendThrough sends a GET of url with h and returns the backend's view
// of the request's header and the client's view of the response's.
func sendThrough(t *testing.T, c *http.Client, url string, h http.Header, heard <-chan http.Header) (up, down http.Header) {
	t.Helper()
	code, down, body := fetch(t, c, "GET", url, h)
	if code != 200 || body != "ok" {
		t.Fatalf("GET %s: %d %q", url, code, body)
	}
	select {
	case up = <-heard:
	default:
		t.Fatalf("GET %s answered 200 but the backend recorded no request", url)
	}
	return up, down
}

// wantField fails unless h holds exactly the field lines want for name
// (nil: absent).
func wantField(t *testing.T, where string, h http.Header, name string, want ...string) {
	t.Helper()
	got := h.Values(name)
	if len(want) == 0 && len(got) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: %s = %q, want %q", where, name, got, want)
	}
}

// plainClients are the two client protocols the tests go over.
func plainClients(t *testing.T) map[string]*http.Client {
	return map[string]*http.Client{"HTTP/1.1": h1Client(t), "h2c": h2cClient(t)}
}

// TestRouteHeaderRewrite: a route's request_headers add and remove reach
// the backend (an add replaces the client's field of that name, a remove
// matches any case), its response_headers add and remove reach the
// client (an add replaces the backend's field), and other fields pass
// both ways untouched, over HTTP/1.1 and h2c.
func TestRouteHeaderRewrite(t *testing.T) {
	noLeaks(t)
	be, heard := heardHeaders(t, http.Header{
		"Server": {"backend/1.0"}, "X-Internal-Debug": {"yes"},
		"Cache-Control": {"private"}, "X-Backend-Kept": {"1"},
	})
	g := start(t, `
version: 1
admin: {address: off}
listeners: [{name: web, address: "127.0.0.1:0"}]
routes:
  - cluster: app
    request_headers:
      add: {X-Gateway: spillway, X-Added: "yes"}
      remove: [X-Internal]
    response_headers:
      add: {X-Frame-Options: DENY, Cache-Control: no-store}
      remove: [Server, x-internal-debug]
clusters: [{name: app, endpoints: ["`+be+`"]}]
`)
	for name, c := range plainClients(t) {
		up, down := sendThrough(t, c, "http://"+g.Addr("web")+"/echo", http.Header{
			"x-internal": {"secret"}, "X-Gateway": {"forged"}, "X-Client-Kept": {"1"},
		}, heard)
		at, back := name+" at the backend", name+" at the client"
		wantField(t, at, up, "X-Added", "yes")
		wantField(t, at, up, "X-Gateway", "spillway")
		wantField(t, at, up, "X-Internal")
		wantField(t, at, up, "X-Client-Kept", "1")
		wantField(t, back, down, "X-Frame-Options", "DENY")
		wantField(t, back, down, "Cache-Control", "no-store")
		wantField(t, back, down, "Server")
		wantField(t, back, down, "X-Internal-Debug")
		wantField(t, back, down, "X-Backend-Kept", "1")
	}
}

// generatedID is the form of a request id the gateway makes: 32 hex digits.
var generatedID = regexp.MustCompile(`^[0-9a-f]{32}$`)

// TestTraceContextAndRequestID: the client's W3C traceparent and
// tracestate reach the backend unchanged; X-Request-Id is generated when
// absent (a fresh one per request) or unusable (longer than 128
// characters), and kept when present, over HTTP/1.1 and h2c.
func TestTraceContextAndRequestID(t *testing.T) {
	noLeaks(t)
	be, heard := heardHeaders(t, nil)
	g := start(t, `
version: 1
admin: {address: off}
listeners: [{name: web, address: "127.0.0.1:0"}]
routes: [{cluster: app}]
clusters: [{name: app, endpoints: ["`+be+`"]}]
`)
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	const state = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"
	url := "http://" + g.Addr("web") + "/echo"
	for name, c := range plainClients(t) {
		up, _ := sendThrough(t, c, url, http.Header{"Traceparent": {parent}, "Tracestate": {state}}, heard)
		wantField(t, name, up, "Traceparent", parent)
		wantField(t, name, up, "Tracestate", state)
		first := up.Values("X-Request-Id")
		if len(first) != 1 || !generatedID.MatchString(first[0]) {
			t.Errorf("%s: no X-Request-Id sent: backend saw %q, want one of 32 hex digits", name, first)
		}
		up, _ = sendThrough(t, c, url, nil, heard)
		if second := up.Get("X-Request-Id"); !generatedID.MatchString(second) || len(first) == 1 && second == first[0] {
			t.Errorf("%s: second generated X-Request-Id %q (first %q), want a different one", name, second, first)
		}
		up, _ = sendThrough(t, c, url, http.Header{"X-Request-Id": {"client-req-42"}}, heard)
		wantField(t, name, up, "X-Request-Id", "client-req-42")
		long := strings.Repeat("a", 129)
		up, _ = sendThrough(t, c, url, http.Header{"X-Request-Id": {long}}, heard)
		if got := up.Values("X-Request-Id"); len(got) != 1 || !generatedID.MatchString(got[0]) {
			t.Errorf("%s: a 129-character X-Request-Id became %q, want one generated in its place", name, got)
		}
	}
}

// TestTrustedProxiesForwarding: from a peer in trusted_proxies
// (127.0.0.1) the client's X-Forwarded-For and Forwarded are kept and
// extended with the peer, and its X-Forwarded-Proto and -Host kept; from
// a peer not in them all four are replaced by the gateway's own, over
// HTTP/1.1 and h2c.
func TestTrustedProxiesForwarding(t *testing.T) {
	noLeaks(t)
	be, heard := heardHeaders(t, nil)
	g := start(t, `
version: 1
admin: {address: off}
listeners:
  - {name: trusting, address: "127.0.0.1:0", trusted_proxies: ["127.0.0.1/32"]}
  - {name: wary, address: "127.0.0.1:0", trusted_proxies: ["10.0.0.0/8"]}
routes: [{cluster: app}]
clusters: [{name: app, endpoints: ["`+be+`"]}]
`)
	sent := http.Header{
		"X-Forwarded-For": {"203.0.113.7"}, "Forwarded": {"for=203.0.113.7;proto=https;host=shop.example"},
		"X-Forwarded-Proto": {"https"}, "X-Forwarded-Host": {"shop.example"},
	}
	for name, c := range plainClients(t) {
		trusting, wary := g.Addr("trusting"), g.Addr("wary")
		up, _ := sendThrough(t, c, "http://"+trusting+"/echo", sent, heard)
		at := name + " from a trusted peer"
		wantField(t, at, up, "X-Forwarded-For", "203.0.113.7, 127.0.0.1")
		wantField(t, at, up, "Forwarded", `for=203.0.113.7;proto=https;host=shop.example, for=127.0.0.1;proto=http;host="`+trusting+`"`)
		wantField(t, at, up, "X-Forwarded-Proto", "https")
		wantField(t, at, up, "X-Forwarded-Host", "shop.example")

		up, _ = sendThrough(t, c, "http://"+wary+"/echo", sent, heard)
		at = name + " from an untrusted peer"
		wantField(t, at, up, "X-Forwarded-For", "127.0.0.1")
		wantField(t, at, up, "Forwarded", `for=127.0.0.1;proto=http;host="`+wary+`"`)
		wantField(t, at, up, "X-Forwarded-Proto", "http")
		wantField(t, at, up, "X-Forwarded-Host", wary)
	}
}

package gateway

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// adminCheck sends one request to the admin endpoint, fails the test
// unless it is answered want, and checks that no answer carries a CORS
// field. It returns the body.
func adminCheck(t *testing.T, g *Gateway, method, path string, h http.Header, want int) string {
	t.Helper()
	code, hdr, body := fetch(t, h1Client(t), method, "http://"+g.AdminAddr()+path, h)
	if code != want {
		t.Errorf("%s %s with %v: %d %s, want %d", method, path, h, code, body, want)
	}
	for k := range hdr {
		if strings.HasPrefix(strings.ToLower(k), "access-control-") {
			t.Errorf("%s %s: answer carries %s: %v", method, path, k, hdr[k])
		}
	}
	return body
}

// TestAdminSecurity: with a token configured, a POST without it or with
// a wrong one is 401, with it but a foreign Host 421, OPTIONS 405, and
// the probes need nothing; GET /config hides the secrets (an added
// header's value, the token); /metrics counts the proxied requests by
// route. Without a token, a POST lacking X-Spillway-Admin is 403 and
// changes nothing. No answer carries an Access-Control-* field.
func TestAdminSecurity(t *testing.T) {
	noLeaks(t)
	a := newBackend(t, "a")
	const token = "s3cret-admin-token"
	file := filepath.Join(t.TempDir(), "gateway.yaml")
	writeFile(t, file, `version: 1
admin: {address: "127.0.0.1:0", token: `+token+`}
reload: {watch: false}
listeners: [{name: web, address: "127.0.0.1:0"}]
routes: [{name: main, cluster: app, request_headers: {add: {Authorization: "Bearer upstream-secret-42"}}}]
clusters: [{name: app, endpoints: ["`+a.addr+`"]}]
`)
	g := startFile(t, file)
	bearer := func(tok string) http.Header { return http.Header{"Authorization": {"Bearer " + tok}} }
	adminCheck(t, g, "POST", "/reload", nil, 401)
	adminCheck(t, g, "POST", "/reload", http.Header{"X-Spillway-Admin": {"1"}}, 401)
	adminCheck(t, g, "POST", "/reload", bearer("wrong-token"), 401)
	adminCheck(t, g, "GET", "/clusters", nil, 401)
	foreign := bearer(token)
	foreign.Set("Host", "evil.example:9901")
	adminCheck(t, g, "POST", "/reload", foreign, http.StatusMisdirectedRequest)
	preflight := bearer(token)
	preflight.Set("Origin", "http://evil.example")
	preflight.Set("Access-Control-Request-Method", "POST")
	adminCheck(t, g, "OPTIONS", "/reload", preflight, 405)
	adminCheck(t, g, "GET", "/ready", nil, 200)
	adminCheck(t, g, "GET", "/live", nil, 200)
	if g.Generation() != 1 {
		t.Fatalf("refused POSTs reloaded: generation %d", g.Generation())
	}
	adminCheck(t, g, "POST", "/reload", bearer(token), 200)
	if g.Generation() != 2 {
		t.Fatalf("POST /reload with the token: generation %d, want 2", g.Generation())
	}

	cfg := adminCheck(t, g, "GET", "/config", bearer(token), 200)
	if strings.Contains(cfg, "upstream-secret-42") || strings.Contains(cfg, token) || strings.Count(cfg, `"[redacted]"`) != 2 {
		t.Errorf("GET /config shows a secret, or not both redacted (header value, token):\n%s", cfg)
	}
	c := h1Client(t)
	for range 3 {
		if code, _, body := fetch(t, c, "GET", "http://"+g.Addr("web")+"/m", nil); code != 200 {
			t.Fatalf("proxied request: %d %s", code, body)
		}
	}
	// A request is counted when its exchange ends, just after its last
	// byte is written: the scrape may come first, so poll.
	const series = `spillway_requests_total{cluster="app",code_class="2xx",route="main",source="upstream"} 3`
	var m string
	scraped := func() bool {
		m = adminCheck(t, g, "GET", "/metrics", bearer(token), 200)
		return strings.Contains(m, series+"\n")
	}
	for deadline := time.Now().Add(5 * time.Second); !scraped(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("/metrics lacks %s; its spillway_requests_total lines:\n%s", series, grepLines(m, "spillway_requests_total"))
		}
	}

	// No token configured: the non-simple header is what a POST needs.
	b := newBackend(t, "b")
	file2 := filepath.Join(t.TempDir(), "gateway.yaml")
	writeFile(t, file2, appConfig("round_robin", "127.0.0.1:0", "", b))
	g2 := startFile(t, file2)
	drain := "/clusters/app/endpoints/" + b.addr + "/drain"
	adminCheck(t, g2, "POST", drain, nil, 403)
	adminCheck(t, g2, "POST", drain, http.Header{"Content-Type": {"text/plain"}, "Origin": {"http://evil.example"}}, 403)
	adminCheck(t, g2, "POST", drain, http.Header{"X-Spillway-Admin": {"yes"}}, 403)
	adminCheck(t, g2, "OPTIONS", drain, http.Header{"Origin": {"http://evil.example"}}, 405)
	if st := endpointStates(t, g2, "app"); st[b.addr] != "healthy" {
		t.Fatalf("after refused drains: %v, want b healthy", st)
	}
	adminCheck(t, g2, "POST", drain, http.Header{"X-Spillway-Admin": {"1"}}, 200)
	if st := endpointStates(t, g2, "app"); st[b.addr] != "draining" {
		t.Fatalf("after the drain with X-Spillway-Admin: 1: %v, want b draining", st)
	}
}

// grepLines returns the lines of s containing sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

package gateway

import (
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/spillwayhq/spillway/config"
	"github.com/spillwayhq/spillway/internal/syncbuf"
)

// TestReasonHeaderOff: on a listener with reason_header: false the rate
// limit's 429 (over HTTP/1.1 and h2c) and the 404 of no route carry no
// Spillway-Reason, the 429 keeping its Retry-After; the access log and
// spillway_refusals_total still have the reason; a listener left at the
// default sends it.
func TestReasonHeaderOff(t *testing.T) {
	noLeaks(t)
	be := startBackendFunc(t, func(w http.ResponseWriter, r *http.Request) {})
	cfg, err := config.Parse("test.yaml", []byte(`
version: 1
admin: {address: "127.0.0.1:0"}
listeners:
  - {name: quiet, address: "127.0.0.1:0", reason_header: false}
  - {name: web, address: "127.0.0.1:0"}
routes:
  - name: api
    match: {prefix: /api}
    cluster: app
    access_log: full
    policies:
      class: critical
      ratelimit:
        rules: [{id: per-key, key: ["header:X-Key"], rate: 1, per: 1m, burst: 1}]
clusters: [{name: app, endpoints: ["`+be+`"]}]
`))
	if err != nil {
		t.Fatal(err)
	}
	var log syncbuf.Buffer
	g := launch(t, cfg, Options{Logger: slog.New(slog.NewTextHandler(&log, nil))})
	h1, h2 := h1Client(t), h2cClient(t)
	quiet, web := "http://"+g.Addr("quiet"), "http://"+g.Addr("web")
	ask := func(c *http.Client, url, key string, status int, reason string) http.Header {
		t.Helper()
		code, h, body := fetch(t, c, "GET", url, http.Header{"X-Key": {key}})
		if got, ok := h["Spillway-Reason"]; code != status || (reason == "") == ok || (ok && got[0] != reason) {
			t.Fatalf("GET %s key %s: %d, Spillway-Reason %q (%v), want %d %q\n%s", url, key, code, got, ok, status, reason, body)
		}
		return h
	}
	ask(h1, quiet+"/api/1", "q", 200, "")
	for _, c := range []*http.Client{h1, h2} {
		if h := ask(c, quiet+"/api/2", "q", 429, ""); h.Get("Retry-After") == "" {
			t.Errorf("429 without Retry-After: %v", h)
		}
		ask(c, quiet+"/nowhere", "q", 404, "")
	}
	ask(h1, web+"/api/3", "w", 200, "")
	ask(h1, web+"/api/4", "w", 429, "ratelimit:per-key")
	ask(h2, web+"/nowhere", "w", 404, "no-route")

	hasSeries(t, g, `spillway_refusals_total{class="critical",reason="ratelimit:per-key",route="api"} 3`)
	eventually(t, 5*time.Second, "three access lines of 429 ratelimit:per-key", func() bool {
		return strings.Count(log.String(), "status=429 reason=ratelimit:per-key") == 3
	})
}

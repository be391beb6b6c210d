package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/spillwayhq/spillway/internal/leakcheck"
)

// TestOutlierFewEndpoints: what docs/CONFIG.md says of outlier ejection
// with one to three endpoints, at the default max_ejection_percent (10)
// and panic_threshold (0.5). One endpoint may always be ejected, so:
//   - of [bad, good], bad is ejected and good takes everything;
//   - of [bad1, bad2, good], exactly one bad one is ejected (10% of 3
//     rounds to none, and one is allowed), the other stays in rotation;
//   - of [bad] alone, bad is ejected, the healthy share falls to 0, below
//     the panic threshold, and every endpoint is used anyway: clients keep
//     getting the endpoint's own answers, never 503 no-healthy-endpoint;
//     with panic_threshold 0 they get that 503 instead.
func TestOutlierFewEndpoints(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.Verify(t, 5*time.Second, opt) })
	for _, tc := range []struct {
		name         string
		bad, good    int
		wantEjected  int
		wantBadAfter bool // a bad endpoint still gets requests after the ejection
		noPanic      bool // panic_threshold: 0
	}{
		{"bad+good", 1, 1, 1, false, false},
		{"2bad+good", 2, 1, 1, true, false},
		{"bad alone", 1, 0, 1, true, false},
		{"bad alone, no panic", 1, 0, 1, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var badHits atomic.Int64
			var eps []string
			for i := 0; i < tc.bad; i++ {
				eps = append(eps, startBackendFunc(t, func(w http.ResponseWriter, r *http.Request) {
					badHits.Add(1)
					w.WriteHeader(500)
				}))
			}
			for i := 0; i < tc.good; i++ {
				eps = append(eps, startBackendFunc(t, func(w http.ResponseWriter, r *http.Request) {}))
			}
			list, _ := json.Marshal(eps)
			panicAt := ""
			if tc.noPanic {
				panicAt = "\n    panic_threshold: 0"
			}
			g := start(t, fmt.Sprintf(`
version: 1
admin: {address: "127.0.0.1:0"}
listeners: [{name: web, address: "127.0.0.1:0"}]
routes: [{cluster: app, policies: {retry: {attempts: 1}}}]
clusters:
  - name: app
    picker: round_robin
    endpoints: %s
    health: {outlier: {consecutive_5xx: 3, base_ejection_time: 1h}}%s
`, list, panicAt))
			c := h1Client(t)
			url := "http://" + g.Addr("web") + "/x"
			for i := 0; i < 30; i++ { // enough for every bad endpoint to fail 3 times in a row
				fetch(t, c, "GET", url, nil)
			}
			if n := ejected(t, g); n != tc.wantEjected {
				t.Fatalf("%d endpoints ejected; want %d", n, tc.wantEjected)
			}
			before := badHits.Load()
			for i := 0; i < 30; i++ {
				code, h, _ := fetch(t, c, "GET", url, nil)
				if tc.noPanic {
					if code != 503 || h.Get("Spillway-Reason") != "no-healthy-endpoint" {
						t.Fatalf("without panic mode: %d %q; want 503 no-healthy-endpoint", code, h.Get("Spillway-Reason"))
					}
					continue
				}
				if code == 503 && h.Get("Spillway-Reason") != "" {
					t.Fatalf("gateway refusal %s: every endpoint is used in panic mode", h.Get("Spillway-Reason"))
				}
				if tc.bad > 0 && tc.good > 0 && code != 200 && !tc.wantBadAfter {
					t.Fatalf("after the ejection: %d; want only the good endpoint's 200s", code)
				}
			}
			if got := badHits.Load() > before; got != tc.wantBadAfter {
				t.Fatalf("a bad endpoint got requests after the ejection: %v; want %v", got, tc.wantBadAfter)
			}
		})
	}
}

// ejected counts the ejected endpoints in GET /clusters.
func ejected(t *testing.T, g *Gateway) int {
	t.Helper()
	_, _, body := fetch(t, h1Client(t), "GET", "http://"+g.AdminAddr()+"/clusters", nil)
	var out []struct {
		Endpoints []struct {
			State string `json:"state"`
		} `json:"endpoints"`
	}
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		t.Fatalf("/clusters: %v: %s", err, body)
	}
	n := 0
	for _, c := range out {
		for _, e := range c.Endpoints {
			if e.State == "ejected" {
				n++
			}
		}
	}
	return n
}

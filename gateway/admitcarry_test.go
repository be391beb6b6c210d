package gateway

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/spillwayhq/spillway/admit"
	"github.com/spillwayhq/spillway/config"
	"github.com/spillwayhq/spillway/internal/leakcheck"
)

// admitCarryConfig is TestReloadAdmissionLimit's file: cluster app with
// a gradient2 admission of the given bounds and tolerance, and a breaker
// of threshold breakerAt.
func admitCarryConfig(be string, initial, lo, hi int, tolerance float64, breakerAt int) string {
	return fmt.Sprintf(`
version: 1
listeners: [{name: web, address: "127.0.0.1:0"}]
routes: [{name: main, cluster: app, policies: {retry: {attempts: 1}}}]
clusters:
  - name: app
    endpoints: ["%s"]
    admission: {algorithm: gradient2, initial_limit: %d, min_limit: %d, max_limit: %d, tolerance: %g}
    breaker: {threshold: %d}
`, be, initial, lo, hi, tolerance, breakerAt)
}

// reloadYAML reloads g with text or fails t.
func reloadYAML(t *testing.T, g *Gateway, text string) {
	t.Helper()
	cfg, err := config.Parse("test.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.ReloadConfig(cfg, "test"); err != nil {
		t.Fatal(err)
	}
}

// appGate is cluster app's admission gate in g's current generation.
func appGate(t *testing.T, g *Gateway) *admit.Gate {
	t.Helper()
	gd := g.cur.Load().pol.guards["app"].v
	if gd == nil || gd.Gate == nil {
		t.Fatal("cluster app has no admission gate")
	}
	return gd.Gate
}

// TestReloadAdmissionLimit: a changed adaptive admission starts from the
// old limit (moved down from 50 by the backend's 503s), clamped to its
// new bounds — kept within them, raised to a new min_limit, cut to a new
// max_limit, never its own initial_limit — and a reload that leaves the
// admission as it was (the file unchanged, or only the breaker changed)
// keeps the very limiter, with its state and the admission's overrides.
func TestReloadAdmissionLimit(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.Verify(t, 5*time.Second, opt) })
	be := startBackendFunc(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) })
	g := start(t, admitCarryConfig(be, 50, 1, 1000, 1.5, 1000))
	c := h1Client(t)
	for i := 0; appGate(t, g).Limiter().Limit() >= 40; i++ { // 503s are drops: ×0.9 each
		if i == 100 {
			t.Fatalf("limit still %d after 100 dropped requests", appGate(t, g).Limiter().Limit())
		}
		fetch(t, c, "GET", "http://"+g.Addr("web")+"/x", nil)
	}
	was := appGate(t, g).Limiter().Limit()
	if was <= 10 || was >= 40 {
		t.Fatalf("moved limit %d; the test needs it in (10, 40)", was)
	}
	steps := []struct {
		what            string
		initial, lo, hi int
		want            int
	}{
		{"within the new bounds", 300, 2, 500, was},
		{"raised to min_limit 40", 100, 40, 200, 40},
		{"cut to max_limit 10", 3, 1, 10, 10},
	}
	for i, s := range steps {
		reloadYAML(t, g, admitCarryConfig(be, s.initial, s.lo, s.hi, 2+float64(i), 1000))
		if got := appGate(t, g).Limiter().Limit(); got != s.want {
			t.Fatalf("%s: the new limiter starts at %d, want %d", s.what, got, s.want)
		}
	}
	kept := appGate(t, g)
	reloadYAML(t, g, admitCarryConfig(be, 3, 1, 10, 4, 1000))
	if appGate(t, g) != kept {
		t.Fatal("a reload of the same file replaced the admission gate")
	}
	if got := kept.Limiter().Limit(); got != 10 {
		t.Fatalf("kept limiter's limit %d, want 10", got)
	}
	gd := g.cur.Load().pol.guards["app"].v
	gd.PinLimit(g.clk.Now(), 7)
	gd.BypassAdmission(true)
	reloadYAML(t, g, admitCarryConfig(be, 3, 1, 10, 4, 1001))
	nd := g.cur.Load().pol.guards["app"].v
	if nd == gd || nd.Breaker == gd.Breaker {
		t.Fatal("a changed breaker kept the old guard or breaker")
	}
	if appGate(t, g) != kept {
		t.Fatal("a reload that changed only the breaker replaced the admission gate")
	}
	if n, on := nd.PinnedLimit(), nd.AdmissionBypassed(); n != 7 || !on {
		t.Fatalf("after a breaker-only change: pinned %d, bypassed %v; want 7, true (the admission's overrides kept)", n, on)
	}
}

package httplimit

import (
	"net/http/httptest"
	"testing"

	"github.com/spillwayhq/spillway/ratelimit"
)

// RateLimit-Policy as sent, for rules whose mapping is worked out at
// ratelimit.TestSpecPolicy: q holds the capacity, q/w is the rule's rate,
// and a rule too slow for any 15-digit window states q alone.
func TestPolicyField(t *testing.T) {
	for _, tc := range []struct{ rule, want string }{
		{"{id: per-ip, rate: 3, per: 1m}", `"per-ip";q=3;w=60`},
		{"{id: u, rate: 100, per: 1m, burst: 20}", `"u";q=20;w=12`},
		{"{id: tb, rate: 2, per: 1s, burst: 4, algorithm: token-bucket}", `"tb";q=4;w=2`},
		{"{id: slow, rate: 1, per: 1.5s}", `"slow";q=2;w=3`},
		{"{id: big, rate: 4000000000, per: 1m}", `"big";q=4000000000;w=60`},
		{"{id: login, rate: 10, per: 15m, algorithm: sliding-log}", `"login";q=10;w=900`},
		{"{id: q, rate: 5, per: 2.5s, burst: 10, algorithm: leaky-queue}", `"q";q=10;w=5`},
		{"{id: eon, rate: 1, per: 1000000000000000}", `"eon";q=1`},
	} {
		set := mustRules(t, "rules:\n- "+tc.rule+"\n")
		if got := policyField(&set.Rules[0]); got != tc.want {
			t.Errorf("%s: RateLimit-Policy %s, want %s", tc.rule, got, tc.want)
		}
	}
}

// A store that reports more remaining units than the rule's capacity (a
// lease, a scaled-up node) never makes r exceed q.
func TestRemainingNeverExceedsQuota(t *testing.T) {
	store := &fakeStore{decide: func(string, float64, int) (ratelimit.Decision, error) {
		return ratelimit.Decision{Allowed: true, Remaining: 1000, Reset: 0.5}, nil
	}}
	l, _ := newLimiter(t, "rules:\n- {id: tb, rate: 2, per: 1s, burst: 4, algorithm: token-bucket}\n",
		Config{Store: fakes(map[string]ratelimit.Keyed{"tb": store})})
	w := httptest.NewRecorder()
	l.Handler(&hello{}).ServeHTTP(w, get("/"))
	if got := w.Header().Get("RateLimit"); got != `"tb";r=4;t=1` {
		t.Errorf("RateLimit %s, want r clamped to the capacity 4", got)
	}
	if got := w.Header().Get("RateLimit-Policy"); got != `"tb";q=4;w=2` {
		t.Errorf("RateLimit-Policy %s", got)
	}
}

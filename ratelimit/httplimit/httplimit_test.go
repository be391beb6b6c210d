package httplimit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spillwayhq/spillway/ratelimit"
	"github.com/spillwayhq/spillway/ratelimit/rules"
)

// A GCRA rule of 2 per second with a burst of 3, at a fixed instant: three
// requests pass with the remaining count going down, the fourth is refused.
// Expected values by hand: T = 0.5 s, τ = (3−1)·T = 1 s; after k requests
// TAT = now + k·T, so Reset = k·0.5 s; the fourth sees TAT − now = 1.5 > τ
// and may retry after 1.5 − 1 = 0.5 s → Retry-After 1.
func TestHeadersAndBodyOverLoopback(t *testing.T) {
	checkGoroutines(t)
	l, clk := newLimiter(t, "rules:\n- {id: per-user, key: [user], rate: 2, per: 1s, burst: 3}\n", Config{})
	h := &hello{}
	srv := httptest.NewServer(l.Handler(h))
	defer srv.Close()
	defer srv.Client().CloseIdleConnections()

	do := func(user string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/anything", nil)
		req.Header.Set("X-User-ID", user)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	for i, want := range []string{`"per-user";r=2;t=1`, `"per-user";r=1;t=1`, `"per-user";r=0;t=2`} {
		resp := do("alice")
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != "hello\n" {
			t.Fatalf("request %d: %d %q", i+1, resp.StatusCode, body)
		}
		if got := resp.Header.Get("RateLimit"); got != want {
			t.Errorf("request %d: RateLimit = %q, want %q", i+1, got, want)
		}
		if got := resp.Header.Get("RateLimit-Policy"); got != `"per-user";q=4;w=2` {
			t.Errorf("request %d: RateLimit-Policy = %q", i+1, got)
		}
		if resp.Header.Get("Retry-After") != "" {
			t.Errorf("request %d: Retry-After on an allowed response", i+1)
		}
	}

	resp := do("alice")
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("fourth request: %d", resp.StatusCode)
	}
	wantHeaders := map[string]string{
		"Retry-After":      "1",
		"RateLimit-Policy": `"per-user";q=4;w=2`,
		"RateLimit":        `"per-user";r=0;t=1`,
		"Content-Type":     "application/problem+json",
		"Cache-Control":    "no-store",
	}
	for k, v := range wantHeaders {
		if got := resp.Header.Values(k); len(got) != 1 || got[0] != v {
			t.Errorf("429 %s = %q, want %q", k, got, v)
		}
	}
	var problem map[string]any
	if err := json.Unmarshal(body, &problem); err != nil {
		t.Fatalf("429 body is not JSON: %v\n%s", err, body)
	}
	wantBody := map[string]any{
		"type": "about:blank", "title": "Too Many Requests", "status": 429.0, "rule": "per-user",
		"detail": `Rule "per-user" allows 2 requests per second. Try again in about 1 second.`,
	}
	for k, v := range wantBody {
		if problem[k] != v {
			t.Errorf("body %s = %#v, want %#v", k, problem[k], v)
		}
	}
	if len(problem) != len(wantBody) {
		t.Errorf("body has extra members: %v", problem)
	}
	if h.n.Load() != 3 {
		t.Errorf("next ran %d times, want 3", h.n.Load())
	}

	if resp := do("bob"); resp.StatusCode != 200 {
		t.Errorf("another user: %d", resp.StatusCode)
	} else {
		resp.Body.Close()
	}
	clk.Advance(0.5)
	if resp := do("alice"); resp.StatusCode != 200 {
		t.Errorf("alice after Retry-After: %d", resp.StatusCode)
	} else {
		resp.Body.Close()
	}
	if got := count(l, "per-user", OutcomeDenied); got != 1 {
		t.Errorf("denied counter = %v", got)
	}
	if got := count(l, "per-user", OutcomeAllowed); got != 5 {
		t.Errorf("allowed counter = %v", got)
	}
}

// The seed's file as written: its login rule has no match, so it applies
// to every request of a user, and its 10 per 15 minutes refuses the
// eleventh although user-default (burst 20) still allows it. All rules are
// checked, not the first that matches.
func TestAllRulesChecked(t *testing.T) {
	seed := `{ "rules": [
  { "id": "user-default", "key": ["user"],       "rate": 100, "per": "1m", "burst": 20 },
  { "id": "login",        "key": ["user", "ip"], "rate": 10,  "per": "15m" },
  { "id": "otp-sms",      "key": ["phone"],      "rate": 3,   "per": "10m", "failMode": "closed" },
  { "id": "tenant",       "key": ["tenant"],     "rate": 500, "per": "1s",  "burst": 1000 } ] }`
	l, _ := newLimiter(t, seed, Config{})
	h := l.Handler(&hello{})
	for i := 1; i <= 10; i++ {
		w := serve(h, get("/", "X-User-ID", "u42"))
		if w.Code != 200 {
			t.Fatalf("request %d: %d", i, w.Code)
		}
	}
	// The tenth left login with 0 and user-default with 10: the headers
	// show the rule with the least remaining.
	w := serve(h, get("/", "X-User-ID", "u42"))
	if w.Code != 429 {
		t.Fatalf("eleventh: %d", w.Code)
	}
	if got := w.Header().Get("RateLimit-Policy"); got != `"login";q=10;w=900` {
		t.Errorf("RateLimit-Policy = %q", got)
	}
	// GCRA 10 per 900 s, burst 10: T = 90 s, τ = 810 s, TAT = now + 900:
	// retry after 90 s.
	if got := w.Header().Get("Retry-After"); got != "90" {
		t.Errorf("Retry-After = %q", got)
	}
	if !strings.Contains(w.Body.String(), `"rule":"login"`) || !strings.Contains(w.Body.String(), "10 requests per 15 minutes") {
		t.Errorf("body %s", w.Body)
	}
	if got := count(l, "user-default", OutcomeAllowed); got != 11 {
		t.Errorf("user-default counted %v requests, want 11 (it allowed the refused one before login refused it)", got)
	}
	// A request without any identity header is limited by no rule.
	w = serve(h, get("/"))
	if w.Code != 200 || w.Header().Get("RateLimit") != "" {
		t.Errorf("anonymous: %d %v", w.Code, w.Header())
	}
}

func TestRefusalStopsTheWalk(t *testing.T) {
	a, b, c := &fakeStore{}, &fakeStore{}, &fakeStore{}
	b.decide = func(string, float64, int) (ratelimit.Decision, error) {
		return ratelimit.Decision{RetryAfter: 2.5, Reset: 7}, nil
	}
	l, _ := newLimiter(t, `rules:
- {id: a, key: [ip], rate: 5, per: 1s}
- {id: b, key: [ip], rate: 5, per: 1s}
- {id: c, key: [ip], rate: 5, per: 1s}
`, Config{Store: fakes(map[string]ratelimit.Keyed{"a": a, "b": b, "c": c})})
	w := serve(l.Handler(&hello{}), get("/"))
	if w.Code != 429 || w.Header().Get("Retry-After") != "3" || w.Header().Get("RateLimit") != `"b";r=0;t=3` {
		t.Errorf("%d %v", w.Code, w.Header())
	}
	if len(a.seen()) != 1 || len(b.seen()) != 1 || len(c.seen()) != 0 {
		t.Errorf("calls a %d b %d c %d, want 1 1 0", len(a.seen()), len(b.seen()), len(c.seen()))
	}
	if got := a.seen()[0]; got != (call{"192.0.2.1", 1000, 1}) {
		t.Errorf("a saw %+v", got)
	}
}

func TestMatch(t *testing.T) {
	st := &fakeStore{}
	l, _ := newLimiter(t, `rules:
- {id: login, key: [route, method], rate: 5, per: 1s, match: {methods: [POST], paths: ["/login", "/users/{id}/password"]}}
`, Config{Store: fakes(map[string]ratelimit.Keyed{"login": st})})
	h := l.Handler(&hello{})
	for _, tc := range []struct {
		method, path string
	}{{"POST", "/login"}, {"GET", "/login"}, {"POST", "/login/"}, {"POST", "/users/7/password"}, {"POST", "/users/7"}, {"POST", "/a/../login"}} {
		serve(h, httptest.NewRequest(tc.method, tc.path, nil))
	}
	var keys []string
	for _, c := range st.seen() {
		keys = append(keys, c.key)
	}
	want := []string{"/login|POST", "/login|POST", "/users/{id}/password|POST", "/login|POST"}
	if strings.Join(keys, " ") != strings.Join(want, " ") {
		t.Errorf("keys %q, want %q", keys, want)
	}
}

func TestKeyParts(t *testing.T) {
	st := &fakeStore{}
	l, _ := newLimiter(t, `identities: {user: {header: X-Auth-User}}
rules:
- {id: r, key: [user, "header:X-Device", path, ip], rate: 5, per: 1s}
- {id: long, key: ["header:X-Device"], rate: 5, per: 1s}
- {id: global, rate: 5, per: 1s}
`, Config{Store: fakes(map[string]ratelimit.Keyed{"r": st, "long": st, "global": st}),
		Identity: func(r *http.Request, name string) (string, bool) {
			if v := r.Header.Get("X-Session"); v != "" && name == "user" {
				return "session:" + v, true
			}
			return "", false
		}})
	h := l.Handler(&hello{})
	serve(h, get("/a/b", "X-Auth-User", `al|ice\`, "X-Device", "d1"))
	serve(h, get("/", "X-Auth-User", "bob", "X-Session", "s9", "X-Device", strings.Repeat("x", 300)))
	want := []string{
		`al\|ice\\|d1|/a/b|192.0.2.1`, "d1", rules.GlobalKey,
		"session:s9|#" + "0d4e2ca9e9cbced7a7a5380eb29e1a37" + "|/|192.0.2.1", "#0d4e2ca9e9cbced7a7a5380eb29e1a37", rules.GlobalKey,
	}
	var got []string
	for _, c := range st.seen() {
		got = append(got, c.key)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("keys:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestOnMissing(t *testing.T) {
	skip, fallback := &fakeStore{}, &fakeStore{}
	l, _ := newLimiter(t, `rules:
- {id: skip, key: [user], rate: 5, per: 1s}
- {id: fallback, key: [user, ip], rate: 5, per: 1s, onMissing: fallback}
`, Config{Store: fakes(map[string]ratelimit.Keyed{"skip": skip, "fallback": fallback})})
	h := l.Handler(&hello{})
	serve(h, get("/"))
	serve(h, get("/", "X-User-ID", ""))
	serve(h, get("/", "X-User-ID", "u1"))
	if n := len(skip.seen()); n != 1 || skip.seen()[0].key != "u1" {
		t.Errorf("skip rule saw %+v, want only u1", skip.seen())
	}
	got := fallback.seen()
	if len(got) != 3 || got[0].key != rules.FallbackKey || got[1].key != rules.FallbackKey || got[2].key != "u1|192.0.2.1" {
		t.Errorf("fallback rule saw %+v", got)
	}
}

func TestCost(t *testing.T) {
	st := &fakeStore{}
	l, _ := newLimiter(t, "rules:\n- {id: r, rate: 100, per: 1s, cost: 5}\n- {id: small, rate: 3, per: 1s}\n",
		Config{Store: fakes(map[string]ratelimit.Keyed{"r": st}), Cost: func(r *http.Request, rule *rules.Rule) int {
			if r.URL.Path == "/export" {
				return 50
			}
			if r.URL.Path == "/huge" && rule.ID == "small" {
				return 4
			}
			return 0
		}})
	h := l.Handler(&hello{})
	serve(h, get("/"))
	serve(h, get("/export"))
	if c := st.seen(); len(c) != 2 || c[0].cost != 5 || c[1].cost != 50 {
		t.Errorf("costs %+v, want 5 then 50", c)
	}
	// 4 units against a bucket of 3: can never pass, so 400, not 429.
	w := serve(h, get("/huge"))
	if w.Code != http.StatusBadRequest || w.Header().Get("Retry-After") != "" || !json.Valid(w.Body.Bytes()) {
		t.Errorf("cost beyond capacity: %d %v %s", w.Code, w.Header(), w.Body)
	}
}

func TestShadow(t *testing.T) {
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		}}))
	l, clk := newLimiter(t, "rules:\n- {id: new-rule, key: [user], rate: 1, per: 1m, shadow: true}\n",
		Config{Logger: logger, LogsPerSecond: 1})
	h := &hello{}
	for range 10 {
		w := serve(l.Handler(h), get("/x", "X-User-ID", "u1"))
		if w.Code != 200 || w.Header().Get("RateLimit") != "" {
			t.Fatalf("shadow rule changed the response: %d %v", w.Code, w.Header())
		}
	}
	if h.n.Load() != 10 {
		t.Errorf("next ran %d times", h.n.Load())
	}
	if a, d := count(l, "new-rule", OutcomeAllowed), count(l, "new-rule", OutcomeShadowDenied); a != 1 || d != 9 {
		t.Errorf("allowed %v shadow_denied %v, want 1 and 9", a, d)
	}
	clk.Advance(1)
	serve(l.Handler(h), get("/x", "X-User-ID", "u1"))
	want := `level=INFO msg="ratelimit: shadow rule would refuse" rule=new-rule key=u1 method=GET path=/x retry_after=60 suppressed=0
level=INFO msg="ratelimit: shadow rule would refuse" rule=new-rule key=u1 method=GET path=/x retry_after=59 suppressed=8
`
	if logs.String() != want {
		t.Errorf("logs:\n%s\nwant:\n%s", logs.String(), want)
	}
}

// A store that fails: fail open serves, fail closed answers 503 with the
// store's hint (or the default) as Retry-After.
func TestFailModes(t *testing.T) {
	down := &fakeStore{decide: func(string, float64, int) (ratelimit.Decision, error) {
		return ratelimit.Decision{}, errDown
	}}
	hinted := &fakeStore{decide: func(string, float64, int) (ratelimit.Decision, error) {
		return ratelimit.Decision{RetryAfter: 1.5}, ratelimit.ErrStoreUnavailable
	}}
	for _, tc := range []struct {
		name, mode string
		store      ratelimit.Keyed
		code       int
		retry      string
	}{
		{"open", "open", down, 200, ""},
		{"closed", "closed", down, 503, "5"},
		{"closed with hint", "closed", hinted, 503, "2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			l, _ := newLimiter(t, "rules:\n- {id: otp, key: [ip], rate: 3, per: 10m, failMode: "+tc.mode+"}\n",
				Config{Store: fakes(map[string]ratelimit.Keyed{"otp": tc.store}), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			h := &hello{}
			w := serve(l.Handler(h), get("/"))
			if w.Code != tc.code || w.Header().Get("Retry-After") != tc.retry {
				t.Fatalf("%d Retry-After %q, want %d %q", w.Code, w.Header().Get("Retry-After"), tc.code, tc.retry)
			}
			if (h.n.Load() == 1) != (tc.code == 200) {
				t.Errorf("next ran %d times", h.n.Load())
			}
			if count(l, "otp", OutcomeStoreError) != 1 || !strings.Contains(logs.String(), "store cannot decide") {
				t.Errorf("store error not counted or logged: %s", logs.String())
			}
			if tc.code == 503 {
				var p map[string]any
				if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || p["status"] != 503.0 || w.Header().Get("Content-Type") != "application/problem+json" {
					t.Errorf("503 body %s (%v)", w.Body, err)
				}
			}
		})
	}
}

// The fail-mode wrapper of package ratelimit in front of a dead store.
func TestGuardedStore(t *testing.T) {
	down := &fakeStore{decide: func(string, float64, int) (ratelimit.Decision, error) {
		return ratelimit.Decision{}, errDown
	}}
	store := func(r rules.Rule) (ratelimit.Keyed, error) {
		return ratelimit.NewGuarded(down, ratelimit.GuardConfig{Mode: r.FailMode})
	}
	l, _ := newLimiter(t, "rules:\n- {id: otp, key: [ip], rate: 3, per: 10m, failMode: closed}\n- {id: api, key: [ip], rate: 3, per: 1s}\n",
		Config{Store: store, Logger: slog.New(slog.DiscardHandler)})
	w := serve(l.Handler(&hello{}), get("/"))
	if w.Code != 503 || w.Header().Get("Retry-After") != "1" {
		t.Errorf("%d %v", w.Code, w.Header())
	}
	l2, _ := newLimiter(t, "rules:\n- {id: api, key: [ip], rate: 3, per: 1s}\n", Config{Store: store, Logger: slog.New(slog.DiscardHandler)})
	if w := serve(l2.Handler(&hello{}), get("/")); w.Code != 200 {
		t.Errorf("fail open through Guarded: %d", w.Code)
	}
}

type fixedRand float64

func (f fixedRand) Float64() float64 { return float64(f) }

func TestJitter(t *testing.T) {
	l, _ := newLimiter(t, "rules:\n- {id: r, key: [ip], rate: 2, per: 1s, burst: 1}\n", Config{Jitter: 2, Rand: fixedRand(0.99)})
	h := l.Handler(&hello{})
	serve(h, get("/"))
	w := serve(h, get("/"))
	// RetryAfter 0.5 s + 0.99 × 2 s = 2.48 s → 3.
	if w.Code != 429 || w.Header().Get("Retry-After") != "3" || w.Header().Get("RateLimit") != `"r";r=0;t=3` {
		t.Errorf("%d %v", w.Code, w.Header())
	}
	if !strings.Contains(w.Body.String(), "about 3 seconds.") {
		t.Errorf("body %s", w.Body)
	}
}

func TestProblemBase(t *testing.T) {
	l, _ := newLimiter(t, "rules:\n- {id: r, key: [ip], rate: 1, per: 1h, burst: 1}\n", Config{ProblemBase: "https://api.shop.example/problems/"})
	h := l.Handler(&hello{})
	serve(h, get("/"))
	w := serve(h, get("/"))
	want := `{"type":"https://api.shop.example/problems/rate-limited","title":"Too Many Requests","status":429,` +
		`"detail":"Rule \"r\" allows 1 request per hour. Try again in about 3600 seconds.","rule":"r"}` + "\n"
	if w.Body.String() != want {
		t.Errorf("body\n%s\nwant\n%s", w.Body, want)
	}
}

func TestLeakyQueueDelays(t *testing.T) {
	checkGoroutines(t)
	// 20 per second: one every 50 ms; up to 5 wait. At a fixed instant (the
	// manual clock does not move) the k-th request (from 0) waits 50·k ms;
	// the seventh finds 5 waiting. A timer never fires early, so the lower
	// bound is exact; a loaded machine may add seconds to a loopback
	// request, so the upper bound only catches a wait in the wrong unit
	// (50·k s) or one that never ends.
	l, _ := newLimiter(t, "rules:\n- {id: q, key: [ip], rate: 20, per: 1s, burst: 5, algorithm: leaky-queue}\n", Config{})
	h := &hello{}
	srv := httptest.NewServer(l.Handler(h))
	defer srv.Close()
	defer srv.Client().CloseIdleConnections()
	for k := range 6 {
		start := time.Now()
		resp, err := srv.Client().Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		took := time.Since(start)
		want := time.Duration(k) * 50 * time.Millisecond
		if resp.StatusCode != 200 || took < want || took > want+10*time.Second {
			t.Errorf("request %d: %d after %v, want 200 after about %v", k, resp.StatusCode, took, want)
		}
	}
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 429 || h.n.Load() != 6 {
		t.Errorf("seventh: %d, next ran %d times", resp.StatusCode, h.n.Load())
	}
}

func TestLeakyQueueGivesUp(t *testing.T) {
	checkGoroutines(t)
	l, _ := newLimiter(t, "rules:\n- {id: q, key: [ip], rate: 1, per: 1m, burst: 5, algorithm: leaky-queue}\n", Config{})
	h := &hello{}
	handler := l.Handler(h)
	serve(handler, get("/")) // passes at once; the next waits 60 s
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- serve(handler, get("/").WithContext(ctx)) }()
	time.Sleep(20 * time.Millisecond) // let it start waiting; the outcome does not depend on it
	cancel()
	select {
	case w := <-done:
		if w.Code != 503 || !json.Valid(w.Body.Bytes()) || !strings.Contains(w.Body.String(), `"rule":"q"`) {
			t.Errorf("%d %s", w.Code, w.Body)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the request did not give up when its context ended")
	}
	if h.n.Load() != 1 || count(l, "q", OutcomeQueueAbandoned) != 1 {
		t.Errorf("next ran %d times, abandoned %v", h.n.Load(), count(l, "q", OutcomeQueueAbandoned))
	}
}

// The same over a real connection: the client gives up, the server's
// request context ends, next never runs.
func TestLeakyQueueClientGoesAway(t *testing.T) {
	checkGoroutines(t)
	l, _ := newLimiter(t, "rules:\n- {id: q, key: [ip], rate: 1, per: 1m, burst: 5, algorithm: leaky-queue}\n", Config{})
	h := &hello{}
	srv := httptest.NewServer(l.Handler(h))
	defer srv.Close()
	client := srv.Client()
	defer client.CloseIdleConnections()
	resp, err := client.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	if _, err := client.Do(req); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want the client's deadline", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for count(l, "q", OutcomeQueueAbandoned) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if count(l, "q", OutcomeQueueAbandoned) != 1 || h.n.Load() != 1 {
		t.Errorf("abandoned %v, next ran %d times", count(l, "q", OutcomeQueueAbandoned), h.n.Load())
	}
}

func TestUpdate(t *testing.T) {
	l, _ := newLimiter(t, "rules:\n- {id: a, key: [ip], rate: 1, per: 1h}\n- {id: b, key: [ip], rate: 1, per: 1h}\n", Config{})
	h := l.Handler(&hello{})
	serve(h, get("/"))
	if err := l.Update(&rules.Set{Rules: []rules.Rule{{ID: "a", Spec: ratelimit.Spec{Rate: 0}}}}); !errors.Is(err, ErrConfig) {
		t.Fatalf("invalid set accepted: %v", err)
	}
	if w := serve(h, get("/")); w.Code != 429 {
		t.Fatalf("old rules lost after a refused update: %d", w.Code)
	}
	// a keeps its store (and its spent budget); b changes its limit and
	// starts afresh.
	if err := l.Update(mustRules(t, "rules:\n- {id: a, key: [ip], rate: 1, per: 1h}\n")); err != nil {
		t.Fatal(err)
	}
	if w := serve(h, get("/")); w.Code != 429 || !strings.Contains(w.Body.String(), `"rule":"a"`) {
		t.Errorf("a lost its state: %d %s", w.Code, w.Body)
	}
	if err := l.Update(mustRules(t, "rules:\n- {id: a, key: [ip], rate: 2, per: 1h}\n")); err != nil {
		t.Fatal(err)
	}
	if w := serve(h, get("/")); w.Code != 200 {
		t.Errorf("a changed its limit but kept the old store: %d", w.Code)
	}
	if n := testutilCount(l); n != 5 {
		t.Errorf("%d series after b was removed, want a's 5", n)
	}
}

func testutilCount(l *Limiter) int {
	ch := make(chan prometheus.Metric, 100)
	l.Collect(ch)
	close(ch)
	return len(ch)
}

func TestRegisterer(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	l, _ := newLimiter(t, "rules:\n- {id: r, key: [ip], rate: 1, per: 1h}\n", Config{Registerer: reg})
	h := l.Handler(&hello{})
	serve(h, get("/"))
	serve(h, get("/"))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "spillway_ratelimit_http_decisions_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var outcome string
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "outcome" {
					outcome = lp.GetValue()
				}
			}
			got[outcome] = m.GetCounter().GetValue()
		}
	}
	if got[OutcomeAllowed] != 1 || got[OutcomeDenied] != 1 || len(got) != 5 {
		t.Errorf("gathered %v", got)
	}
	if _, err := New(mustRules(t, "rules: []\n"), Config{Registerer: reg}); err == nil {
		t.Errorf("a second Limiter registered the same metric")
	}
}

func TestConfigErrors(t *testing.T) {
	set := mustRules(t, "rules: []\n")
	for _, cfg := range []Config{{Jitter: -1}, {UnavailableRetryAfter: -1}, {ProblemBase: "%zz"}} {
		if _, err := New(set, cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
	if _, err := New(nil, Config{}); !errors.Is(err, ErrConfig) {
		t.Errorf("nil set: %v", err)
	}
	failing := func(rules.Rule) (ratelimit.Keyed, error) { return nil, errDown }
	if _, err := New(mustRules(t, "rules:\n- {id: r, rate: 1, per: 1s}\n"), Config{Store: failing}); !errors.Is(err, errDown) {
		t.Errorf("store error: %v", err)
	}
}

func TestPerText(t *testing.T) {
	for sec, want := range map[float64]string{1: "second", 60: "minute", 900: "15 minutes", 3600: "hour", 86400: "day",
		172800: "2 days", 1.5: "1.5 seconds", 90: "90 seconds", 0.25: "0.25 seconds"} {
		if got := perText(sec); got != want {
			t.Errorf("perText(%v) = %q, want %q", sec, got, want)
		}
	}
}

// Requests from many goroutines while the rules are replaced: run with
// -race. Exactly the limit passes per key for the rule that never changes.
func TestConcurrentServeAndUpdate(t *testing.T) {
	checkGoroutines(t)
	src := "rules:\n- {id: fixed, key: [user], rate: 50, per: 1h}\n- {id: churn, key: [ip], rate: %d, per: 1h}\n"
	l, _ := newLimiter(t, strings.Replace(src, "%d", "1000000", 1), Config{})
	h := l.Handler(&hello{})
	var ok atomic.Int64
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, get("/", "X-User-ID", "u"+strconv.Itoa(g%2)))
				if w.Code == 200 {
					ok.Add(1)
				}
				if g == 0 && i%10 == 0 {
					rate := strconv.Itoa(1000000 + i)
					if err := l.Update(mustRules(t, strings.Replace(src, "%d", rate, 1))); err != nil {
						t.Error(err)
					}
				}
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 100 {
		t.Errorf("%d requests passed, want 2 users × 50", ok.Load())
	}
}

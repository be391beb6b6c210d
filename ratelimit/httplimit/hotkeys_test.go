package httplimit

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spillwayhq/spillway/ratelimit"
	"github.com/spillwayhq/spillway/ratelimit/rules"
)

const hotRules = `rules:
- {id: per-user, key: [user], rate: 4, per: 1h}
- {id: all, rate: 1000, per: 1h}
`

// Each rule's keys are counted in units (the request's cost), refused
// requests included, and listed largest first; the rule without key parts
// counts everything under its global key.
func TestHotKeys(t *testing.T) {
	l, _ := newLimiter(t, hotRules, Config{HotKeys: &ratelimit.HotKeysConfig{TopK: 3}})
	h := l.Handler(&hello{})
	send := func(user string, n int) {
		for range n {
			serve(h, get("/", "X-User-ID", user))
		}
	}
	send("alice", 6) // 4 allowed, 2 refused: counted all the same
	send("bob", 3)
	send("carol", 1)
	want := []RuleHotKeys{
		{Rule: "per-user", Keys: []HotKey{{"alice", 6}, {"bob", 3}, {"carol", 1}}},
		// "all" is checked after per-user: alice's 2 refusals stopped there.
		{Rule: "all", Keys: []HotKey{{rules.GlobalKey, 8}}},
	}
	if got := l.HotKeys(); !reflect.DeepEqual(got, want) {
		t.Errorf("HotKeys() = %+v\nwant %+v", got, want)
	}

	// The JSON handler, all rules and one.
	srv := httptest.NewServer(l.HotKeysHandler())
	defer srv.Close()
	for _, tc := range []struct{ query, body string }{
		{"", `{"rules":[{"rule":"per-user","keys":[{"key":"alice","count":6},{"key":"bob","count":3},{"key":"carol","count":1}]},` +
			`{"rule":"all","keys":[{"key":"(global)","count":8}]}]}`},
		{"?rule=all", `{"rules":[{"rule":"all","keys":[{"key":"(global)","count":8}]}]}`},
		{"?rule=nope", `{"rules":[]}`},
	} {
		resp, err := http.Get(srv.URL + tc.query)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" || strings.TrimSpace(string(b)) != tc.body {
			t.Errorf("GET %q: %d %s %s\nwant %s", tc.query, resp.StatusCode, resp.Header.Get("Content-Type"), b, tc.body)
		}
	}
	resp, err := http.Post(srv.URL, "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", resp.StatusCode)
	}
}

// The gauge: one series per tracked key, at most TopK per rule however
// many keys are seen.
func TestHotKeysGauge(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	l, _ := newLimiter(t, "rules:\n- {id: per-user, key: [user], rate: 1000, per: 1h}\n",
		Config{HotKeys: &ratelimit.HotKeysConfig{TopK: 4, Shards: 1}, Registerer: reg})
	h := l.Handler(&hello{})
	for i := range 200 {
		serve(h, get("/", "X-User-ID", "u"+strconv.Itoa(i)))
	}
	for range 50 {
		serve(h, get("/", "X-User-ID", "heavy"))
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var series int
	var heavy float64
	for _, mf := range mfs {
		if mf.GetName() != "spillway_ratelimit_http_hot_key_units" {
			continue
		}
		for _, m := range mf.GetMetric() {
			series++
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			if labels["rule"] != "per-user" {
				t.Errorf("series with labels %v", labels)
			}
			if labels["key"] == "heavy" {
				heavy = m.GetGauge().GetValue()
			}
		}
	}
	if series != 4 {
		t.Errorf("%d hot-key series, want TopK = 4", series)
	}
	// Never under-counted; 200 other units could add at most 200.
	if heavy < 50 || heavy > 250 {
		t.Errorf("heavy = %v, want 50 (≤ 250)", heavy)
	}
}

// A rule keeps its tracker across Updates while its id stays; a removed
// rule's is dropped. Without Config.HotKeys there is nothing to list.
func TestHotKeysAcrossUpdate(t *testing.T) {
	l, _ := newLimiter(t, hotRules, Config{HotKeys: &ratelimit.HotKeysConfig{}})
	h := l.Handler(&hello{})
	serve(h, get("/", "X-User-ID", "alice"))
	if err := l.Update(mustRules(t, "rules:\n- {id: per-user, key: [user], rate: 5, per: 1h}\n")); err != nil {
		t.Fatal(err)
	}
	serve(h, get("/", "X-User-ID", "alice"))
	want := []RuleHotKeys{{Rule: "per-user", Keys: []HotKey{{"alice", 2}}}}
	if got := l.HotKeys(); !reflect.DeepEqual(got, want) {
		t.Errorf("after Update: %+v, want %+v", got, want)
	}
	if len(l.hot) != 1 {
		t.Errorf("%d trackers kept, want 1", len(l.hot))
	}

	plain, _ := newLimiter(t, hotRules, Config{})
	serve(plain.Handler(&hello{}), get("/", "X-User-ID", "alice"))
	if got := plain.HotKeys(); got != nil {
		t.Errorf("without HotKeys: %+v", got)
	}
	if _, err := New(mustRules(t, hotRules), Config{HotKeys: &ratelimit.HotKeysConfig{TopK: -1}}); !errors.Is(err, ErrConfig) {
		t.Errorf("bad HotKeys config: %v", err)
	}
}

// Tracking a key already in the top set allocates nothing: the allowed
// request still costs the middleware its one allocation (the headers). The
// count is not checked under the race detector (see raceEnabled).
func TestHotKeysAllocations(t *testing.T) {
	store := func(rules.Rule) (ratelimit.Keyed, error) {
		return constStore{ratelimit.Decision{Allowed: true, Remaining: 5, Reset: 1}}, nil
	}
	l, _ := newLimiter(t, "rules:\n- {id: user-default, key: [user], rate: 100, per: 1m, burst: 20}\n",
		Config{Store: store, HotKeys: &ratelimit.HotKeysConfig{}})
	h, r := l.Handler(nop), benchRequest()
	w := &discardWriter{h: http.Header{}}
	got := testing.AllocsPerRun(1000, func() {
		w.reset()
		h.ServeHTTP(w, r)
	})
	if w.code != 200 || (got != 1 && !raceEnabled) {
		t.Errorf("status %d, %v allocations per request; want 200, 1", w.code, got)
	}
}

// The displayed form of keys: the shared keys by name, bad UTF-8 replaced.
func TestDisplayKey(t *testing.T) {
	for in, want := range map[string]string{rules.GlobalKey: "(global)", rules.FallbackKey: "(fallback)",
		"u42": "u42", "a\xffb": "a\uFFFDb", "192.0.2.1|POST": "192.0.2.1|POST"} {
		if got := DisplayKey(in); got != want {
			t.Errorf("DisplayKey(%q) = %q, want %q", in, got, want)
		}
	}
}

// BenchmarkAllowed with the hot-key tracker on: the cost of one Observe
// per rule and request (compare with BenchmarkAllowed).
func BenchmarkAllowedHotKeys(b *testing.B) {
	set := mustRules(b, "rules:\n- {id: user-default, key: [user], rate: 1e9, per: 1s, burst: 1000000000}\n")
	l, err := New(set, Config{HotKeys: &ratelimit.HotKeysConfig{}})
	if err != nil {
		b.Fatal(err)
	}
	h, r := l.Handler(nop), benchRequest()
	w := &discardWriter{h: http.Header{}}
	w.reset()
	h.ServeHTTP(w, r)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		w.reset()
		h.ServeHTTP(w, r)
	}
	if w.code != 200 {
		b.Fatalf("status %d", w.code)
	}
}

package redisstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/spillwayhq/spillway/internal/redistest"
	"github.com/spillwayhq/spillway/ratelimit"
	"github.com/spillwayhq/spillway/ratelimit/httplimit"
	"github.com/spillwayhq/spillway/ratelimit/rules"
)

// pipelines counts the pipelines of scripts a client sends (not those of
// its connections' set-up).
type pipelines struct{ n atomic.Int64 }

func (p *pipelines) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (p *pipelines) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (p *pipelines) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if name := cmds[0].Name(); name == "evalsha" || name == "eval" {
			p.n.Add(1)
		}
		return next(ctx, cmds)
	}
}

// jointRules builds the rule stores of srcs (rules files' items) on one
// Stores.
func jointRules(t *testing.T, client redis.UniversalClient, cfg StoresConfig, srcs ...string) (*Stores, []*RuleStore) {
	t.Helper()
	stores, err := NewStores(client, cfg)
	must(t, err)
	t.Cleanup(func() { stores.Close() })
	var rss []*RuleStore
	for _, src := range srcs {
		k, err := stores.ForRule(ruleOf(t, src))
		must(t, err)
		rss = append(rss, k.(*RuleStore))
	}
	must(t, rss[0].Redis().Load(context.Background())) // no NOSCRIPT round trip
	return stores, rss
}

// remaining queries (cost 0) key's Remaining in rs.
func remaining(t *testing.T, rs *RuleStore, key string) int {
	t.Helper()
	d, err := rs.Redis().AllowN(context.Background(), key, 0, 0)
	must(t, err)
	return d.Remaining
}

// A request under a rule of each algorithm and a gate (GCRA, burst 1),
// decided together: once the gate refuses, the other rule spends nothing
// (its key's Remaining is that of a twin rule that saw only the admitted
// requests), though it reports its own answer; a shadow gate's refusal
// holds nothing back. One pipeline per request.
func TestJointRefusalSpendsNothing(t *testing.T) {
	b := testBackend(t)
	client := newClient(t, b.addr)
	var pipes pipelines
	client.AddHook(&pipes)
	for _, alg := range []string{"gcra", "token-bucket", "leaky-meter", "leaky-queue", "fixed-window", "sliding-log", "sliding-window"} {
		t.Run(alg, func(t *testing.T) {
			spec := fmt.Sprintf("key: [user], rate: 3, per: 1000h, algorithm: %s", alg)
			stores, rs := jointRules(t, client, StoresConfig{Store: Config{Prefix: testPrefix(t), Timeout: 5}, FloorFactor: -1},
				"{id: x, "+spec+"}", "{id: twin, "+spec+"}", "{id: gate, key: [user], rate: 1, per: 1000h, burst: 1}")
			x, twin, gate := rs[0], rs[1], rs[2]
			ctx := context.Background()
			request := func(shadowGate bool) []ratelimit.JointItem {
				items := []ratelimit.JointItem{{Store: x, Key: "u", Cost: 1}, {Store: gate, Key: "u", Cost: 1, Shadow: shadowGate}}
				before := pipes.n.Load()
				stores.AllowJoint(ctx, 0, items)
				if n := pipes.n.Load() - before; n != 1 {
					t.Errorf("%d pipelines for one request, want 1", n)
				}
				for i, it := range items {
					if it.Err != nil {
						t.Fatalf("item %d: %v", i, it.Err)
					}
				}
				return items
			}
			// Both admit: both spend (the twin too).
			if items := request(false); !items[0].Decision.Allowed || !items[1].Decision.Allowed {
				t.Fatalf("first request: %+v", items)
			}
			_, err := twin.AllowN(ctx, "u", 0, 1)
			must(t, err)
			// The gate refuses: x answers for itself, but spends nothing.
			items := request(false)
			if !items[0].Decision.Allowed || items[1].Decision.Allowed || !items[1].Refuses() || items[0].Refuses() {
				t.Fatalf("second request: %+v, want x allowing and the gate refusing", items)
			}
			if got, want := remaining(t, x, "u"), remaining(t, twin, "u"); got != want {
				t.Fatalf("after a refused request x has %d left, want %d (unspent)", got, want)
			}
			// A shadow gate refuses nothing: x spends.
			items = request(true)
			if !items[0].Decision.Allowed || items[1].Decision.Allowed || items[1].Refuses() {
				t.Fatalf("third request (shadow gate): %+v", items)
			}
			_, err = twin.AllowN(ctx, "u", 0, 1)
			must(t, err)
			if got, want := remaining(t, x, "u"), remaining(t, twin, "u"); got != want {
				t.Fatalf("after a shadow refusal x has %d left, want %d (spent)", got, want)
			}
		})
	}
}

// Three rules over HTTP on one Stores: each request costs one pipeline;
// the request the per-user rule refuses (429) leaves the other two rules'
// keys unspent.
func TestJointThroughHTTP(t *testing.T) {
	b := testBackend(t)
	client := newClient(t, b.addr)
	var pipes pipelines
	client.AddHook(&pipes)
	stores, err := NewStores(client, StoresConfig{Store: Config{Prefix: testPrefix(t), Timeout: 5}})
	must(t, err)
	made := map[string]*RuleStore{}
	set, err := rules.Parse("test.yaml", []byte(`rules:
- {id: ip, key: [ip], rate: 10, per: 1000h}
- {id: user, key: [user], rate: 1, per: 1000h}
- {id: route, key: [method, path], rate: 10, per: 1000h, algorithm: sliding-window}
`))
	must(t, err)
	lim, err := httplimit.New(set, httplimit.Config{Logger: slog.New(slog.DiscardHandler), Store: func(r rules.Rule) (ratelimit.Keyed, error) {
		k, err := stores.ForRule(r)
		if err == nil {
			made[r.ID] = k.(*RuleStore)
		}
		return k, err
	}})
	must(t, err)
	t.Cleanup(func() { lim.Close(); stores.Close() })
	must(t, made["ip"].Redis().Load(context.Background())) // no NOSCRIPT round trip
	h := lim.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "hello\n") }))
	for i, want := range []int{200, 429, 429} {
		req := httptest.NewRequest(http.MethodGet, "/a", nil)
		req.RemoteAddr = "192.0.2.7:1234"
		req.Header.Set("X-User-ID", "u1")
		before := pipes.n.Load()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != want {
			t.Fatalf("request %d: %d %s, want %d", i+1, rec.Code, rec.Body, want)
		}
		if n := pipes.n.Load() - before; n != 1 {
			t.Errorf("request %d: %d pipelines, want 1", i+1, n)
		}
	}
	if got := remaining(t, made["ip"], "192.0.2.7"); got != 9 {
		t.Errorf("rule ip: %d left, want 9 (only the admitted request spent)", got)
	}
	if got := remaining(t, made["route"], "GET|/a"); got != 9 {
		t.Errorf("rule route: %d left, want 9 (only the admitted request spent)", got)
	}
}

// Redis stopped: a request under three rules waits one Timeout, not
// three, and each rule applies its own fail mode (closed refuses with an
// error, open serves within its floor); once the breakers are open the
// request costs no wait.
func TestJointRedisStopped(t *testing.T) {
	srv := redistest.Start(t)
	// Dial retries outlast the Timeout: a stopped Redis costs every call
	// its whole Timeout, as with go-redis's defaults.
	client := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, DialerRetries: 100,
		DialerRetryTimeout: 50 * time.Millisecond, DialTimeout: 100 * time.Millisecond, ContextTimeoutEnabled: true})
	t.Cleanup(func() { client.Close() })
	const timeout = 0.5
	stores, rs := jointRules(t, client, StoresConfig{Store: Config{Prefix: testPrefix(t), Timeout: timeout}},
		"{id: otp, key: [user], rate: 3, per: 10m, failMode: closed}",
		"{id: api, key: [user], rate: 100, per: 1h, burst: 5}",
		"{id: ip, key: [ip], rate: 100, per: 1h, burst: 2}")
	ctx := context.Background()
	request := func(now float64) ([]ratelimit.JointItem, time.Duration) {
		items := []ratelimit.JointItem{{Store: rs[0], Key: "u", Cost: 1}, {Store: rs[1], Key: "u", Cost: 1}, {Store: rs[2], Key: "1.2.3.4", Cost: 1}}
		start := time.Now()
		stores.AllowJoint(ctx, now, items)
		return items, time.Since(start)
	}
	if items, _ := request(0); items[0].Err != nil || !items[0].Decision.Allowed || items[0].Decision.Remaining != 2 {
		t.Fatalf("healthy: %+v", items)
	}

	srv.Kill()
	for i := range 3 { // the breakers (threshold 3) open after the third
		items, el := request(1)
		if ratio := el.Seconds() / timeout; ratio > 1.5 {
			t.Errorf("request %d with Redis stopped waited %v: %.2f Timeouts, want one", i+1, el, ratio)
		}
		if d, err := items[0].Decision, items[0].Err; d.Allowed || !errors.Is(err, ratelimit.ErrStoreUnavailable) {
			t.Errorf("request %d, fail-closed rule: %+v, %v; want refused with ErrStoreUnavailable", i+1, d, err)
		}
		// The floors (the rules' own limits, in memory) serve.
		for j, want := range []int{5 - 1 - i, 2 - 1 - i} {
			it := items[1+j]
			if it.Err != nil || (want >= 0) != it.Decision.Allowed || (want >= 0 && it.Decision.Remaining != want) {
				t.Errorf("request %d, fail-open rule %d: %+v, %v; want the floor's answer (%d left)", i+1, j, it.Decision, it.Err, want)
			}
		}
	}
	for _, r := range rs {
		if st := r.Guard().Stats(); st.Failures != 3 {
			t.Errorf("%s: %+v, want 3 failures", r.Redis().Rule(), st)
		}
	}
	if items, el := request(1.5); el.Seconds() > 0.2*timeout || !errors.Is(items[0].Err, ratelimit.ErrStoreOpen) {
		t.Errorf("with the breakers open: %v, %+v; want no wait and ErrStoreOpen", el, items[0])
	}
}

// The layers in a joint request: a local tier that refuses answers at
// once (the other rules are not decided: ErrSkipped, nothing spent); a
// leased rule is decided after the others, from its lease, and skipped
// when they refuse.
func TestJointLayers(t *testing.T) {
	b := testBackend(t)
	client := newClient(t, b.addr)
	var pipes pipelines
	client.AddHook(&pipes)
	stores, rs := jointRules(t, client, StoresConfig{Store: Config{Prefix: testPrefix(t), Timeout: 5}, LocalFactor: 1,
		Lease: &LeaseOptions{Config: ratelimit.LeaseConfig{Size: 4, Refill: -1, TTL: 1e6}, Rules: func(r *rules.Rule) bool { return r.ID == "leased" }}},
		"{id: plain, key: [user], rate: 10, per: 1000h}",
		"{id: leased, key: [user], rate: 100, per: 1000h}",
		"{id: gate, key: [user], rate: 2, per: 1000h, burst: 2}")
	plain, leased, gate := rs[0], rs[1], rs[2]
	ctx := context.Background()
	request := func() []ratelimit.JointItem {
		items := []ratelimit.JointItem{{Store: plain, Key: "u", Cost: 1}, {Store: leased, Key: "u", Cost: 1}, {Store: gate, Key: "u", Cost: 1}}
		stores.AllowJoint(ctx, 0, items)
		return items
	}
	// Two requests pass: the leased rule takes a lease of 4 at the first.
	for i := range 2 {
		if items := request(); items[0].Refuses() || items[1].Refuses() || items[2].Refuses() {
			t.Fatalf("request %d: %+v", i+1, items)
		}
	}
	if st := leased.Leased().Stats(); st.LeasedUnits != 4 || st.Local != 1 {
		t.Errorf("lease stats %+v, want one lease of 4 and one local decision", st)
	}
	// The third: Redis refuses it (gate); the leased rule is not decided.
	local := leased.Leased().Stats().Local
	items := request()
	if !items[2].Refuses() || !errors.Is(items[1].Err, ratelimit.ErrSkipped) || items[0].Refuses() {
		t.Fatalf("third request: %+v; want the gate refusing, the leased rule skipped", items)
	}
	if leased.Leased().Stats().Local != local {
		t.Errorf("the skipped leased rule spent from its lease")
	}
	// The gate's local tier (its own limit, 2) now refuses without a round
	// trip: nothing else is decided.
	before := pipes.n.Load()
	items = request()
	if !items[2].Refuses() || !errors.Is(items[0].Err, ratelimit.ErrSkipped) || !errors.Is(items[1].Err, ratelimit.ErrSkipped) {
		t.Fatalf("fourth request: %+v; want the gate's local tier refusing and the others skipped", items)
	}
	if n := pipes.n.Load() - before; n != 0 {
		t.Errorf("%d pipelines for a request refused locally, want 0", n)
	}
	if got := remaining(t, plain, "u"); got != 8 {
		t.Errorf("rule plain: %d left, want 8 (the two admitted requests)", got)
	}
}

// A joint request that meets a closed store (its rule was replaced): that
// rule gets its fail mode (fail closed: refused, and the others are then
// not decided; fail open: served), the others are decided by Redis.
func TestJointClosedStore(t *testing.T) {
	b := testBackend(t)
	client := newClient(t, b.addr)
	stores, rs := jointRules(t, client, StoresConfig{Store: Config{Prefix: testPrefix(t), Timeout: 5}, FloorFactor: -1},
		"{id: live, key: [user], rate: 10, per: 1000h}",
		"{id: gone-open, key: [user], rate: 10, per: 1000h}",
		"{id: gone-closed, key: [user], rate: 10, per: 1000h, failMode: closed}")
	live, open, closed := rs[0], rs[1], rs[2]
	must(t, open.Close())
	must(t, closed.Close())
	ctx := context.Background()
	items := []ratelimit.JointItem{{Store: live, Key: "u", Cost: 1}, {Store: open, Key: "u", Cost: 1}}
	stores.AllowJoint(ctx, 0, items)
	if it := items[0]; it.Err != nil || !it.Decision.Allowed || it.Decision.Remaining != 9 {
		t.Errorf("open store: %+v", it)
	}
	if it := items[1]; it.Err != nil || !it.Decision.Allowed {
		t.Errorf("closed fail-open store: %+v, want served", it)
	}
	items = []ratelimit.JointItem{{Store: live, Key: "u", Cost: 1}, {Store: closed, Key: "u", Cost: 1}}
	stores.AllowJoint(ctx, 0, items)
	if it := items[1]; !errors.Is(it.Err, ErrClosed) || !it.Refuses() {
		t.Errorf("closed fail-closed store: %+v, want refused with ErrClosed", it)
	}
	if it := items[0]; !errors.Is(it.Err, ratelimit.ErrSkipped) {
		t.Errorf("open store beside a refusing closed one: %+v, want skipped", it)
	}
	if got := remaining(t, live, "u"); got != 9 {
		t.Errorf("live rule: %d left, want 9", got)
	}
}

package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/spillwayhq/spillway/breaker"
	"github.com/spillwayhq/spillway/internal/redistest"
	"github.com/spillwayhq/spillway/ratelimit"
	"github.com/spillwayhq/spillway/ratelimit/httplimit"
	"github.com/spillwayhq/spillway/ratelimit/rules"
)

func TestScaleSpec(t *testing.T) {
	for _, tc := range []struct {
		in   ratelimit.Spec
		f    float64
		want ratelimit.Spec
	}{
		{ratelimit.Spec{Rate: 3, Per: 60}, 1, ratelimit.Spec{Algorithm: ratelimit.AlgGCRA, Rate: 3, Per: 60, Burst: 3}},
		{ratelimit.Spec{Rate: 3, Per: 60}, 2, ratelimit.Spec{Algorithm: ratelimit.AlgGCRA, Rate: 6, Per: 60, Burst: 6}},
		{ratelimit.Spec{Rate: 100, Per: 60, Burst: 20}, 0.5, ratelimit.Spec{Algorithm: ratelimit.AlgGCRA, Rate: 50, Per: 60, Burst: 10}},
		{ratelimit.Spec{Rate: 100, Per: 60, Burst: 20}, 0.01, ratelimit.Spec{Algorithm: ratelimit.AlgGCRA, Rate: 1, Per: 60, Burst: 1}},
		{ratelimit.Spec{Algorithm: ratelimit.AlgTokenBucket, Rate: 2.5, Per: 1}, 3, ratelimit.Spec{Algorithm: ratelimit.AlgTokenBucket, Rate: 7.5, Per: 1, Burst: 9}},
		{ratelimit.Spec{Algorithm: ratelimit.AlgFixedWindow, Rate: 10, Per: 60}, 1.5, ratelimit.Spec{Algorithm: ratelimit.AlgFixedWindow, Rate: 15, Per: 60}},
		{ratelimit.Spec{Algorithm: ratelimit.AlgSlidingCounter, Rate: 3, Per: 1}, 0.1, ratelimit.Spec{Algorithm: ratelimit.AlgSlidingCounter, Rate: 1, Per: 1}},
		{ratelimit.Spec{Algorithm: ratelimit.AlgSlidingLog, Rate: 1 << 20, Per: 1}, 2, ratelimit.Spec{Algorithm: ratelimit.AlgSlidingLog, Rate: 1 << 20, Per: 1}},
		{ratelimit.Spec{Rate: 1e9, Per: 1, Burst: ratelimit.MaxBurst}, 10, ratelimit.Spec{Algorithm: ratelimit.AlgGCRA, Rate: 1e10, Per: 1, Burst: ratelimit.MaxBurst}},
	} {
		got := scaleSpec(tc.in, tc.f)
		if got != tc.want {
			t.Errorf("scaleSpec(%+v, %v) = %+v, want %+v", tc.in, tc.f, got, tc.want)
		}
		if err := got.Validate(); err != nil {
			t.Errorf("scaleSpec(%+v, %v) is invalid: %v", tc.in, tc.f, err)
		}
	}
}

func TestNewStoresValidates(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer c.Close()
	for _, tc := range []struct {
		cfg   StoresConfig
		want  error
		field string
	}{
		{StoresConfig{FloorFactor: math.NaN()}, ErrConfig, "FloorFactor"},
		{StoresConfig{FloorFactor: 2 * MaxFactor}, ErrConfig, "FloorFactor"},
		{StoresConfig{LocalFactor: -1}, ErrConfig, "LocalFactor"},
		{StoresConfig{LocalMaxKeys: -1}, ErrConfig, "LocalMaxKeys"},
		{StoresConfig{Store: Config{Timeout: -1}}, ErrConfig, "Timeout"},
		{StoresConfig{Store: Config{Prefix: "a{"}}, ErrConfig, "Prefix"},
		{StoresConfig{Breaker: breaker.Config{Threshold: -1}}, breaker.ErrConfig, "Threshold"},
		{StoresConfig{Lease: &LeaseOptions{Config: ratelimit.LeaseConfig{Size: -1}}}, ratelimit.ErrInvalidKeyedConfig, "Size"},
		{StoresConfig{Lease: &LeaseOptions{Config: ratelimit.LeaseConfig{Hot: &ratelimit.HeavyHitters{}}}}, ErrConfig, "Hot"},
		{StoresConfig{Lease: &LeaseOptions{HotKeys: &ratelimit.HotKeysConfig{TopK: -1}}}, ratelimit.ErrInvalidKeyedConfig, "TopK"},
	} {
		if _, err := NewStores(c, tc.cfg); !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%+v: %v, want %v naming %s", tc.cfg, err, tc.want, tc.field)
		}
	}
	if _, err := NewStores(nil, StoresConfig{}); !errors.Is(err, ErrConfig) {
		t.Errorf("nil client: %v", err)
	}
}

// ruleOf parses one rule.
func ruleOf(t testing.TB, src string) rules.Rule {
	t.Helper()
	set, err := rules.Parse("test.yaml", []byte("rules:\n- "+src+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	return set.Rules[0]
}

// Which layers each rule gets: leasing for fail-open rules with room for
// a lease (not a leaky queue), a floor for fail-open rules, the local tier
// for all; and the keys are Prefix:{key}:rule-id with a TTL. (The Timeout
// and a TTLMargin of a minute keep a loaded machine's delays from failing
// a decision or expiring a key before its TTL is read.)
func TestStoresLayers(t *testing.T) {
	b := testBackend(t)
	client := newClient(t, b.addr)
	prefix := testPrefix(t)
	stores, err := NewStores(client, StoresConfig{Store: Config{Prefix: prefix, Timeout: 5, TTLMargin: 60}, FloorFactor: 2,
		LocalFactor: 1, Lease: &LeaseOptions{Config: ratelimit.LeaseConfig{Size: 5}}})
	must(t, err)
	t.Cleanup(func() { stores.Close() })
	for _, tc := range []struct {
		src                   string
		leased, floor         bool
		leaseSize             int
		floorRate, floorBurst float64
	}{
		{"{id: open, key: [user], rate: 10, per: 1s}", true, true, 5, 20, 20},
		{"{id: small, key: [user], rate: 3, per: 1m}", true, true, 3, 6, 6},
		{"{id: closed, key: [user], rate: 10, per: 1s, failMode: closed}", false, false, 0, 0, 0},
		{"{id: one, key: [user], rate: 1, per: 1s}", false, true, 0, 2, 2},
		{"{id: queue, key: [user], rate: 10, per: 1s, algorithm: leaky-queue}", false, true, 0, 20, 20},
	} {
		r := ruleOf(t, tc.src)
		k, err := stores.ForRule(r)
		must(t, err)
		rs := k.(*RuleStore)
		if (rs.Leased() != nil) != tc.leased || (rs.Floor() != nil) != tc.floor || rs.Local() == nil || rs.Guard() == nil {
			t.Errorf("%s: leased %v, floor %v, local %v; want %v, %v, true", r.ID, rs.Leased() != nil, rs.Floor() != nil, rs.Local() != nil, tc.leased, tc.floor)
			continue
		}
		if tc.floor {
			if s := rs.Floor().Spec(); s.Rate != tc.floorRate || float64(s.Burst) != tc.floorBurst {
				t.Errorf("%s: floor %+v, want rate %v burst %v", r.ID, s, tc.floorRate, tc.floorBurst)
			}
		}
		if s := rs.Local().Spec(); s.Rate != r.Spec.Rate {
			t.Errorf("%s: local tier %+v, want the rule's rate %v", r.ID, s, r.Spec.Rate)
		}
		d, err := rs.AllowN(context.Background(), "u1", 0, 1)
		if err != nil || !d.Allowed {
			t.Fatalf("%s: first decision %+v, %v", r.ID, d, err)
		}
		key := prefix + ":{u1}:" + r.ID
		if got := rs.Redis().RedisKey("u1"); got != key {
			t.Errorf("%s: RedisKey %q, want %q", r.ID, got, key)
		}
		pttl, err := client.PTTL(context.Background(), key).Result()
		if err != nil || pttl <= 0 {
			t.Errorf("%s: PTTL of %s = %v, %v; want a TTL", r.ID, key, pttl, err)
		}
		if tc.leased {
			// The first decision took a lease of leaseSize units: Redis
			// has leaseSize − 1 more than this node has spent.
			st := rs.Leased().Stats()
			if st.LeasedUnits != uint64(tc.leaseSize) {
				t.Errorf("%s: leased %d units, want %d", r.ID, st.LeasedUnits, tc.leaseSize)
			}
		}
	}
}

// With Lease.HotKeys, a key is decided by Redis one round trip per
// request until it is hot (MinCount units), then from leases.
func TestStoresLeaseHotKeysOnly(t *testing.T) {
	b := testBackend(t)
	client := newClient(t, b.addr)
	stores, err := NewStores(client, StoresConfig{Store: Config{Prefix: testPrefix(t), Timeout: 5},
		Lease: &LeaseOptions{Config: ratelimit.LeaseConfig{Size: 10, Refill: -1}, HotKeys: &ratelimit.HotKeysConfig{MinCount: 3}}})
	must(t, err)
	t.Cleanup(func() { stores.Close() })
	k, err := stores.ForRule(ruleOf(t, "{id: api, key: [user], rate: 100, per: 1s}"))
	must(t, err)
	rs := k.(*RuleStore)
	if rs.HotKeys() == nil {
		t.Fatal("no hot-key tracker")
	}
	ctx := context.Background()
	for i := 1; i <= 12; i++ {
		if d, err := rs.AllowN(ctx, "u", 0, 1); err != nil || !d.Allowed {
			t.Fatalf("decision %d: %+v, %v", i, d, err)
		}
		// Decisions 1 and 2: not hot, straight to Redis. Decision 3: hot,
		// takes a lease of 10 (one round trip) and spends 1; 4 to 12 spend
		// the other 9 locally.
		// (The Store counts a decision just after answering it: poll.)
		wantRedis := uint64(min(i, 3))
		deadline := time.Now().Add(10 * time.Second)
		for rs.Redis().Stats().Decisions < wantRedis && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if got := rs.Redis().Stats().Decisions; got != wantRedis {
			t.Fatalf("after %d decisions, %d Redis decisions; want %d", i, got, wantRedis)
		}
	}
	if st := rs.Leased().Stats(); st.Local != 9 || st.RoundTrips != 1 {
		t.Errorf("lease stats %+v, want 9 local decisions and 1 round trip", st)
	}
}

// Stores owns the goroutines of the Redis stores it makes: RuleStore.Close
// and Stores.Close stop them; ForRule fails after Close.
func TestStoresClose(t *testing.T) {
	b := testBackend(t)
	client := newClient(t, b.addr)
	must(t, client.Ping(context.Background()).Err())
	before := goroutines()
	stores, err := NewStores(client, StoresConfig{Store: Config{Prefix: testPrefix(t), Workers: 3}})
	must(t, err)
	var made []*RuleStore
	for _, src := range []string{"{id: a, rate: 1, per: 1s}", "{id: b, rate: 1, per: 1s}", "{id: c, rate: 1, per: 1s}"} {
		k, err := stores.ForRule(ruleOf(t, src))
		must(t, err)
		made = append(made, k.(*RuleStore))
	}
	must(t, made[0].Close())
	must(t, made[0].Close())
	if _, err := made[0].Redis().AllowN(context.Background(), "k", 0, 1); !errors.Is(err, ErrClosed) {
		t.Errorf("closed store: %v", err)
	}
	stores.mu.Lock()
	open := len(stores.open)
	stores.mu.Unlock()
	if open != 2 {
		t.Errorf("%d stores open after closing one of 3", open)
	}
	must(t, stores.Close())
	if _, err := stores.ForRule(ruleOf(t, "{id: d, rate: 1, per: 1s}")); !errors.Is(err, ErrClosed) {
		t.Errorf("ForRule after Close: %v", err)
	}
	if _, err := made[2].Redis().AllowN(context.Background(), "k", 0, 1); !errors.Is(err, ErrClosed) {
		t.Errorf("store after Stores.Close: %v", err)
	}
	checkNoLeak(t, before)
}

func TestStoresForRuleErrors(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	stores, err := NewStores(c, StoresConfig{})
	must(t, err)
	defer stores.Close()
	if _, err := stores.ForRule(rules.Rule{ID: "x"}); !errors.Is(err, rules.ErrInvalid) {
		t.Errorf("invalid rule: %v", err)
	}
	r := rules.Rule{ID: "q", Spec: ratelimit.Spec{Algorithm: ratelimit.AlgLeakyQueue, Rate: 1, Per: 1, Burst: MaxEntries + 1}}
	if _, err := stores.ForRule(r); !errors.Is(err, ratelimit.ErrInvalidLimit) {
		t.Errorf("leaky queue too long for Redis: %v", err)
	}
	if len(stores.open) != 0 {
		t.Errorf("%d stores left open by failed ForRule calls", len(stores.open))
	}
}

// atomicClock is a manual clock safe for the server's goroutines.
type atomicClock struct{ bits atomic.Uint64 }

func (c *atomicClock) Now() float64         { return math.Float64frombits(c.bits.Load()) }
func (c *atomicClock) Advance(d float64)    { c.bits.Store(math.Float64bits(c.Now() + d)) }
func newAtomicClock(t float64) *atomicClock { c := &atomicClock{}; c.Advance(t); return c }

// A fail-closed and a fail-open rule through httplimit over a loopback
// server, on a Redis of the test's own that is killed mid-test: closed
// answers 503 with a problem body, open keeps serving within its floor
// (then 429); the breakers stop calling the dead Redis; after a restart a
// breaker trial notices and Redis decides again. Closing the Limiter
// closes every Redis store (goroutines counted).
func TestStoresThroughHTTPRedisKilled(t *testing.T) {
	srv := redistest.Start(t)
	client := newClient(t, srv.Addr())
	before := goroutines()
	prefix := testPrefix(t)
	// Timeout 5 s: a killed Redis refuses at once, a slow one is not dead.
	stores, err := NewStores(client, StoresConfig{Store: Config{Prefix: prefix, Timeout: 5},
		Breaker: breaker.Config{Threshold: 2, Recovery: 1}, FloorFactor: 0.5})
	must(t, err)
	var mu sync.Mutex
	made := map[string]*RuleStore{}
	factory := func(r rules.Rule) (ratelimit.Keyed, error) {
		k, err := stores.ForRule(r)
		if err == nil {
			mu.Lock()
			made[r.ID] = k.(*RuleStore)
			mu.Unlock()
		}
		return k, err
	}
	set, err := rules.Parse("test.yaml", []byte(`rules:
- {id: otp, key: [user], rate: 3, per: 10m, failMode: closed, match: {paths: [/otp]}}
- {id: api, key: [user], rate: 100, per: 1h, burst: 4, match: {paths: [/api]}}
`))
	must(t, err)
	clk := newAtomicClock(1000)
	lim, err := httplimit.New(set, httplimit.Config{Store: factory, Clock: clk, Logger: slog.New(slog.DiscardHandler)})
	must(t, err)
	hs := httptest.NewServer(lim.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "hello\n")
	})))
	type answer struct {
		code              int
		rateLimit, retry  string
		contentType, body string
	}
	do := func(path, user string) answer {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, hs.URL+path, nil)
		req.Header.Set("X-User-ID", user)
		resp, err := hs.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return answer{resp.StatusCode, resp.Header.Get("RateLimit"), resp.Header.Get("Retry-After"), resp.Header.Get("Content-Type"), string(body)}
	}

	// Healthy: Redis decides.
	if a := do("/otp", "alice"); a.code != 200 || a.rateLimit != `"otp";r=2;t=200` {
		t.Fatalf("otp, healthy: %+v", a)
	}
	for i, want := range []string{`"api";r=3;t=36`, `"api";r=2;t=72`} {
		if a := do("/api", "bob"); a.code != 200 || a.rateLimit != want {
			t.Fatalf("api request %d, healthy: %+v; want %s", i+1, a, want)
		}
	}
	if n, err := client.Exists(context.Background(), prefix+":{alice}:otp", prefix+":{bob}:api").Result(); err != nil || n != 2 {
		t.Fatalf("Redis keys: %d, %v; want both", n, err)
	}

	srv.Kill()
	// Fail closed: 503, problem+json naming the rule, Retry-After = the
	// breaker's Recovery.
	for i := range 3 {
		a := do("/otp", "alice")
		var p map[string]any
		if err := json.Unmarshal([]byte(a.body), &p); err != nil || a.code != 503 || a.contentType != "application/problem+json" ||
			a.retry != "1" || p["status"] != 503.0 || p["rule"] != "otp" {
			t.Fatalf("otp %d, Redis down: %+v (%v)", i+1, a, err)
		}
	}
	// Fail open: the floor (half the rule: burst 2) serves a fresh key
	// twice, then refuses with 429 naming the rule.
	for i, want := range []int{200, 200, 429} {
		if a := do("/api", "carol"); a.code != want {
			t.Fatalf("api %d, Redis down: %+v; want %d", i+1, a, want)
		}
	}
	otp, api := made["otp"], made["api"]
	for name, rs := range map[string]*RuleStore{"otp": otp, "api": api} {
		if s := rs.Guard().Breaker().State; s != breaker.Open {
			t.Errorf("%s: breaker %v with Redis down, want OPEN", name, s)
		}
		if st := rs.Guard().Stats(); st.Skipped == 0 || st.Failures != 2 {
			t.Errorf("%s: guard stats %+v, want 2 failures then skipped calls", name, st)
		}
	}

	// Redis comes back, empty. Each Recovery second one trial goes to it.
	srv.Restart()
	for _, c := range []struct{ path, user, want string }{
		{"/otp", "alice", `"otp";r=2;t=200`},
		{"/api", "carol", `"api";r=3;t=36`},
	} {
		for try := 1; ; try++ {
			clk.Advance(1)
			a := do(c.path, c.user)
			if a.code == 200 && a.rateLimit == c.want {
				break
			}
			if try == 20 {
				t.Fatalf("%s: no recovery after %d trials: %+v", c.path, try, a)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	for name, rs := range map[string]*RuleStore{"otp": otp, "api": api} {
		if s := rs.Guard().Breaker().State; s != breaker.Closed {
			t.Errorf("%s: breaker %v after recovery", name, s)
		}
	}

	hs.Close()
	hs.Client().CloseIdleConnections()
	must(t, lim.Close())
	stores.mu.Lock()
	open := len(stores.open)
	stores.mu.Unlock()
	if open != 0 {
		t.Errorf("%d stores open after the Limiter closed", open)
	}
	must(t, stores.Close())
	checkNoLeak(t, before)
}

package redisstore

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"

	"github.com/spillwayhq/spillway/breaker"
	"github.com/spillwayhq/spillway/internal/redistest"
	"github.com/spillwayhq/spillway/ratelimit"
	"github.com/spillwayhq/spillway/ratelimit/rules"
)

// metricsScrape gathers reg (failing t on any error) and returns every
// spillway_ratelimit_redis_ sample as `name{label="value",...}` → value,
// labels sorted by name.
func metricsScrape(t *testing.T, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "spillway_ratelimit_redis_") {
			continue
		}
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, lp := range m.GetLabel() {
				ls = append(ls, lp.GetName()+"="+strconv.Quote(lp.GetValue()))
			}
			slices.Sort(ls)
			name := mf.GetName() + "{" + strings.Join(ls, ",") + "}"
			if _, dup := out[name]; dup {
				t.Fatalf("series %s twice", name)
			}
			switch mf.GetType() {
			case dto.MetricType_HISTOGRAM: // the round trips' latency: TestCollectorRoundTripLatency
				continue
			case dto.MetricType_COUNTER:
				out[name] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[name] = m.GetGauge().GetValue()
			default:
				t.Fatalf("%s: type %v", name, mf.GetType())
			}
		}
	}
	return out
}

// metricsRule returns the expected series of one rule: the store, fail-mode
// and breaker series set to 0, then vals applied. Keys of vals are short
// names: "decisions:decided", "round_trips", "fail_mode:breaker_open",
// "memory_keys:floor", "leases", ...
func metricsRule(rule string, vals map[string]float64) map[string]float64 {
	series := func(short string) string {
		name, label, _ := strings.Cut(short, ":")
		full := "spillway_ratelimit_redis_" + name
		if !strings.HasSuffix(name, "_length") && !strings.HasPrefix(name, "breaker_state") &&
			name != "leases" && name != "memory_keys" {
			full += "_total"
		}
		labels := `rule="` + rule + `"`
		switch name {
		case "decisions":
			labels = `outcome="` + label + `",` + labels
		case "fail_mode_decisions":
			labels = `cause="` + label + `",` + labels
		case "memory_keys", "memory_evictions":
			labels += `,tier="` + label + `"`
		}
		return full + "{" + labels + "}"
	}
	out := map[string]float64{}
	for _, s := range []string{"decisions:decided", "decisions:error", "decisions:abandoned", "decisions:queue_full",
		"round_trips", "script_reloads", "queue_length", "guard_calls", "fail_mode_decisions:store_failed",
		"fail_mode_decisions:breaker_open", "breaker_state", "breaker_transitions"} {
		out[series(s)] = 0
	}
	for s, v := range vals {
		out[series(s)] = v
	}
	return out
}

// metricsMerge merges expected series maps.
func metricsMerge(ms ...map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for _, m := range ms {
		maps.Copy(out, m)
	}
	return out
}

func metricsCompare(t *testing.T, what string, got, want map[string]float64) {
	t.Helper()
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if g, ok := got[k]; !ok {
			t.Errorf("%s: missing %s (want %v)", what, k, want[k])
		} else if g != want[k] {
			t.Errorf("%s: %s = %v, want %v", what, k, g, want[k])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: unexpected %s = %v", what, k, got[k])
		}
	}
}

// metricsSettle compares reg's series with want, scraping again every
// 10 ms for up to 10 s while they differ: a Store counts a batch's
// decisions just after answering their callers, so the last ones may not
// be counted yet when the traffic's calls return.
func metricsSettle(t *testing.T, what string, reg prometheus.Gatherer, want map[string]float64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := metricsScrape(t, reg)
		if maps.Equal(got, want) || time.Now().After(deadline) {
			metricsCompare(t, what, got, want)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// metricsDecide sends one request per entry of keys at now and returns how
// many were allowed; errors are counted as refusals.
func metricsDecide(rs *RuleStore, now float64, keys ...string) int {
	n := 0
	for _, k := range keys {
		if d, err := rs.AllowN(context.Background(), k, now, 1); err == nil && d.Allowed {
			n++
		}
	}
	return n
}

func metricsRuleStore(t *testing.T, s *Stores, r rules.Rule) *RuleStore {
	t.Helper()
	k, err := s.ForRule(r)
	must(t, err)
	return k.(*RuleStore)
}

func repeat(key string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = key
	}
	return out
}

// TestCollectorHealthy: scripted traffic on a working Redis (the shared
// real one, or miniredis), each script preloaded so that every decision is
// one round trip.
//
//	plain   GCRA, 3 per 10^9 s, fail closed, local tier ×1: 5 requests
//	        on one key → 3 allowed, the last 2 refused by the local tier:
//	        3 guard calls, 3 decided, 3 round trips, 1 key in the tier.
//	leased  GCRA, 20 per 10^9 s, fail open, leases of 5 units (fetched
//	        only when a lease cannot pay, TTL 1 s), local tier ×1: 12
//	        requests at t=0 → fetches at requests 1, 6, 11 (3 round trips,
//	        15 units), 9 from the lease; one more at t=2 finds the 3 units
//	        left expired (stranded) and fetches again: 4 round trips,
//	        20 units, 9 local, 1 lease held; the local tier holds the
//	        key, the floor none (it is asked only when Redis fails).
func TestCollectorHealthy(t *testing.T) {
	b := testBackend(t)
	client := newClient(t, b.addr)
	prefix := testPrefix(t)
	stores, err := NewStores(client, StoresConfig{Store: Config{Prefix: prefix, Timeout: 5, Workers: 1},
		LocalFactor: 1,
		Lease: &LeaseOptions{Config: ratelimit.LeaseConfig{Size: 5, Refill: -1, TTL: 1},
			Rules: func(r *rules.Rule) bool { return r.ID == "leased" }}})
	must(t, err)
	t.Cleanup(func() { stores.Close() })
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(stores.Collector())

	if got := metricsScrape(t, reg); len(got) != 0 {
		t.Errorf("series before any rule: %v", got)
	}
	plain := metricsRuleStore(t, stores, rules.Rule{ID: "plain", FailMode: ratelimit.FailClosed,
		Spec: ratelimit.Spec{Algorithm: ratelimit.AlgGCRA, Rate: 3, Per: 1e9}})
	leased := metricsRuleStore(t, stores, rules.Rule{ID: "leased", FailMode: ratelimit.FailOpen,
		Spec: ratelimit.Spec{Algorithm: ratelimit.AlgGCRA, Rate: 20, Per: 1e9}})
	if leased.Leased() == nil || plain.Leased() != nil {
		t.Fatal("leasing not as configured")
	}
	must(t, plain.Redis().Load(context.Background()))
	must(t, leased.Redis().Load(context.Background()))

	zeroLease := map[string]float64{"leases": 0, "lease_local_decisions": 0, "lease_waited_decisions": 0,
		"lease_round_trips": 0, "lease_leased_units": 0, "lease_stranded_units": 0,
		"memory_keys:floor": 0, "memory_evictions:floor": 0, "memory_keys:local": 0, "memory_evictions:local": 0}
	zeroLocal := map[string]float64{"memory_keys:local": 0, "memory_evictions:local": 0}
	metricsSettle(t, "fresh", reg,
		metricsMerge(metricsRule("plain", zeroLocal), metricsRule("leased", zeroLease)))

	if n := metricsDecide(plain, 0, repeat("k", 5)...); n != 3 {
		t.Fatalf("plain allowed %d of 5, want 3", n)
	}
	if n := metricsDecide(leased, 0, repeat("k", 12)...); n != 12 {
		t.Fatalf("leased allowed %d of 12", n)
	}
	if n := metricsDecide(leased, 2, "k"); n != 1 {
		t.Fatalf("leased refused its 13th request")
	}
	want := metricsMerge(
		metricsRule("plain", map[string]float64{"decisions:decided": 3, "round_trips": 3, "guard_calls": 3,
			"memory_keys:local": 1, "memory_evictions:local": 0}),
		metricsRule("leased", metricsMerge(zeroLease, map[string]float64{
			"decisions:decided": 4, "round_trips": 4, "guard_calls": 13,
			"leases": 1, "lease_local_decisions": 9, "lease_round_trips": 4,
			"lease_leased_units": 20, "lease_stranded_units": 3, "memory_keys:local": 1})))
	metricsSettle(t, "after traffic", reg, want)

	// Cardinality does not grow with keys: 500 more keys, same series.
	keys := make([]string, 500)
	for i := range keys {
		keys[i] = "many-" + strconv.Itoa(i)
	}
	metricsDecide(plain, 3, keys...)
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 14+22+1 {
		t.Errorf("%d series (%v), want 14 for plain + 22 for leased + the round trips' latency", n, err)
	}
	if probs, err := testutil.GatherAndLint(reg); err != nil || len(probs) != 0 {
		t.Errorf("lint: %v %v", probs, err)
	}
	want["spillway_ratelimit_redis_decisions_total{outcome=\"decided\",rule=\"plain\"}"] = 503
	want["spillway_ratelimit_redis_guard_calls_total{rule=\"plain\"}"] = 503
	want["spillway_ratelimit_redis_memory_keys{rule=\"plain\",tier=\"local\"}"] = 501
	// One at a time, each of the 500 decisions is its own round trip.
	want["spillway_ratelimit_redis_round_trips_total{rule=\"plain\"}"] = 503
	metricsSettle(t, "after 500 keys", reg, want)
}

// TestCollectorDeadRedis: the rules' Redis refuses connections. Breaker
// threshold 2, recovery 1 s; 5 requests at t=100 on one key: 2 calls fail
// (2 errors, 2 round trips), the breaker opens (1 transition), 3 are
// decided without a call. The fail-open rule's floor (the rule's limit, 3)
// allows 3 of the 5 and holds 1 key. At t=101.5 one trial fails: the
// breaker goes half-open and open again (3 transitions, 3 calls, 3
// errors), state 1 (open).
func TestCollectorDeadRedis(t *testing.T) {
	before := goroutines()
	dead := redis.NewClient(&redis.Options{Addr: redistest.FreeAddr(t),
		MaxRetries: -1, DialerRetries: 1, DialTimeout: 200 * time.Millisecond, ContextTimeoutEnabled: true})
	stores, err := NewStores(dead, StoresConfig{Store: Config{Timeout: 5}, Breaker: breaker.Config{Threshold: 2, Recovery: 1}})
	must(t, err)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(stores.Collector())
	spec := ratelimit.Spec{Algorithm: ratelimit.AlgGCRA, Rate: 3, Per: 1e9}
	open := metricsRuleStore(t, stores, rules.Rule{ID: "open", FailMode: ratelimit.FailOpen, Spec: spec})
	closed := metricsRuleStore(t, stores, rules.Rule{ID: "closed", FailMode: ratelimit.FailClosed, Spec: spec})
	if n := metricsDecide(open, 100, repeat("k", 5)...); n != 3 {
		t.Errorf("fail open allowed %d of 5, want the floor's 3", n)
	}
	if n := metricsDecide(closed, 100, repeat("k", 5)...); n != 0 {
		t.Errorf("fail closed allowed %d of 5", n)
	}
	down := map[string]float64{"decisions:error": 2, "round_trips": 2, "guard_calls": 2,
		"fail_mode_decisions:store_failed": 2, "fail_mode_decisions:breaker_open": 3,
		"breaker_state": 1, "breaker_transitions": 1}
	floor := map[string]float64{"memory_keys:floor": 1, "memory_evictions:floor": 0}
	metricsSettle(t, "down", reg,
		metricsMerge(metricsRule("open", metricsMerge(down, floor)), metricsRule("closed", down)))

	metricsDecide(open, 101.5, "k")
	metricsDecide(closed, 101.5, "k")
	down = map[string]float64{"decisions:error": 3, "round_trips": 3, "guard_calls": 3,
		"fail_mode_decisions:store_failed": 3, "fail_mode_decisions:breaker_open": 3,
		"breaker_state": 1, "breaker_transitions": 3}
	metricsSettle(t, "after a failed trial", reg,
		metricsMerge(metricsRule("open", metricsMerge(down, floor)), metricsRule("closed", down)))

	// One family in the exposition format, help text included.
	const exposition = `
# HELP spillway_ratelimit_redis_fail_mode_decisions_total Requests decided by the rule's fail mode (served within the floor if fail-open, refused if fail-closed), by cause: store_failed (the call failed), breaker_open (no call made).
# TYPE spillway_ratelimit_redis_fail_mode_decisions_total counter
spillway_ratelimit_redis_fail_mode_decisions_total{cause="breaker_open",rule="closed"} 3
spillway_ratelimit_redis_fail_mode_decisions_total{cause="breaker_open",rule="open"} 3
spillway_ratelimit_redis_fail_mode_decisions_total{cause="store_failed",rule="closed"} 3
spillway_ratelimit_redis_fail_mode_decisions_total{cause="store_failed",rule="open"} 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(exposition), "spillway_ratelimit_redis_fail_mode_decisions_total"); err != nil {
		t.Error(err)
	}

	stores.Close()
	if got := metricsScrape(t, reg); len(got) != 0 {
		t.Errorf("series after Close: %v", got)
	}
	dead.Close()
	checkNoLeak(t, before)
}

// TestCollectorReplacedStore: two open stores of one rule (httplimit keeps
// a replaced store open for a while) give one set of series, their sums;
// closing the older one keeps its counts (counters stay monotonic) and
// hands the breaker gauge to the newer; closing both removes the rule.
func TestCollectorReplacedStore(t *testing.T) {
	dead := redis.NewClient(&redis.Options{Addr: redistest.FreeAddr(t),
		MaxRetries: -1, DialerRetries: 1, DialTimeout: 200 * time.Millisecond, ContextTimeoutEnabled: true})
	t.Cleanup(func() { dead.Close() })
	stores, err := NewStores(dead, StoresConfig{Store: Config{Timeout: 5}, Breaker: breaker.Config{Threshold: 1, Recovery: 1}})
	must(t, err)
	t.Cleanup(func() { stores.Close() })
	c := stores.Collector()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	r := rules.Rule{ID: "r", FailMode: ratelimit.FailClosed, Spec: ratelimit.Spec{Rate: 3, Per: 1e9}}

	old := metricsRuleStore(t, stores, r)
	metricsDecide(old, 0, "a", "b") // 1 failed call opens the breaker, 1 skipped
	metricsScrape(t, reg)           // the collector sees old first
	young := metricsRuleStore(t, stores, r)
	metricsDecide(young, 0, "a") // young's breaker opens too
	metricsDecide(young, 1, "a") // and its trial fails: open again (3 transitions)
	want := metricsRule("r", map[string]float64{"decisions:error": 3, "round_trips": 3, "guard_calls": 3,
		"fail_mode_decisions:store_failed": 3, "fail_mode_decisions:breaker_open": 1,
		"breaker_state": 1, "breaker_transitions": 4})
	metricsSettle(t, "two stores", reg, want)

	// old is closed, and a straggler's trial reaches it (ErrClosed: not a
	// Redis call, so not in its store's counts, but a failed guard call and
	// two transitions); young's trial fails. The next scrape reads old a
	// last time: young is still open, so the rule keeps old's counts.
	old.Close()
	metricsDecide(old, 5, "c")
	metricsDecide(young, 5, "c")
	want = metricsRule("r", map[string]float64{"decisions:error": 4, "round_trips": 4, "guard_calls": 5,
		"fail_mode_decisions:store_failed": 5, "fail_mode_decisions:breaker_open": 1,
		"breaker_state": 1, "breaker_transitions": 8})
	metricsSettle(t, "old closed", reg, want)
	// ...counted once: the next scrape no longer reads old.
	metricsDecide(old, 9, "d")
	metricsSettle(t, "old closed, later", reg, want)

	young.Close()
	if got := metricsScrape(t, reg); len(got) != 0 {
		t.Errorf("series after both closed: %v", got)
	}
	// The rule comes back: counting restarts (a counter reset).
	again := metricsRuleStore(t, stores, r)
	metricsDecide(again, 20, "e")
	metricsSettle(t, "rule back", reg, metricsRule("r", map[string]float64{
		"decisions:error": 1, "round_trips": 1, "guard_calls": 1, "fail_mode_decisions:store_failed": 1,
		"breaker_state": 1, "breaker_transitions": 1}))
}

// TestCollectorConcurrent scrapes while 8 goroutines decide (for -race),
// and checks the decided counter never goes back and ends at the total.
func TestCollectorConcurrent(t *testing.T) {
	b := testBackend(t)
	client := newClient(t, b.addr)
	stores, err := NewStores(client, StoresConfig{Store: Config{Prefix: testPrefix(t), Timeout: 5}})
	must(t, err)
	t.Cleanup(func() { stores.Close() })
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(stores.Collector())
	rs := metricsRuleStore(t, stores, rules.Rule{ID: "c", Spec: ratelimit.Spec{Rate: 1e6, Per: 1}})
	const goroutines, each = 8, 50
	done := make(chan struct{})
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				if _, err := rs.AllowN(context.Background(), "k"+strconv.Itoa(g*each+i), 0, 1); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	go func() { wg.Wait(); close(done) }()
	const decided = `spillway_ratelimit_redis_decisions_total{outcome="decided",rule="c"}`
	last := 0.0
	for scraping := true; scraping; {
		select {
		case <-done:
			scraping = false
		default:
		}
		v := metricsScrape(t, reg)[decided]
		if v < last {
			t.Fatalf("%s went from %v to %v", decided, last, v)
		}
		last = v
	}
	deadline := time.Now().Add(10 * time.Second)
	for last != goroutines*each && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		last = metricsScrape(t, reg)[decided]
	}
	if last != goroutines*each {
		t.Errorf("%s = %v, want %d", decided, last, goroutines*each)
	}
}

// ExampleStores_Collector registers the rule stores' metrics on a registry.
func ExampleStores_Collector() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"}) // not dialled by this example
	defer rdb.Close()
	stores, err := NewStores(rdb, StoresConfig{})
	if err != nil {
		panic(err)
	}
	defer stores.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(stores.Collector())
	if _, err := stores.ForRule(rules.Rule{ID: "per-user", Spec: ratelimit.Spec{Rate: 100, Per: 60}}); err != nil {
		panic(err)
	}
	n, _ := testutil.GatherAndCount(reg)
	fmt.Println(n, "series for one fail-open rule (with its floor)") // 14, and the round trips' latency
	// Output: 15 series for one fail-open rule (with its floor)
}

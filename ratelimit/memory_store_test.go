package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// memAlgSpecs are the seven algorithms with a capacity of limit units and
// next to no refill (limit per hour), and the number of cost-1 requests each
// admits at one instant: limit, and one more for the leaky queue (one unit
// leaves at once, limit wait).
func memAlgSpecs(limit int) []struct {
	spec  Spec
	admit int
} {
	l := float64(limit)
	return []struct {
		spec  Spec
		admit int
	}{
		{Spec{Algorithm: AlgGCRA, Rate: l, Per: 3600}, limit},
		{Spec{Algorithm: AlgTokenBucket, Rate: l, Per: 3600}, limit},
		{Spec{Algorithm: AlgLeakyMeter, Rate: l, Per: 3600}, limit},
		{Spec{Algorithm: AlgLeakyQueue, Rate: l, Per: 3600}, limit + 1},
		{Spec{Algorithm: AlgFixedWindow, Rate: l, Per: 3600}, limit},
		{Spec{Algorithm: AlgSlidingLog, Rate: l, Per: 3600}, limit},
		{Spec{Algorithm: AlgSlidingCounter, Rate: l, Per: 3600}, limit},
	}
}

func mustMemory(t testing.TB, spec Spec, cfg MemoryConfig) *Memory {
	t.Helper()
	m, err := NewMemory(spec, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// memModes are the two tables, for tests that run over both: the hashed
// table (the default for the fixed-size states) and the exact-key one.
var memModes = []struct {
	name  string
	exact bool
}{{"hashed", false}, {"exact", true}}

// forMemModes runs f as a subtest per table.
func forMemModes(t *testing.T, f func(t *testing.T, exact bool)) {
	for _, mode := range memModes {
		t.Run(mode.name, func(t *testing.T) { f(t, mode.exact) })
	}
}

// memIsHashed reports whether m uses the hashed table.
func memIsHashed(m *Memory) bool { return m.kind >= memKindHashedGCRA }

// memShardCount returns the number of shards of m.
func memShardCount(m *Memory) int {
	switch impl := m.impl.(type) {
	case *memoryOf[GCRAState]:
		return len(impl.shards)
	case *hashedOf[GCRAState]:
		return len(impl.shards)
	}
	panic(fmt.Sprintf("memShardCount: %T", m.impl))
}

// memCheck checks the table invariants of every shard of a GCRA store.
func memCheck(t *testing.T, m *Memory) {
	t.Helper()
	switch impl := m.impl.(type) {
	case *memoryOf[GCRAState]:
		for i := range impl.shards {
			memCheckTable(t, &impl.shards[i].t)
		}
	case *hashedOf[GCRAState]:
		for i := range impl.shards {
			sh := &impl.shards[i]
			hashCheckTable(t, &sh.t)
			if sh.t.n > sh.max {
				t.Fatalf("shard %d holds %d keys, cap %d", i, sh.t.n, sh.max)
			}
		}
	default:
		t.Fatalf("memCheck: %T", m.impl)
	}
}

// N goroutines × M requests on one key against a limit of L admit exactly L
// (cost 1) or ⌊L/3⌋ (cost 3), for every algorithm; run with -race.
func TestMemoryExactUnderConcurrency(t *testing.T) {
	const goroutines, perG, limit = 8, 300, 100
	forMemModes(t, func(t *testing.T, exact bool) {
		for _, c := range memAlgSpecs(limit) {
			for _, cost := range []int{1, 3} {
				t.Run(fmt.Sprintf("%s/cost%d", c.spec.Algorithm.Name(), cost), func(t *testing.T) {
					m := mustMemory(t, c.spec, MemoryConfig{ExactKeys: exact})
					want := c.admit
					if cost == 3 {
						// 33 for every algorithm; for the leaky queue the first
						// request's first unit leaves at once, 2 wait, and then
						// 32 more fit: 2 + 32·3 = 98 ≤ 100 < 101.
						want = limit / 3
					}
					var admitted atomic.Int64
					var wg sync.WaitGroup
					for g := range goroutines {
						wg.Add(1)
						go func() {
							defer wg.Done()
							for range perG {
								// Other keys in between, so the shards see traffic.
								m.AllowN(context.Background(), fmt.Sprint("other", g), 10, 1)
								if d, _ := m.AllowN(context.Background(), "hot", 10, cost); d.Allowed {
									admitted.Add(1)
								}
							}
						}()
					}
					wg.Wait()
					if got := int(admitted.Load()); got != want {
						t.Errorf("admitted %d requests of cost %d, want exactly %d", got, cost, want)
					}
				})
			}
		}
	})
}

// Keys are independent, and a decision is the algorithm's on that key's
// state: a step table over explicit instants (GCRA r = 2/s, b = 3).
func TestMemorySteps(t *testing.T) { forMemModes(t, testMemorySteps) }

func testMemorySteps(t *testing.T, exact bool) {
	m := mustMemory(t, Spec{Rate: 2, Per: 1, Burst: 3}, MemoryConfig{Shards: 1, ExactKeys: exact})
	if memIsHashed(m) == exact {
		t.Fatalf("ExactKeys %v: kind %d", exact, m.kind)
	}
	for i, s := range []struct {
		key     string
		now     float64
		cost    int
		allowed bool
		remain  int
		retry   float64
	}{
		{"a", 0, 1, true, 2, 0},
		{"a", 0, 2, true, 0, 0},
		{"a", 0, 1, false, 0, 0.5},
		{"b", 0, 3, true, 0, 0}, // b has its own bucket
		{"b", 0, 1, false, 0, 0.5},
		{"a", 0.5, 1, true, 0, 0},
		{"a", 0.5, 4, false, 0, math.Inf(1)}, // more than the burst: never
		{"c", 0.5, 0, true, 3, 0},            // a query: allowed, consumes nothing
		{"a", 10, 3, true, 0, 0},
	} {
		d, err := m.AllowN(context.Background(), s.key, s.now, s.cost)
		if err != nil || d.Allowed != s.allowed || d.Remaining != s.remain || d.RetryAfter != s.retry {
			t.Errorf("step %d %+v: got %+v, %v", i, s, d, err)
		}
	}
	// "c" was only queried: never stored. "b"'s TAT (1.5) is in the past at
	// 10, so b goes at the latest with a sweep at 10 (a decision's own sweep
	// may have dropped it already); "a" (TAT 11.5) stays.
	m.Sweep(10)
	if st := m.Stats(); st.Inserts != 2 || st.Keys != 1 || st.Expired != 1 {
		t.Errorf("stats %+v: want a and b inserted (not c), b expired, a held", st)
	}
}

// The store decides exactly as the algorithm does on a private state per key,
// even though keys are dropped whenever they are full again: expiry changes
// no decision. Sweep runs after every request, and decisions sweep too.
func TestMemoryExpiryChangesNoDecision(t *testing.T) {
	for _, c := range []Spec{
		{Algorithm: AlgGCRA, Rate: 5, Per: 1, Burst: 3},
		{Algorithm: AlgTokenBucket, Rate: 5, Per: 1, Burst: 3},
		{Algorithm: AlgLeakyMeter, Rate: 5, Per: 1, Burst: 3},
		{Algorithm: AlgLeakyQueue, Rate: 5, Per: 1, Burst: 3},
		{Algorithm: AlgFixedWindow, Rate: 4, Per: 1},
		{Algorithm: AlgSlidingLog, Rate: 4, Per: 1},
		{Algorithm: AlgSlidingCounter, Rate: 4, Per: 1},
	} {
		t.Run(c.Algorithm.Name(), func(t *testing.T) {
			forMemModes(t, func(t *testing.T, exact bool) { testMemoryExpiry(t, c, exact) })
		})
	}
}

func testMemoryExpiry(t *testing.T, c Spec, exact bool) {
	m := mustMemory(t, c, MemoryConfig{Shards: 2, ExactKeys: exact})
	ref := memReference(t, c)
	r := newRand(7)
	now := 0.0
	for i := range 20000 {
		switch x := r.Float64(); {
		case x < 0.05:
			now += 2 * r.Float64() // a pause: many keys full again
		case x < 0.2: // same instant
		default:
			now += r.ExpFloat64() * 0.01
		}
		key := fmt.Sprint("k", int(math.Floor(math.Pow(r.Float64(), 2)*30))) // skewed over 30 keys
		cost := 1 + r.IntN(2)
		got, _ := m.AllowN(context.Background(), key, now, cost)
		if want := ref(key, now, cost); got != want {
			t.Fatalf("request %d (%s at %v cost %d): store %+v, algorithm %+v", i, key, now, cost, got, want)
		}
		if i%3 == 0 {
			m.Sweep(now)
		}
	}
	st := m.Stats()
	if st.Expired < 1000 || st.Evicted != 0 || st.IdleExpired != 0 {
		t.Errorf("stats %+v: want many exact expirations and no other drops", st)
	}
}

// memReference decides spec's algorithm on a private state per key, never
// dropping one.
func memReference(t *testing.T, spec Spec) func(key string, now float64, cost int) Decision {
	t.Helper()
	spec = spec.withDefaults()
	switch spec.Algorithm {
	case AlgGCRA:
		return memRefOf(NewGCRA(spec.Limit()))
	case AlgTokenBucket:
		return memRefOf(NewTokenBucket(spec.Limit()))
	case AlgLeakyMeter:
		return memRefOf(NewLeakyMeter(spec.Limit()))
	case AlgLeakyQueue:
		return memRefOf(NewLeakyQueue(spec.Limit()))
	case AlgFixedWindow:
		return memRefOf(NewFixedWindow(spec.Quota()))
	case AlgSlidingLog:
		return memRefOf(NewSlidingLog(spec.Quota()))
	case AlgSlidingCounter:
		return memRefOf(NewSlidingCounter(spec.Quota()))
	}
	t.Fatalf("no reference for %v", spec.Algorithm)
	return nil
}

func memRefOf[S any, D Decider[S]](d D, err error) func(string, float64, int) Decision {
	if err != nil {
		panic(err)
	}
	states := map[string]*S{}
	return func(key string, now float64, cost int) Decision {
		s := states[key]
		if s == nil {
			s = new(S)
			states[key] = s
		}
		return d.Decide(s, now, cost)
	}
}

// IdleTTL drops a key that is not full but unused for IdleTTL seconds; it
// restarts full (here: a sliding log of 3 per hour, on the exact-key table,
// and a token bucket of 3 per hour on both tables).
func TestMemoryIdleTTL(t *testing.T) {
	for _, c := range []struct {
		name string
		spec Spec
		cfg  MemoryConfig
	}{
		{"sliding-log", Spec{Algorithm: AlgSlidingLog, Rate: 3, Per: 3600}, MemoryConfig{}},
		{"token-bucket/hashed", Spec{Algorithm: AlgTokenBucket, Rate: 3, Per: 3600}, MemoryConfig{}},
		{"token-bucket/exact", Spec{Algorithm: AlgTokenBucket, Rate: 3, Per: 3600}, MemoryConfig{ExactKeys: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.cfg.IdleTTL, c.cfg.Shards = 60, 1
			m := mustMemory(t, c.spec, c.cfg)
			ctx := context.Background()
			for range 3 {
				m.AllowN(ctx, "otp:555", 0, 1)
			}
			if d, _ := m.AllowN(ctx, "otp:555", 59, 1); d.Allowed {
				t.Fatal("fourth request within the hour allowed")
			}
			if n := m.Sweep(60); n != 0 {
				t.Fatalf("Sweep(60) dropped %d keys; the key was used at 59", n)
			}
			if n := m.Sweep(118.99); n != 0 {
				t.Fatalf("Sweep(118.99) dropped %d keys; the key was used at 59", n)
			}
			if n := m.Sweep(119); n != 1 {
				t.Fatalf("Sweep(119) dropped %d keys, want 1 (idle for 60 s)", n)
			}
			if d, _ := m.AllowN(ctx, "otp:555", 119, 1); !d.Allowed || d.Remaining != 2 {
				t.Errorf("after the TTL: %+v, want a full limit again (allowed, 2 left)", d)
			}
			if st := m.Stats(); st.IdleExpired != 1 || st.Expired != 0 {
				t.Errorf("stats %+v, want one IdleExpired", st)
			}
		})
	}
}

// A flood of distinct keys never holds more than MaxKeys, and keys in use
// survive it: sampled LRU evicts the flood's own older keys.
func TestMemoryFloodIsBounded(t *testing.T) { forMemModes(t, testMemoryFlood) }

func testMemoryFlood(t *testing.T, exact bool) {
	const maxKeys, flood, hot = 1024, 200_000, 8
	m := mustMemory(t, Spec{Rate: 10, Per: 3600, Burst: 10}, MemoryConfig{MaxKeys: maxKeys, Shards: 4, ExactKeys: exact})
	ctx := context.Background()
	for h := range hot {
		for range 5 {
			m.AllowN(ctx, fmt.Sprint("tenant-", h), 0, 1) // 5 of 10 used
		}
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range flood {
		now := 1 + float64(i)*1e-3
		m.AllowN(ctx, fmt.Sprint("attacker-", i), now, 1)
		m.AllowN(ctx, fmt.Sprint("tenant-", i%hot), now, 0) // a query keeps a key recent
		if i%1000 == 0 && m.Len() > maxKeys {
			t.Fatalf("after %d flood keys the store holds %d > MaxKeys %d", i, m.Len(), maxKeys)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	st := m.Stats()
	if st.Keys > maxKeys || st.Evicted < flood-maxKeys {
		t.Errorf("stats %+v: want at most %d keys and about %d evictions", st, maxKeys, flood)
	}
	if grown := int64(after.HeapAlloc) - int64(before.HeapAlloc); grown > 1<<20 {
		t.Errorf("the heap grew by %d bytes during a flood into a full store", grown)
	}
	memCheck(t, m)
	for h := range hot {
		if d, _ := m.AllowN(ctx, fmt.Sprint("tenant-", h), 201, 0); d.Remaining != 5 {
			t.Errorf("tenant-%d has %d left, want 5: it was evicted by the flood and restarted full", h, d.Remaining)
		}
	}
}

// An existing key's decision allocates nothing, on either table; Memory's
// per-key memory is small (TestMemoryBytesPerKey measures it).
func TestMemoryNoAllocs(t *testing.T) {
	forMemModes(t, func(t *testing.T, exact bool) {
		for _, c := range memAlgSpecs(1000) {
			m := mustMemory(t, c.spec, MemoryConfig{ExactKeys: exact})
			ctx := context.Background()
			keys := []string{"a", "b", "c"}
			for _, k := range keys {
				for range 20 { // grow the rings of the ring-based states
					m.AllowN(ctx, k, 1, 1)
				}
			}
			i := 0
			if n := testing.AllocsPerRun(1000, func() {
				m.AllowN(ctx, keys[i%3], 1, 1)
				i++
			}); n != 0 {
				t.Errorf("%s: %v allocations per decision on an existing key", c.spec.Algorithm, n)
			}
		}
	})
}

// TestMemoryBytesPerKey inserts a million idle GCRA keys and measures the
// heap per key beyond the key string (16 bytes here, held by the
// exact-key table only): the target is 64.
func TestMemoryBytesPerKey(t *testing.T) {
	if testing.Short() {
		t.Skip("inserts a million keys")
	}
	forMemModes(t, func(t *testing.T, exact bool) {
		const n = 1_000_000
		keys := make([]string, n)
		for i := range keys {
			keys[i] = fmt.Sprintf("user:%011d", i) // 16 bytes: one 16-byte allocation
		}
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		m := mustMemory(t, Spec{Rate: 1, Per: 60}, MemoryConfig{ExactKeys: exact})
		for _, k := range keys {
			m.AllowN(context.Background(), k, 0, 1) // TAT 60: held until then
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		if m.Len() != n {
			t.Fatalf("Len = %d, want %d", m.Len(), n)
		}
		perKey := float64(after.HeapAlloc-before.HeapAlloc) / n
		stored := 0.0 // the hashed table keeps no key string
		if exact {
			stored = 16
		}
		beyond := perKey - stored
		t.Logf("%d idle GCRA keys: %.1f B/key on the heap, %.1f B/key beyond the key strings it holds (%v B each)", n, perKey, beyond, stored)
		if beyond > 64 {
			t.Errorf("%.1f bytes per idle GCRA key beyond the key string, target ≤ 64", beyond)
		}
		runtime.KeepAlive(m)
		runtime.KeepAlive(keys)
	})
}

// The leaky queue's Delay and Start reach the caller.
func TestMemoryLeakyQueueDelay(t *testing.T) {
	m := mustMemory(t, Spec{Algorithm: AlgLeakyQueue, Rate: 10, Per: 1, Burst: 3}, MemoryConfig{})
	want := []struct {
		allowed      bool
		delay, start float64
	}{{true, 0, 5}, {true, 0.1, 5.1}, {true, 0.2, 5.2}, {true, 0.3, 5.3}, {false, 0, 0}}
	for i, w := range want {
		d, _ := m.AllowN(context.Background(), "k", 5, 1)
		if d.Allowed != w.allowed || math.Abs(d.Delay-w.delay) > 1e-12 || math.Abs(d.Start-w.start) > 1e-12 {
			t.Errorf("request %d: %+v, want allowed=%v delay %v start %v", i, d, w.allowed, w.delay, w.start)
		}
	}
}

func TestNewMemoryErrors(t *testing.T) {
	good := Spec{Rate: 1, Per: 1}
	for _, c := range []struct {
		spec  Spec
		cfg   MemoryConfig
		is    error
		field string
	}{
		{Spec{Rate: -1, Per: 1}, MemoryConfig{}, ErrInvalidLimit, "Rate"},
		{good, MemoryConfig{MaxKeys: -1}, ErrInvalidKeyedConfig, "MaxKeys"},
		{good, MemoryConfig{Shards: 3}, ErrInvalidKeyedConfig, "Shards"},
		{good, MemoryConfig{MaxKeys: 4, Shards: 8}, ErrInvalidKeyedConfig, "Shards"},
		{good, MemoryConfig{IdleTTL: math.NaN()}, ErrInvalidKeyedConfig, "IdleTTL"},
		{good, MemoryConfig{EvictSample: 65}, ErrInvalidKeyedConfig, "EvictSample"},
		{good, MemoryConfig{HealthInterval: -1}, ErrInvalidKeyedConfig, "HealthInterval"},
		{good, MemoryConfig{Classes: []ClassCurve{{Low: 0.5, High: 0.2}}}, ErrInvalidKeyedConfig, "Classes[0]"},
		{good, MemoryConfig{Classes: []ClassCurve{{0, 1}, {0, 0}}}, ErrInvalidKeyedConfig, "Classes[1]"},
		{good, MemoryConfig{Classes: make([]ClassCurve, MaxLoadClasses+1)}, ErrInvalidKeyedConfig, "Classes"},
	} {
		_, err := NewMemory(c.spec, c.cfg)
		if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%+v %+v: error %v, want %v naming %q", c.spec, c.cfg, err, c.is, c.field)
		}
	}
	for _, exact := range []bool{false, true} {
		if m, err := NewMemory(good, MemoryConfig{MaxKeys: 5, ExactKeys: exact}); err != nil || memShardCount(m) != 4 {
			t.Errorf("MaxKeys 5, ExactKeys %v: %v; want the default shard count cut to 4", exact, err)
		}
	}
}

// Decisions, sweeps and stats from many goroutines at once, over keys that
// come and go and a store that evicts: for the race detector, and the
// table must stay consistent (every key held is found).
func TestMemoryConcurrentChurn(t *testing.T) { forMemModes(t, testMemoryChurn) }

func testMemoryChurn(t *testing.T, exact bool) {
	m := mustMemory(t, Spec{Rate: 50, Per: 1, Burst: 5}, MemoryConfig{MaxKeys: 256, Shards: 4, ExactKeys: exact})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := newRand(uint64(g))
			now := 0.0
			for i := range 20000 {
				now += r.ExpFloat64() * 0.001
				m.AllowN(context.Background(), fmt.Sprint("k", r.IntN(1000)), now, 1+r.IntN(3))
				if i%500 == 0 {
					m.Sweep(now)
					m.Stats()
				}
			}
		}()
	}
	wg.Wait()
	memCheck(t, m)
	if st := m.Stats(); st.Keys > 256 {
		t.Errorf("%d keys held, MaxKeys 256", st.Keys)
	}
}

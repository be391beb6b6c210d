package redisstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/spillwayhq/spillway/ratelimit"
	"github.com/spillwayhq/spillway/ratelimit/rules"
	"github.com/spillwayhq/spillway/rng"
)

// scaledPair is a Store on the caller clock and the in-memory store it
// must decide like, with the same spec and classes.
type scaledPair struct {
	st  *Store
	mem *ratelimit.Memory
}

func newScaledPair(t *testing.T, spec ratelimit.Spec, classes []ratelimit.ClassCurve) scaledPair {
	t.Helper()
	be := testBackend(t)
	// A long TTL margin: the timelines are seconds of the caller clock run
	// in milliseconds, and the keys must not expire on Redis's clock.
	st := newStore(t, newClient(t, be.addr), spec,
		Config{Rule: "scaled", Prefix: testPrefix(t), Timeout: 5, TTLMargin: 600, Classes: classes})
	st.eng.callerClock = true
	mem, err := ratelimit.NewMemory(spec, ratelimit.MemoryConfig{Classes: classes})
	must(t, err)
	return scaledPair{st, mem}
}

func (p scaledPair) setScale(f float64)  { p.st.SetScale(f); p.mem.SetScale(f) }
func (p scaledPair) setHealth(h float64) { p.st.SetHealth(h); p.mem.SetHealth(h) }

// decide decides on both and fails t unless the decisions are the same.
func (p scaledPair) decide(t *testing.T, key string, class int, now float64, cost int) ratelimit.Decision {
	t.Helper()
	want := p.mem.AllowClassN(key, class, now, cost)
	got, err := p.st.AllowClassN(context.Background(), key, class, now, cost)
	if err != nil {
		t.Fatalf("%s class %d at %v cost %d: %v", key, class, now, cost, err)
	}
	if !sameDecision(got, want, now) {
		t.Fatalf("%s class %d at %v cost %d (scale %v):\n redis  %+v\n memory %+v", key, class, now, cost, p.mem.Scale(class), got, want)
	}
	return got
}

// admitAt counts the cost-1 requests key gets at now in class before the
// first refusal (at most 100), on both stores.
func (p scaledPair) admitAt(t *testing.T, key string, class int, now float64) (int, ratelimit.Decision) {
	t.Helper()
	for n := 0; n < 100; n++ {
		if d := p.decide(t, key, class, now, 1); !d.Allowed {
			return n, d
		}
	}
	return 100, ratelimit.Decision{}
}

// The step table of package ratelimit's TestMemorySetScaleSteps, decided
// by Redis and by Memory side by side: every decision the same, and the
// table's counts.
func TestStoreSetScaleSteps(t *testing.T) {
	gcra := newScaledPair(t, ratelimit.Spec{Rate: 10, Per: 1, Burst: 10}, nil)
	tb := newScaledPair(t, ratelimit.Spec{Algorithm: ratelimit.AlgTokenBucket, Rate: 10, Per: 1, Burst: 10}, nil)
	fw := newScaledPair(t, ratelimit.Spec{Algorithm: ratelimit.AlgFixedWindow, Rate: 10, Per: 60}, nil)
	for _, p := range []scaledPair{gcra, tb} {
		for range 4 {
			p.decide(t, "used", 0, 0, 1) // 4 of 10 used at scale 1
		}
	}
	for i, s := range []struct {
		p     scaledPair
		scale float64
		key   string
		admit int
		retry float64 // of the refusal
	}{
		{gcra, 0.5, "fresh-1", 5, 0.2},  // Burst ⌊10·0.5⌋ = 5 at 5/s
		{gcra, 0.5, "used", 3, 0.2},     // TAT 0.4 against τ = 4·0.2: 0.4, 0.6, 0.8 pass
		{tb, 0.5, "used", 5, 0.2},       // 6 tokens cut to the scaled Burst 5
		{gcra, 0.25, "fresh-2", 2, 0.4}, // ⌊2.5⌋ = 2 at 2.5/s
		{gcra, 0.01, "fresh-3", 1, 10},  // Burst at least 1, at 0.1/s
		{gcra, 0, "fresh-4", 0, 1},      // closed: RetryAfter is the period
		{gcra, -3, "fresh-5", 0, 1},     // clamped to 0
		{gcra, 1, "fresh-6", 10, 0.1},   // the rule itself again
		{gcra, math.NaN(), "fresh-7", 10, 0.1},
		{fw, 0.25, "w-1", 2, 60}, // ⌊10·0.25⌋ per window; retry at the window's end
		{fw, 0.05, "w-2", 0, 60}, // ⌊0.5⌋ = 0: closed
		{fw, 1, "w-3", 10, 60},
	} {
		s.p.setScale(s.scale)
		if n, d := s.p.admitAt(t, s.key, 0, 0); n != s.admit || math.Abs(d.RetryAfter-s.retry) > 1e-9 {
			t.Errorf("step %d (scale %v, key %s): admitted %d, refusal %+v; want %d, RetryAfter %v", i, s.scale, s.key, n, d, s.admit, s.retry)
		}
	}
	gcra.setScale(0)
	if d := gcra.decide(t, "q", 0, 0, 0); !d.Allowed {
		t.Errorf("a query on a closed class: %+v, want allowed", d)
	}
}

// refDecider decides like Memory's classes at a scale, but never forgets a
// key's state: the in-memory algorithms (the Deciders Memory builds) at
// ratelimit.ScaledSpec's limit, on states the test holds.
type refDecider func(key string, scale, now float64, cost int) ratelimit.Decision

func newRef[S any](spec ratelimit.Spec, build func(sc ratelimit.Spec) (ratelimit.Decider[S], error)) refDecider {
	states := map[string]*S{}
	decs := map[float64]ratelimit.Decider[S]{}
	return func(key string, f, now float64, cost int) ratelimit.Decision {
		sc, ok := ratelimit.ScaledSpec(spec, f)
		if !ok { // closed: Memory.SetScale's documented answer
			if cost <= 0 {
				return ratelimit.Decision{Allowed: true}
			}
			return ratelimit.Decision{RetryAfter: spec.Per}
		}
		d := decs[f]
		if d == nil {
			var err error
			if d, err = build(sc); err != nil {
				panic(err)
			}
			decs[f] = d
		}
		st := states[key]
		if st == nil {
			st = new(S)
			states[key] = st
		}
		return d.Decide(st, now, cost)
	}
}

// bucketRef is the reference of a bucket algorithm: the rule's own
// configuration, and at other scales WithLimit of it (which reads and
// writes its states).
func bucketRef[S any, D interface {
	ratelimit.Decider[S]
	WithLimit(ratelimit.Limit) (D, error)
}](spec ratelimit.Spec, newD func(ratelimit.Limit) (D, error)) refDecider {
	base, err := newD(spec.Limit())
	if err != nil {
		panic(err)
	}
	return newRef(spec, func(sc ratelimit.Spec) (ratelimit.Decider[S], error) { return base.WithLimit(sc.Limit()) })
}

func refFor(spec ratelimit.Spec) refDecider {
	switch spec.Algorithm {
	case ratelimit.AlgGCRA:
		return bucketRef[ratelimit.GCRAState](spec, ratelimit.NewGCRA)
	case ratelimit.AlgTokenBucket:
		return bucketRef[ratelimit.TokenBucketState](spec, ratelimit.NewTokenBucket)
	case ratelimit.AlgLeakyMeter:
		return bucketRef[ratelimit.LeakyMeterState](spec, ratelimit.NewLeakyMeter)
	case ratelimit.AlgLeakyQueue:
		return bucketRef[ratelimit.LeakyQueueState](spec, ratelimit.NewLeakyQueue)
	case ratelimit.AlgFixedWindow:
		return newRef(spec, func(s ratelimit.Spec) (ratelimit.Decider[ratelimit.FixedWindowState], error) {
			return ratelimit.NewFixedWindow(s.Quota())
		})
	case ratelimit.AlgSlidingLog:
		return newRef(spec, func(s ratelimit.Spec) (ratelimit.Decider[ratelimit.SlidingLogState], error) {
			return ratelimit.NewSlidingLog(s.Quota())
		})
	default:
		return newRef(spec, func(s ratelimit.Spec) (ratelimit.Decider[ratelimit.SlidingCounterState], error) {
			return ratelimit.NewSlidingCounter(s.Quota())
		})
	}
}

// Every algorithm over a seeded timeline whose health changes every few
// steps, in four classes (the fourth beyond the last), the keys' states
// carried over every scale change: the same decisions as the in-memory
// algorithms at the scaled limits on never-forgotten states, and as Memory
// itself for the algorithms whose "full again" test does not depend on the
// scale. (Memory drops a key full under the scales in force when it looks;
// read later at a slower rate, a leaky meter's or a token bucket's stored
// state would still hold something, so Memory and a Store whose key has
// not expired yet may then differ: see Store.SetScale on TTLs.)
func TestStoreScaleMatchesMemory(t *testing.T) {
	classes := []ratelimit.ClassCurve{{Low: 0, High: 0}, {Low: 0, High: 1}, {Low: 0.5, High: 1}}
	healths := []float64{1, 0.9, 0.75, 0.6, 0.5, 0.4, 0.25, 0.1, 0, math.NaN()}
	for i, spec := range exactSpecs {
		t.Run(fmt.Sprintf("%s/%d", spec.Algorithm.Name(), i), func(t *testing.T) {
			p := newScaledPair(t, spec, classes)
			ref := refFor(spec)
			withMemory := spec.Algorithm != ratelimit.AlgLeakyMeter && spec.Algorithm != ratelimit.AlgTokenBucket
			capacity := spec.Burst
			if capacity == 0 {
				capacity = int(spec.Rate)
			}
			r := rng.New(uint32(31 + i))
			now, mean := 100.25, spec.Per/spec.Rate
			health := 1.0
			allowed, denied, scaled := 0, 0, 0
			for step := range 400 {
				if r.Float64() < 0.1 {
					health = healths[int(r.Float64()*float64(len(healths)))]
					p.setHealth(health)
				}
				switch u := r.Float64(); {
				case u < 0.3: // same instant
				case u < 0.9:
					now += r.Exp(mean * 0.7)
				default:
					now += r.Exp(spec.Per * 2)
				}
				now = onGrid(now)
				cost := 1
				switch u := r.Float64(); {
				case u < 0.1:
					cost = 0
				case u > 0.75:
					cost = 1 + int(r.Float64()*float64(capacity+1))
				}
				class := int(r.Float64() * 4)
				key := []string{"a", "b"}[int(r.Float64()*2)]
				f := classes[min(class, len(classes)-1)].Scale(health)
				want := ref(key, f, now, cost)
				got, err := p.st.AllowClassN(context.Background(), key, class, now, cost)

				if err != nil {
					t.Fatalf("step %d: %v", step, err)
				}
				if !sameDecision(got, want, now) {
					t.Fatalf("step %d: %s class %d at %v cost %d (scale %v):\n redis     %+v\n reference %+v", step, key, class, now, cost, f, got, want)
				}
				if mem := p.mem.AllowClassN(key, class, now, cost); withMemory && !sameDecision(got, mem, now) {
					t.Fatalf("step %d: %s class %d at %v cost %d (scale %v):\n redis  %+v\n memory %+v", step, key, class, now, cost, f, got, mem)
				}
				if f > 0 && f < 1 {
					scaled++
				}
				if want.Allowed && cost > 0 {
					allowed++
				} else if !want.Allowed {
					denied++
				}
			}
			if allowed < 20 || denied < 20 || scaled < 40 {
				t.Fatalf("timeline too one-sided: %d allowed, %d denied, %d at a partial scale", allowed, denied, scaled)
			}
		})
	}
}

// A closed class is refused with RetryAfter = Per without a round trip;
// queries pass; classes beyond the last count as the last; the more
// important classes keep their share.
func TestStoreClosedClass(t *testing.T) {
	be := testBackend(t)
	st := newStore(t, newClient(t, be.addr), ratelimit.Spec{Rate: 10, Per: 2, Burst: 10},
		Config{Rule: "closed", Prefix: testPrefix(t), Timeout: 5,
			Classes: []ratelimit.ClassCurve{{Low: 0, High: 0}, {Low: 0, High: 1}, {Low: 0.5, High: 1}}})
	ctx := context.Background()
	st.SetHealth(0.4)
	if got := [4]float64{st.Scale(-1), st.Scale(1), st.Scale(2), st.Scale(9)}; got != [4]float64{1, 0.4, 0, 0} {
		t.Fatalf("scales at health 0.4: %v", got)
	}
	before := st.Stats().RoundTrips
	for _, class := range []int{2, 7} {
		d, err := st.AllowClassN(ctx, "k", class, 0, 1)
		if err != nil || d.Allowed || d.RetryAfter != 2 {
			t.Errorf("class %d closed: %+v, %v; want refused with RetryAfter 2", class, d, err)
		}
		if d, err := st.ForClass(class).AllowN(ctx, "k", 0, 0); err != nil || !d.Allowed {
			t.Errorf("class %d closed, a query: %+v, %v; want allowed", class, d, err)
		}
	}
	if rt := st.Stats().RoundTrips; rt != before {
		t.Errorf("%d round trips for a closed class, want none", rt-before)
	}
	count := func(class int, key string) int {
		n := 0
		for range 20 {
			d, err := st.AllowClassN(ctx, key, class, 0, 1)
			must(t, err)
			if d.Allowed {
				n++
			}
		}
		return n
	}
	if n := count(1, "default"); n != 4 {
		t.Errorf("class 1 at scale 0.4 admitted %d, want ⌊10·0.4⌋ = 4", n)
	}
	if n := count(0, "critical"); n != 10 {
		t.Errorf("class 0 admitted %d, want the full burst 10", n)
	}
	st.SetScale(0) // every class, critical included
	if d, _ := st.AllowN(ctx, "fresh", 0, 1); d.Allowed {
		t.Errorf("SetScale(0): class 0 allowed %+v", d)
	}
	// A window rule whose limit rounds to 0 is closed too.
	fw := newStore(t, newClient(t, be.addr), ratelimit.Spec{Algorithm: ratelimit.AlgSlidingLog, Rate: 10, Per: 60},
		Config{Rule: "closed-w", Prefix: testPrefix(t), Timeout: 5})
	fw.SetScale(0.09)
	if d, err := fw.AllowN(ctx, "k", 0, 1); err != nil || d.Allowed || d.RetryAfter != 60 {
		t.Errorf("sliding log at ⌊0.9⌋ = 0: %+v, %v; want refused with RetryAfter 60", d, err)
	}
}

// Health is polled at most once per HealthInterval of AllowN's now (the
// table of package ratelimit's TestMemoryHealthPolling), and the scale it
// gives decides.
func TestStoreHealthPolling(t *testing.T) {
	be := testBackend(t)
	healths := []float64{1, 0.5, 0.2}
	var calls atomic.Int64
	st := newStore(t, newClient(t, be.addr), ratelimit.Spec{Rate: 10, Per: 1, Burst: 10},
		Config{Rule: "poll", Prefix: testPrefix(t), Timeout: 5, HealthInterval: 1, Health: func() float64 {
			n := calls.Add(1)
			return healths[min(int(n)-1, len(healths)-1)]
		}})
	for i, s := range []struct {
		now   float64
		calls int64
		scale float64
	}{
		{0, 1, 1},
		{0.5, 1, 1},
		{0.99, 1, 1},
		{1.0, 2, 0.5},
		{1.5, 2, 0.5},
		{0.2, 2, 0.5}, // time going back does not poll
		{2.2, 3, 0.2},
		{2.3, 3, 0.2},
	} {
		if _, err := st.AllowN(context.Background(), fmt.Sprint("k", i), s.now, 1); err != nil {
			t.Fatal(err)
		}
		if calls.Load() != s.calls || st.Scale(0) != s.scale {
			t.Errorf("step %d at %v: %d calls, scale %v; want %d, %v", i, s.now, calls.Load(), st.Scale(0), s.calls, s.scale)
		}
	}
	// At scale 0.2 a fresh key gets ⌊10·0.2⌋ = 2.
	n := 0
	for range 5 {
		if d, _ := st.AllowN(context.Background(), "fresh", 2.4, 1); d.Allowed {
			n++
		}
	}
	if n != 2 {
		t.Errorf("at scale 0.2 a fresh key got %d, want 2", n)
	}
}

// One batch mixing calls at two scales (and the same keys at both): one
// round trip, each call decided with its own class's parameters, the
// whole exactly as Memory deciding the calls one after another in the
// order the batch sent them.
func TestStoreBatchMixesScales(t *testing.T) {
	classes := []ratelimit.ClassCurve{{Low: 0, High: 0}, {Low: 0, High: 1}}
	for _, spec := range []ratelimit.Spec{
		{Algorithm: ratelimit.AlgGCRA, Rate: 10, Per: 1, Burst: 8},
		{Algorithm: ratelimit.AlgTokenBucket, Rate: 3, Per: 1, Burst: 7},
		{Algorithm: ratelimit.AlgFixedWindow, Rate: 9, Per: 2},
		{Algorithm: ratelimit.AlgSlidingCounter, Rate: 9, Per: 2},
	} {
		t.Run(spec.Algorithm.Name(), func(t *testing.T) {
			p := newScaledPair(t, spec, classes)
			must(t, p.st.Load(context.Background())) // no NOSCRIPT round trip
			p.setHealth(0.5)                         // class 0 at 1, class 1 at 0.5
			r := rng.New(7)
			now := 20.0
			for round := range 4 {
				now = onGrid(now + r.Exp(spec.Per/spec.Rate*4))
				var calls []*call
				class := map[*call]int{}
				key := map[*call]string{}
				scales := map[float64]bool{}
				for range 30 {
					k := fmt.Sprint("k", int(r.Float64()*3))
					cl := int(r.Float64() * 2)
					par := p.st.pub.Load().params(cl)
					c := testCall(p.st, par, k, now, 1+int(r.Float64()*2))
					calls = append(calls, c)
					class[c], key[c], scales[par.scale] = cl, k, true
				}
				if len(scales) != 2 {
					t.Fatal("the batch has one scale")
				}
				before := p.st.Stats().RoundTrips
				sendBatch(p.st.eng, calls)
				if rt := p.st.Stats().RoundTrips - before; rt != 1 {
					t.Fatalf("round %d: %d round trips, want 1", round, rt)
				}
				for j, c := range calls {
					it := c.items[0]
					want := p.mem.AllowClassN(key[c], class[c], now, it.cost)
					if it.err != nil || !sameDecision(it.d, want, now) {
						t.Fatalf("round %d, call %d (key %s, class %d, cost %d):\n redis  %+v %v\n memory %+v",
							round, j, key[c], class[c], it.cost, it.d, it.err, want)
					}
				}
			}
		})
	}
}

// A token bucket key written at a scale keeps its TTL until the bucket is
// full under the rule's own limit too: Burst 10 at 1/s, scale 0.25 (Burst
// 2 at 0.25/s): after taking 2 tokens the scaled bucket is full in 8 s,
// the rule's in 10 s.
func TestStoreScaledTTL(t *testing.T) {
	be := testBackend(t)
	client := newClient(t, be.addr)
	st := newStore(t, client, ratelimit.Spec{Algorithm: ratelimit.AlgTokenBucket, Rate: 1, Per: 1, Burst: 10},
		Config{Rule: "ttl", Prefix: testPrefix(t), Timeout: 5, TTLMargin: 0.1})
	st.SetScale(0.25)
	ctx := context.Background()
	// The TTL runs down while the test reads it: by at most took, which
	// ttlRead keeps under a second (well apart from the 8.1 s of a bug).
	pttl, took := ttlRead(t, client, st, "scaled", time.Second, func(k string) {
		for i := range 3 {
			d, err := st.AllowN(ctx, k, 0, 1)
			must(t, err)
			if d.Allowed != (i < 2) {
				t.Fatalf("decision %d: %+v; want 2 allowed (the scaled Burst)", i, d)
			}
		}
	})
	// The scaled bucket alone would give about 8.1 s.
	if pttl < 10050*time.Millisecond-took || pttl > 10100*time.Millisecond {
		t.Errorf("PTTL %v, read within %v of the first decision; want about 10.1 s: full under the rule's own Burst 10 at 1/s", pttl, took)
	}
	// At scale 1 the TTL is the rule's alone, as before.
	st.SetScale(1)
	pttl, took = ttlRead(t, client, st, "unscaled", 500*time.Millisecond, func(k string) {
		if _, err := st.AllowN(ctx, k, 0, 3); err != nil {
			t.Fatal(err)
		}
	})
	if pttl < 3050*time.Millisecond-took || pttl > 3100*time.Millisecond {
		t.Errorf("PTTL %v at scale 1, read within %v of the decision; want about 3.1 s", pttl, took)
	}
}

// Configuration: bad curves and intervals are refused, naming the field.
func TestStoreScaleConfig(t *testing.T) {
	be := testBackend(t)
	client := newClient(t, be.addr)
	spec := ratelimit.Spec{Rate: 1, Per: 1}
	for _, tc := range []struct {
		cfg   Config
		field string
	}{
		{Config{Rule: "r", HealthInterval: -1}, "HealthInterval"},
		{Config{Rule: "r", HealthInterval: math.Inf(1)}, "HealthInterval"},
		{Config{Rule: "r", Classes: []ratelimit.ClassCurve{{Low: 0.5, High: 0.2}}}, "Classes[0]"},
		{Config{Rule: "r", Classes: []ratelimit.ClassCurve{{Low: 0.5, High: 1}, {Low: 0, High: 1}}}, "Classes[1]"},
		{Config{Rule: "r", Classes: make([]ratelimit.ClassCurve, ratelimit.MaxLoadClasses+1)}, "Classes"},
	} {
		if _, err := New(client, spec, tc.cfg); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%+v: %v, want ErrConfig naming %s", tc.cfg, err, tc.field)
		}
	}
}

// Scales published while other goroutines decide (race detector), with
// Redis's own clock: the decisions stay within the largest configuration.
func TestStoreScaleConcurrent(t *testing.T) {
	be := testBackend(t)
	before := goroutines() // a miniredis's own goroutines are counted in
	client := redis.NewClient(&redis.Options{Addr: be.addr, ContextTimeoutEnabled: true})
	st, err := New(client, ratelimit.Spec{Rate: 1, Per: 3600, Burst: 50},
		Config{Rule: "conc", Prefix: testPrefix(t), Timeout: 5, Classes: []ratelimit.ClassCurve{{Low: 0, High: 0}, {Low: 0.3, High: 1}}})
	must(t, err)
	var admitted, failed atomic.Int64
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 250 {
				d, err := st.AllowClassN(context.Background(), "k", (i+g)%2, 1, 1)
				if err != nil {
					failed.Add(1)
				} else if d.Allowed {
					admitted.Add(1)
				}
			}
		})
	}
	for i := range 200 {
		st.SetHealth(float64(i%10) / 10)
	}
	wg.Wait()
	st.Close()
	client.Close()
	if failed.Load() != 0 || admitted.Load() > 50 || admitted.Load() == 0 {
		t.Errorf("%d admitted, %d errors; want 1 to 50 (the full burst) and none", admitted.Load(), failed.Load())
	}
	checkNoLeak(t, before)
}

// Stores: Health and Classes reach each rule's Redis store, floor and local
// tier, in the rule's class; Stores.SetHealth applies a health at once.
func TestStoresScaleTogether(t *testing.T) {
	b := testBackend(t)
	client := newClient(t, b.addr)
	var health atomic.Uint64 // float64 bits
	setHealth := func(h float64) { health.Store(math.Float64bits(h)) }
	setHealth(0.75)
	stores, err := NewStores(client, StoresConfig{Store: Config{Prefix: testPrefix(t), Timeout: 5}, LocalFactor: 1,
		Classes:        []ratelimit.ClassCurve{{Low: 0, High: 0}, {Low: 0.5, High: 1}},
		Class:          func(r *rules.Rule) int { return map[string]int{"bulk": 1}[r.ID] },
		Health:         func() float64 { return math.Float64frombits(health.Load()) },
		HealthInterval: 1})
	must(t, err)
	t.Cleanup(func() { stores.Close() })
	store := func(src string) *RuleStore {
		k, err := stores.ForRule(ruleOf(t, src))
		must(t, err)
		return k.(*RuleStore)
	}
	api := store("{id: api, key: [user], rate: 10, per: 1s}")
	bulk := store("{id: bulk, key: [user], rate: 10, per: 1s}")
	ctx := context.Background()
	admit := func(rs *RuleStore, key string, now float64) int {
		n := 0
		for range 20 {
			d, err := rs.AllowN(ctx, key, now, 1)
			must(t, err)
			if d.Allowed {
				n++
			}
		}
		return n
	}
	scales := func(rs *RuleStore, class int) [3]float64 {
		return [3]float64{rs.Redis().Scale(class), rs.Floor().Scale(class), rs.Local().Scale(class)}
	}
	// Health 0.75: bulk (class 1) at (0.75 − 0.5)/0.5 = 0.5, api (class 0) whole.
	if n := admit(bulk, "u1", 0); n != 5 {
		t.Errorf("bulk at health 0.75 admitted %d, want ⌊10·0.5⌋ = 5", n)
	}
	if n := admit(api, "u1", 0); n != 10 {
		t.Errorf("api at health 0.75 admitted %d, want 10", n)
	}
	if got := scales(bulk, 1); got != [3]float64{0.5, 0.5, 0.5} {
		t.Errorf("bulk's Redis, floor and local tier at scales %v, want 0.5 each", got)
	}
	// Health 0.4, polled at now 1.5: bulk closed, api whole.
	setHealth(0.4)
	if n := admit(bulk, "u2", 1.5); n != 0 {
		t.Errorf("bulk at health 0.4 admitted %d, want 0 (closed)", n)
	}
	if n := admit(api, "u2", 1.5); n != 10 {
		t.Errorf("api at health 0.4 admitted %d, want 10", n)
	}
	if got := scales(bulk, 1); got != [3]float64{0, 0, 0} {
		t.Errorf("bulk's scales %v at health 0.4, want 0", got)
	}
	// SetHealth applies at once (until the next poll, at now ≥ 2.5).
	stores.SetHealth(1)
	if got := scales(bulk, 1); got != [3]float64{1, 1, 1} {
		t.Errorf("bulk's scales %v after SetHealth(1), want 1", got)
	}
	if n := admit(bulk, "u3", 2); n != 10 {
		t.Errorf("bulk after SetHealth(1) admitted %d, want 10", n)
	}

	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer c.Close()
	for _, tc := range []struct {
		cfg   StoresConfig
		field string
	}{
		{StoresConfig{Store: Config{Health: func() float64 { return 1 }}}, "Store.Health"},
		{StoresConfig{Store: Config{Classes: []ratelimit.ClassCurve{{}}}}, "Store.Classes"},
		{StoresConfig{HealthInterval: -1}, "HealthInterval"},
		{StoresConfig{Classes: []ratelimit.ClassCurve{{Low: 1, High: 0.5}}}, "Classes[0]"},
	} {
		if _, err := NewStores(c, tc.cfg); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%+v: %v, want ErrConfig naming %s", tc.cfg, err, tc.field)
		}
	}
}

// BenchmarkScaledDecisions: GCRA decisions at 64 concurrent callers on a
// real Redis, every caller in class 0 at scale 1 (as without load
// awareness), every caller in class 1 at scale 0.5, or half in each (so
// batches mix two scales, in one script call); and a closed
// class, answered without Redis. Skipped without a real Redis.
func BenchmarkScaledDecisions(b *testing.B) {
	client := benchClient(b)
	keys := make([]string, 10000)
	for i := range keys {
		keys[i] = fmt.Sprint("user-", i)
	}
	par := benchParallelism()
	for _, bc := range []struct {
		name   string
		health float64
		class  func(g int64) int
	}{
		{"scale1", 0.5, func(int64) int { return 0 }},
		{"scale0.5", 0.5, func(int64) int { return 1 }},
		{"mixed", 0.5, func(g int64) int { return int(g % 2) }},
		{"closed", 0, func(int64) int { return 1 }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			st, err := New(client, ratelimit.Spec{Rate: 1000, Per: 1, Burst: 1000}, Config{Rule: "bench", Prefix: testPrefix(b),
				Timeout: 1, Classes: []ratelimit.ClassCurve{{Low: 0, High: 0}, {Low: 0, High: 1}}})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			st.SetHealth(bc.health)
			before := st.Stats()
			var gid, failed atomic.Int64
			b.ReportAllocs()
			b.SetParallelism(par)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				g := gid.Add(1)
				class, i := bc.class(g), int(g)*7919
				for pb.Next() {
					i++
					if _, err := st.AllowClassN(context.Background(), keys[i%len(keys)], class, 0, 1); err != nil {
						failed.Add(1)
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
			b.ReportMetric(float64(st.Stats().RoundTrips-before.RoundTrips)/float64(b.N), "roundtrips/decision")
			if failed.Load() > 0 {
				b.Fatalf("%d errors", failed.Load())
			}
		})
	}
}

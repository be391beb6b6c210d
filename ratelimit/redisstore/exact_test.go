package redisstore

import (
	"context"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/spillwayhq/spillway/ratelimit"
	"github.com/spillwayhq/spillway/rng"
)

// memDecider returns the in-memory algorithm for spec, as one key's
// limiter: the reference the scripts must match.
func memDecider(t *testing.T, spec ratelimit.Spec) func(now float64, cost int) ratelimit.Decision {
	t.Helper()
	l, q := spec.Limit(), spec.Quota()
	var (
		d   func(float64, int) ratelimit.Decision
		err error
	)
	switch spec.Algorithm {
	case ratelimit.AlgGCRA:
		var a *ratelimit.GCRA
		a, err = ratelimit.NewGCRA(l)
		d = ratelimit.NewLimiter[ratelimit.GCRAState](a).AllowN
	case ratelimit.AlgTokenBucket:
		var a *ratelimit.TokenBucket
		a, err = ratelimit.NewTokenBucket(l)
		d = ratelimit.NewLimiter[ratelimit.TokenBucketState](a).AllowN
	case ratelimit.AlgLeakyMeter:
		var a *ratelimit.LeakyMeter
		a, err = ratelimit.NewLeakyMeter(l)
		d = ratelimit.NewLimiter[ratelimit.LeakyMeterState](a).AllowN
	case ratelimit.AlgLeakyQueue:
		var a *ratelimit.LeakyQueue
		a, err = ratelimit.NewLeakyQueue(l)
		d = ratelimit.NewLimiter[ratelimit.LeakyQueueState](a).AllowN
	case ratelimit.AlgFixedWindow:
		var a *ratelimit.FixedWindow
		a, err = ratelimit.NewFixedWindow(q)
		d = ratelimit.NewLimiter[ratelimit.FixedWindowState](a).AllowN
	case ratelimit.AlgSlidingLog:
		var a *ratelimit.SlidingLog
		a, err = ratelimit.NewSlidingLog(q)
		d = ratelimit.NewLimiter[ratelimit.SlidingLogState](a).AllowN
	case ratelimit.AlgSlidingCounter:
		var a *ratelimit.SlidingCounter
		a, err = ratelimit.NewSlidingCounter(q)
		d = ratelimit.NewLimiter[ratelimit.SlidingCounterState](a).AllowN
	default:
		t.Fatalf("unknown algorithm %v", spec.Algorithm)
	}
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// exactSpecs are two limits per algorithm: round numbers, and rates whose
// inverse is not a short binary fraction.
var exactSpecs = []ratelimit.Spec{
	{Algorithm: ratelimit.AlgGCRA, Rate: 10, Per: 1, Burst: 5},
	{Algorithm: ratelimit.AlgGCRA, Rate: 100, Per: 60, Burst: 7},
	{Algorithm: ratelimit.AlgTokenBucket, Rate: 10, Per: 1, Burst: 5},
	{Algorithm: ratelimit.AlgTokenBucket, Rate: 3, Per: 1, Burst: 7},
	{Algorithm: ratelimit.AlgLeakyMeter, Rate: 10, Per: 1, Burst: 5},
	{Algorithm: ratelimit.AlgLeakyMeter, Rate: 100, Per: 60, Burst: 7},
	{Algorithm: ratelimit.AlgLeakyQueue, Rate: 5, Per: 1, Burst: 4},
	{Algorithm: ratelimit.AlgLeakyQueue, Rate: 3, Per: 1, Burst: 7},
	{Algorithm: ratelimit.AlgFixedWindow, Rate: 10, Per: 2},
	{Algorithm: ratelimit.AlgFixedWindow, Rate: 7, Per: 0.3},
	{Algorithm: ratelimit.AlgSlidingLog, Rate: 10, Per: 2},
	{Algorithm: ratelimit.AlgSlidingLog, Rate: 7, Per: 0.3},
	{Algorithm: ratelimit.AlgSlidingCounter, Rate: 10, Per: 2},
	{Algorithm: ratelimit.AlgSlidingCounter, Rate: 7, Per: 0.3},
}

// sameDecision compares a script's decision with the in-memory one at now:
// Allowed and Remaining equal, the durations and Start within 2 µs. Both
// stores decide as exact arithmetic would, but on different grids: the
// scripts read now to the µs (Redis's clock) and count ticks of 1/D µs,
// the in-memory code reads it to the ns, and a float64 now far from 0
// (1.7e9 s) is a few tens of ns off its decimal value, so the stores'
// instants may differ by a fraction of a µs, and a retry at a strict
// boundary (the sliding counter's) by one more step of the µs grid.
func sameDecision(got, want ratelimit.Decision, now float64) bool {
	near := func(a, b float64) bool {
		if math.IsInf(a, 1) || math.IsInf(b, 1) {
			return a == b
		}
		return math.Abs(a-b) <= 2e-6
	}
	return got.Allowed == want.Allowed && got.Remaining == want.Remaining && near(got.RetryAfter, want.RetryAfter) &&
		near(got.Reset, want.Reset) && near(got.Delay, want.Delay) && near(got.Start, want.Start)
}

// onGrid rounds t to the µs, the grid of Redis's clock (and of the
// scripts' caller clock).
func onGrid(t float64) float64 { return math.Round(t*1e6) / 1e6 }

// TestScriptsMatchMemory runs each algorithm's script and the in-memory
// algorithm over the same seeded timeline (the script's clock is the
// timeline: the test-only caller clock) and requires the same decisions.
// The timeline has bursts at one instant, gaps of about one emission
// interval, long idle gaps, steps back in time, and costs from 0 (a query)
// to one more than the capacity.
func TestScriptsMatchMemory(t *testing.T) {
	be := testBackend(t)
	client := newClient(t, be.addr)
	for i, spec := range exactSpecs {
		for _, base := range []float64{3.25, 1000.5, 1.7e9 + 0.123} {
			name := fmt.Sprintf("%s/%d/base=%v", spec.Algorithm.Name(), i, base)
			t.Run(name, func(t *testing.T) {
				st := newStore(t, client, spec, Config{Rule: "exact", Prefix: testPrefix(t), Timeout: 5})
				st.eng.callerClock = true
				mem := memDecider(t, spec)
				capacity := spec.Burst
				if capacity == 0 {
					capacity = int(spec.Rate)
				}
				r := rng.New(uint32(17 + i))
				now, mean := base, spec.Per/spec.Rate
				allowed, denied := 0, 0
				for step := range 300 {
					switch u := r.Float64(); {
					case u < 0.3: // same instant
					case u < 0.85:
						now += r.Exp(mean * 0.7)
					case u < 0.95:
						now += r.Exp(spec.Per * 2)
					default:
						now -= r.Float64() * 0.3 // the clock steps back
					}
					now = onGrid(now)
					cost := 1
					switch u := r.Float64(); {
					case u < 0.1:
						cost = 0
					case u > 0.7:
						cost = 1 + int(r.Float64()*float64(capacity+1))
					}
					want := mem(now, cost)
					got, err := st.AllowN(context.Background(), "k", now, cost)
					if err != nil {
						t.Fatalf("step %d: %v", step, err)
					}
					if !sameDecision(got, want, now) {
						t.Fatalf("step %d (now=%v cost=%d):\n redis  %+v\n memory %+v", step, now, cost, got, want)
					}
					if want.Allowed && cost > 0 {
						allowed++
					} else if !want.Allowed {
						denied++
					}
				}
				if allowed < 20 || denied < 20 {
					t.Fatalf("timeline too one-sided: %d allowed, %d denied", allowed, denied)
				}
			})
		}
	}
}

// TestBatchMatchesSequential: one script call deciding a batch of mixed
// keys and costs answers exactly as the in-memory algorithm deciding them
// one after another in batch order (a key repeated in the batch sees its
// own updates).
func TestBatchMatchesSequential(t *testing.T) {
	be := testBackend(t)
	client := newClient(t, be.addr)
	for i, spec := range exactSpecs {
		t.Run(fmt.Sprintf("%s/%d", spec.Algorithm.Name(), i), func(t *testing.T) {
			st := newStore(t, client, spec, Config{Rule: "batch", Prefix: testPrefix(t), Timeout: 5})
			st.eng.callerClock = true
			mems := map[string]func(float64, int) ratelimit.Decision{}
			r := rng.New(uint32(99 + i))
			now := 50.0
			for round := range 5 {
				now = onGrid(now + r.Exp(spec.Per/spec.Rate*3))
				var calls []*call
				var keys []string
				for range 40 {
					k := "k" + strconv.Itoa(int(r.Float64()*3))
					cost := int(r.Float64() * 3) // 0, 1 or 2
					calls = append(calls, testCall(st, nil, k, now, cost))
					keys = append(keys, k)
				}
				sendBatch(st.eng, calls)
				if st.Stats().RoundTrips > uint64(2*(round+1)) {
					t.Fatalf("round %d: %d round trips: the batch was not sent in one", round, st.Stats().RoundTrips)
				}
				for j, c := range calls {
					mem := mems[keys[j]]
					if mem == nil {
						mem = memDecider(t, spec)
						mems[keys[j]] = mem
					}
					it := c.items[0]
					want := mem(now, it.cost)
					if it.err != nil || !sameDecision(it.d, want, now) {
						t.Fatalf("round %d, decision %d (key %s, cost %d):\n redis  %+v %v\n memory %+v", round, j, keys[j], it.cost, it.d, it.err, want)
					}
				}
			}
		})
	}
}

// exactBucket is the oracle of the grid tests: GCRA in exact rational
// arithmetic (while time does not step back, the token bucket and the
// leaky meter decide the same).
type exactBucket struct {
	interval, full, tat *big.Rat // T, Burst·T, the theoretical arrival time
}

// newExactBucket is a bucket of rate units per per seconds (decimal
// strings) and burst.
func newExactBucket(rate, per string, burst int) *exactBucket {
	r, _ := new(big.Rat).SetString(rate)
	p, _ := new(big.Rat).SetString(per)
	iv := new(big.Rat).Quo(p, r)
	return &exactBucket{interval: iv, full: new(big.Rat).Mul(iv, big.NewRat(int64(burst), 1)), tat: new(big.Rat)}
}

// allow decides cost units at now: allowed if max(TAT, now) − now + cost·T ≤ Burst·T.
func (b *exactBucket) allow(now *big.Rat, cost int) bool {
	tat := b.tat
	if tat.Cmp(now) < 0 {
		tat = now
	}
	if cost <= 0 {
		return true
	}
	step := new(big.Rat).Mul(b.interval, big.NewRat(int64(cost), 1))
	after := new(big.Rat).Add(tat, step)
	if new(big.Rat).Sub(after, now).Cmp(b.full) > 0 {
		return false
	}
	b.tat = after
	return true
}

// gridDecide decides cost[i] at nows[i] on st (the caller clock), 500 to
// a pipeline (the caller clock gives each its own instant), and returns
// which were allowed.
func gridDecide(t *testing.T, st *Store, nows []float64, costs []int) []bool {
	t.Helper()
	var out []bool
	for lo := 0; lo < len(nows); lo += 500 {
		var calls []*call
		for k := lo; k < min(lo+500, len(nows)); k++ {
			calls = append(calls, testCall(st, nil, "k", nows[k], costs[k]))
		}
		sendBatch(st.eng, calls)
		for _, c := range calls {
			if err := c.items[0].err; err != nil {
				t.Fatal(err)
			}
			out = append(out, c.items[0].d.Allowed)
		}
	}
	return out
}

// gridStore is a Store of spec on the caller clock, with a TTL margin
// long enough for the test's timeline.
func gridStore(t *testing.T, client *redis.Client, spec ratelimit.Spec) *Store {
	t.Helper()
	st := newStore(t, client, spec, Config{Rule: "grid", Prefix: testPrefix(t), Timeout: 5, TTLMargin: 600})
	st.eng.callerClock = true
	return st
}

var gridAlgorithms = []ratelimit.Algorithm{ratelimit.AlgGCRA, ratelimit.AlgTokenBucket, ratelimit.AlgLeakyMeter}

// TestExactGridTenths: rate 10/s with a burst of 1 admits every one of
// 1,000 requests 0.1 s apart (t = k·0.1 in float64), as exact arithmetic
// does (the float artefact of earlier versions refused a third of them).
func TestExactGridTenths(t *testing.T) {
	client := newClient(t, testBackend(t).addr)
	for _, alg := range gridAlgorithms {
		t.Run(alg.Name(), func(t *testing.T) {
			st := gridStore(t, client, ratelimit.Spec{Algorithm: alg, Rate: 10, Per: 1, Burst: 1})
			nows, costs := make([]float64, 1000), make([]int, 1000)
			for k := range nows {
				nows[k], costs[k] = float64(k+1)*0.1, 1
			}
			refused := 0
			for _, ok := range gridDecide(t, st, nows, costs) {
				if !ok {
					refused++
				}
			}
			if refused != 0 {
				t.Errorf("%d of 1000 refused, want 0", refused)
			}
		})
	}
}

// TestExactGridRandom: on a 10 ms grid with bursts, gaps and random
// costs, for 10/s, 3/s, 100/min and 7 per 1.5 s, GCRA, the token bucket
// and the leaky meter make exactly the decisions of exact rational
// arithmetic over the decimal instants (the oracle, big.Rat).
func TestExactGridRandom(t *testing.T) {
	be := testBackend(t)
	client := newClient(t, be.addr)
	n := 20000
	if !be.real() {
		n = 4000 // miniredis's Lua is slow
	}
	for _, c := range []struct {
		rate, per string
		burst     int
	}{{"10", "1", 5}, {"3", "1", 4}, {"100", "60", 10}, {"7", "1.5", 3}} {
		rate, _ := strconv.ParseFloat(c.rate, 64)
		per, _ := strconv.ParseFloat(c.per, 64)
		for _, alg := range gridAlgorithms {
			t.Run(fmt.Sprintf("%s-per-%s/%s", c.rate, c.per, alg.Name()), func(t *testing.T) {
				st := gridStore(t, client, ratelimit.Spec{Algorithm: alg, Rate: rate, Per: per, Burst: c.burst})
				r := rng.New(5)
				nows, costs, ticks := make([]float64, n), make([]int, n), make([]int64, n)
				k := 0
				for i := range nows {
					k += int(r.Float64() * 4) // 0 to 3 steps of 10 ms: bursts and gaps
					nows[i], costs[i], ticks[i] = float64(k)*0.01, int(r.Float64()*float64(c.burst+1)), int64(k)
				}
				oracle := newExactBucket(c.rate, c.per, c.burst)
				got := gridDecide(t, st, nows, costs)
				diff, allowed, refused := 0, 0, 0
				for i := range nows {
					want := oracle.allow(big.NewRat(ticks[i], 100), costs[i])
					if got[i] != want {
						if diff == 0 {
							t.Errorf("decision %d (t=%v, cost %d): %v, exact %v", i, nows[i], costs[i], got[i], want)
						}
						diff++
					}
					if want && costs[i] > 0 {
						allowed++
					} else if !want {
						refused++
					}
				}
				if diff != 0 || allowed < 100 || refused < 100 {
					t.Errorf("%d of %d decisions differ from exact arithmetic (%d admitted, %d refused)", diff, n, allowed, refused)
				}
			})
		}
	}
}

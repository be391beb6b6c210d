package redisstore

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"testing"
	"time"

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
// everything equal as float64 values, except RetryAfter, which may differ
// by a few ulps of the retry instant: both start from the same algebraic
// answer, but the in-memory code then searches float64 by float64, the
// script in doubling steps.
func sameDecision(got, want ratelimit.Decision, now float64) bool {
	if got.Allowed != want.Allowed || got.Remaining != want.Remaining || got.Reset != want.Reset ||
		got.Delay != want.Delay || got.Start != want.Start {
		return false
	}
	if math.IsInf(want.RetryAfter, 1) || math.IsInf(got.RetryAfter, 1) {
		return got.RetryAfter == want.RetryAfter
	}
	ulp := float64(now+want.RetryAfter) * 0x1p-52
	return math.Abs(got.RetryAfter-want.RetryAfter) <= 64*ulp
}

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
				st.callerClock = true
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
			st.callerClock = true
			mems := map[string]func(float64, int) ratelimit.Decision{}
			r := rng.New(uint32(99 + i))
			now := 50.0
			for round := range 5 {
				now += r.Exp(spec.Per / spec.Rate * 3)
				w := &worker{}
				var keys []string
				for range 40 {
					k := "k" + strconv.Itoa(int(r.Float64()*3))
					cost := int(r.Float64() * 3) // 0, 1 or 2
					c := newCall().(*call)
					c.prepare(st, k, now, cost)
					c.deadline = time.Now().Add(5 * time.Second)
					w.batch = append(w.batch, c)
					keys = append(keys, k)
				}
				st.send(w)
				if st.Stats().RoundTrips > uint64(2*(round+1)) {
					t.Fatalf("round %d: %d round trips: the batch was not sent in one", round, st.Stats().RoundTrips)
				}
				for j, c := range w.batch {
					<-c.done
					mem := mems[keys[j]]
					if mem == nil {
						mem = memDecider(t, spec)
						mems[keys[j]] = mem
					}
					want := mem(now, c.cost)
					if c.err != nil || !sameDecision(c.d, want, now) {
						t.Fatalf("round %d, decision %d (key %s, cost %d):\n redis  %+v %v\n memory %+v", round, j, keys[j], c.cost, c.d, c.err, want)
					}
				}
			}
		})
	}
}

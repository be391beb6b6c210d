package ratelimit

import (
	"fmt"
	"math/big"
	"math/rand/v2"
	"testing"
)

// The oracles of this file decide in exact rational arithmetic (math/big.Rat)
// on decimal timestamps: tick k of a grid of step 1/den seconds is the
// rational k/den, while the code under test gets the float64 k × (1/den) that
// a caller computing "k × 0.1" passes. Rates are count per period, both
// decimals, as a rules file writes them ("100 per 1m", "7 per 1.5s"): the
// oracle's rate is the rational count/period, the code's Limit.Rate the
// float64 quotient that Spec.Limit computes.

// decimalRate is a rate as a rules file writes it: count units per period
// seconds, with the period as a decimal fraction num/den.
type decimalRate struct {
	count        int64
	perNum, perD int64 // period = perNum/perD seconds
}

func (r decimalRate) String() string {
	return fmt.Sprintf("%d per %v s", r.count, float64(r.perNum)/float64(r.perD))
}

// limit is the code's configuration: Rate/Per in float64, as Spec.Limit.
func (r decimalRate) limit(burst int) Limit {
	return Spec{Rate: float64(r.count), Per: float64(r.perNum) / float64(r.perD), Burst: burst}.Limit()
}

// rat is the exact rate in units per second.
func (r decimalRate) rat() *big.Rat {
	return new(big.Rat).SetFrac64(r.count*r.perD, r.perNum)
}

// grid is a decimal time grid: tick k is k/den seconds exactly, and the
// float64 float64(k) × (1/den) for the code (k × 0.1, k × 0.01, ...).
type grid struct{ den int64 }

func (g grid) exact(k int64) *big.Rat { return big.NewRat(k, g.den) }
func (g grid) float(k int64) float64  { return float64(k) * (1 / float64(g.den)) }

// ratSeconds converts an exact duration to float64 seconds for comparisons.
func ratSeconds(x *big.Rat) float64 {
	f, _ := x.Float64()
	return f
}

// exactBucket is the token bucket of seed 002 in exact arithmetic: tokens
// refill at rate up to burst; a request of cost c passes if c tokens are
// there. It is what GCRA, the token bucket and the leaky meter must decide
// while time runs forward.
type exactBucket struct {
	rate, burst  *big.Rat
	tokens, last *big.Rat // nil until the first request: a full bucket
}

func newExactBucket(rate *big.Rat, burst int) *exactBucket {
	return &exactBucket{rate: rate, burst: new(big.Rat).SetInt64(int64(burst))}
}

// decide returns the decision at t (not earlier than the previous t) for a
// request of cost units: allowed, whole tokens left, and the exact wait until
// a refused request could pass (nil when never, or when allowed).
func (b *exactBucket) decideBucket(t *big.Rat, cost int) (allowed bool, remaining int, wait *big.Rat) {
	if b.tokens == nil {
		b.tokens, b.last = new(big.Rat).Set(b.burst), new(big.Rat).Set(t)
	}
	elapsed := new(big.Rat).Sub(t, b.last)
	b.tokens.Add(b.tokens, elapsed.Mul(elapsed, b.rate))
	if b.tokens.Cmp(b.burst) > 0 {
		b.tokens.Set(b.burst)
	}
	b.last.Set(t)
	c := new(big.Rat).SetInt64(int64(cost))
	allowed = cost <= 0 || b.tokens.Cmp(c) >= 0
	if allowed && cost > 0 {
		b.tokens.Sub(b.tokens, c)
	}
	if !allowed && c.Cmp(b.burst) <= 0 {
		wait = new(big.Rat).Sub(c, b.tokens)
		wait.Quo(wait, b.rate)
	}
	return allowed, ratFloor(b.tokens), wait
}

// ratFloor is ⌊x⌋ for x ≥ 0.
func ratFloor(x *big.Rat) int {
	return int(new(big.Int).Quo(x.Num(), x.Denom()).Int64())
}

// exactDecision is an oracle's answer: allowed, the whole units left, the
// exact wait until a refused request could pass (nil: never, or allowed)
// and, for the queue, the exact delay of an admitted request.
type exactDecision struct {
	allowed     bool
	remaining   int
	wait, delay *big.Rat
}

// oracle decides requests in exact arithmetic at non-decreasing times.
type oracle interface {
	decide(t *big.Rat, cost int) exactDecision
}

func (b *exactBucket) decide(t *big.Rat, cost int) exactDecision {
	allowed, remaining, wait := b.decideBucket(t, cost)
	return exactDecision{allowed: allowed, remaining: remaining, wait: wait}
}

// oracleRun is one comparison of an algorithm with an oracle.
type oracleRun struct {
	differ, refused, decisions int
	allowedDiffer              int    // of differ, those where Allowed differs
	first                      string // the first difference, for the failure message
}

// compareOracle runs the same requests through alg (a fresh state) and the
// oracle. It compares Allowed and Remaining exactly, and RetryAfter and Delay
// to the exact values within a nanosecond (the code's times are whole
// nanoseconds; a strict rule's first allowed instant is 1 ns after its
// exact bound).
func compareOracle[S any](alg Decider[S], ref oracle, g grid, ticks []int64, costs []int) oracleRun {
	var s S
	var run oracleRun
	for i, k := range ticks {
		d := alg.Decide(&s, g.float(k), costs[i])
		want := ref.decide(g.exact(k), costs[i])
		run.decisions++
		if !d.Allowed {
			run.refused++
		}
		bad := d.Allowed != want.allowed || d.Remaining != want.remaining
		if !bad && want.wait != nil {
			bad = !withinNanosecond(d.RetryAfter, want.wait)
		}
		if !bad && want.delay != nil {
			bad = !withinNanosecond(d.Delay, want.delay) || d.Start != g.float(k)+d.Delay
		}
		if bad {
			if d.Allowed != want.allowed {
				run.allowedDiffer++
			}
			if run.differ == 0 {
				run.first = fmt.Sprintf("request %d at tick %d (t=%v) cost %d: got %+v, exact %v remaining=%d wait=%v delay=%v",
					i, k, g.float(k), costs[i], d, want.allowed, want.remaining, want.wait, want.delay)
			}
			run.differ++
		}
	}
	return run
}

// withinNanosecond reports whether got (seconds) is at the exact value or
// at most a nanosecond (and float64 rounding) above it.
func withinNanosecond(got float64, exact *big.Rat) bool {
	w := ratSeconds(exact)
	return got >= w-1e-12*max(1, w) && got <= w+1.1e-9
}

// compareBucket compares a bucket algorithm with the exact bucket.
func compareBucket[S any](alg Decider[S], rate *big.Rat, burst int, g grid, ticks []int64, costs []int) oracleRun {
	return compareOracle(alg, newExactBucket(rate, burst), g, ticks, costs)
}

// The case: rate 10, burst 1, one request every 0.1 s at
// t = k × 0.1. Exact arithmetic admits all 1,000; float64 subtraction of
// those timestamps left 0.9999999999999998 tokens and refused 333 (GCRA 68).
func TestBucketsExactOnTenthGrid(t *testing.T) {
	r := decimalRate{10, 1, 1}
	ticks, costs := make([]int64, 1000), make([]int, 1000)
	for k := range ticks {
		ticks[k], costs[k] = int64(k+1), 1
	}
	tb, m, _, g, _, _, _ := newAllSeven(t, r.limit(1), Quota{Limit: 1, Window: 1})
	for name, run := range map[string]oracleRun{
		"token bucket": compareBucket(tb, r.rat(), 1, grid{10}, ticks, costs),
		"GCRA":         compareBucket(g, r.rat(), 1, grid{10}, ticks, costs),
		"leaky meter":  compareBucket(m, r.rat(), 1, grid{10}, ticks, costs),
	} {
		if run.refused != 0 || run.differ != 0 {
			t.Errorf("%s: %d of 1000 refused, %d differ from exact arithmetic; first: %s", name, run.refused, run.differ, run.first)
		}
	}
}

// randomGridRequests draws n requests on a grid: gaps of 0 to maxGap ticks
// (0: the same instant), costs mostly 1, some 0 (a query) up to burst+1
// (more than the bucket holds).
func randomGridRequests(r *rand.Rand, n int, maxGap int64, burst int) ([]int64, []int) {
	ticks, costs := make([]int64, n), make([]int, n)
	k := r.Int64N(1000)
	for i := range n {
		if r.IntN(4) != 0 {
			k += r.Int64N(maxGap + 1)
		}
		ticks[i] = k
		costs[i] = 1
		if r.IntN(3) == 0 {
			costs[i] = r.IntN(burst + 2)
		}
	}
	return ticks, costs
}

// 100,000 decisions on a 10 ms grid with random costs: no decision of the
// token bucket, GCRA or the leaky meter differs from exact arithmetic
// (float64 subtraction of the timestamps made 854 differ).
func TestBucketsExactOnMillisecondGrid(t *testing.T) {
	r := decimalRate{10, 1, 1}
	const burst = 5
	ticks, costs := randomGridRequests(newRand(20), 100_000, 25, burst)
	tb, m, _, g, _, _, _ := newAllSeven(t, r.limit(burst), Quota{Limit: 1, Window: 1})
	for name, run := range map[string]oracleRun{
		"token bucket": compareBucket(tb, r.rat(), burst, grid{100}, ticks, costs),
		"GCRA":         compareBucket(g, r.rat(), burst, grid{100}, ticks, costs),
		"leaky meter":  compareBucket(m, r.rat(), burst, grid{100}, ticks, costs),
	} {
		if run.differ != 0 {
			t.Errorf("%s: %d of %d decisions differ from exact arithmetic (%d in Allowed); first: %s",
				name, run.differ, run.decisions, run.allowedDiffer, run.first)
		}
		if run.refused < run.decisions/10 || run.refused > run.decisions*9/10 {
			t.Errorf("%s: %d of %d refused: the stream tests too little", name, run.refused, run.decisions)
		}
	}
}

// exactRates are rates whose emission interval is not a whole number of
// nanoseconds or not a short binary fraction: 3/s (1/3 s), 100/min (0.6 s),
// 7 per 1.5 s (3/14 s), 3 per 1.5 s (0.5 s), 1000/h, 11/s and 0.1/s.
var exactRates = []decimalRate{{3, 1, 1}, {100, 60, 1}, {7, 15, 10}, {3, 15, 10}, {1000, 3600, 1}, {11, 1, 1}, {1, 10, 1}}

// Other rates and periods on decimal grids (10 ms, 1 ms, 0.1 s): the bucket
// algorithms decide exactly like the oracle.
func TestBucketsExactOtherRates(t *testing.T) {
	rnd := newRand(21)
	for _, r := range exactRates {
		for _, g := range []grid{{100}, {1000}, {10}} {
			for _, burst := range []int{1, 4, 13} {
				// Gaps up to about two emission intervals.
				maxGap := max(1, 2*g.den*r.perNum/(r.perD*r.count))
				ticks, costs := randomGridRequests(rnd, 4000, maxGap, burst)
				tb, m, _, gc, _, _, _ := newAllSeven(t, r.limit(burst), Quota{Limit: 1, Window: 1})
				for name, run := range map[string]oracleRun{
					"token bucket": compareBucket(tb, r.rat(), burst, g, ticks, costs),
					"GCRA":         compareBucket(gc, r.rat(), burst, g, ticks, costs),
					"leaky meter":  compareBucket(m, r.rat(), burst, g, ticks, costs),
				} {
					if run.differ != 0 {
						t.Errorf("%v burst %d, grid 1/%d s, %s: %d of %d differ; first: %s", r, burst, g.den, name, run.differ, run.decisions, run.first)
					}
				}
			}
		}
	}
}

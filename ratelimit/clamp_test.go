package ratelimit

import (
	"math"
	"sync"
	"testing"
)

// allowSeq runs requests of cost 1 at the given times and returns whether
// each was allowed.
func allowSeq[S any](alg Decider[S], s *S, times ...float64) []bool {
	out := make([]bool, len(times))
	for i, at := range times {
		out[i] = alg.Decide(s, at, 1).Allowed
	}
	return out
}

func checkSeq[S any](t *testing.T, name string, alg Decider[S], times []float64, want []bool) {
	t.Helper()
	var s S
	got := allowSeq(alg, &s, times...)
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%s: times %v: allowed %v, want %v", name, times, got, want)
			return
		}
	}
}

// A time earlier than the state's is a negative gap, clamped to zero: the
// bucket does not refill for it, and does not refill twice afterwards.
func TestNegativeGapClamps(t *testing.T) {
	l := Limit{Rate: 1, Burst: 2}
	tb, _ := NewTokenBucket(l)
	m, _ := NewLeakyMeter(l)
	g, _ := NewGCRA(l)
	// Empty at 10; at 5 nothing; at 10.5 half a token (counted from 10, not
	// from 5); at 11 one token.
	times := []float64{10, 10, 5, 10.5, 11}
	want := []bool{true, true, false, false, true}
	checkSeq(t, "token bucket", tb, times, want)
	checkSeq(t, "leaky meter", m, times, want)
	checkSeq(t, "GCRA", g, times, want)

	q := Quota{Limit: 2, Window: 10}
	fw, _ := NewFixedWindow(q)
	sc, _ := NewSlidingCounter(q)
	sl, _ := NewSlidingLog(q)
	// Full in window [10, 20); at 5 the count is not reset, so refused.
	checkSeq(t, "fixed window", fw, []float64{15, 15, 5, 19.9, 20}, []bool{true, true, false, false, true})
	checkSeq(t, "sliding counter", sc, []float64{15, 15, 5, 16}, []bool{true, true, false, false})
	// The request at 5 is recorded at 15, so at 16 (when 5 ≤ 16 − 10 would
	// drop it) the log is still full; at 25 both have left.
	checkSeq(t, "sliding log", sl, []float64{15, 5, 16, 25, 25}, []bool{true, true, false, true, true})

	// The queue: three at 10 leave at 10, 11, 12; at 5 all of them look
	// waiting, so a clock stepping back only refuses.
	lq, _ := NewLeakyQueue(Limit{Rate: 1, Burst: 2})
	checkSeq(t, "leaky queue", lq, []float64{10, 10, 10, 5}, []bool{true, true, true, false})
}

// A negative or NaN time is taken as 0: no panic, and the state stays usable.
func TestBadTimes(t *testing.T) {
	l := Limit{Rate: 1, Burst: 1}
	q := Quota{Limit: 1, Window: 10}
	tb, m, lq, g, fw, sl, sc := newAllSeven(t, l, q)
	nan := math.NaN()
	want := []bool{true, false, false, true}
	times := []float64{nan, -5, 0, 10}
	checkSeq(t, "token bucket", tb, times, want)
	checkSeq(t, "leaky meter", m, times, want)
	checkSeq(t, "GCRA", g, times, want)
	checkSeq(t, "fixed window", fw, times, want)
	checkSeq(t, "sliding log", sl, times, want)
	checkSeq(t, "sliding counter", sc, []float64{nan, -5, 0, 20}, want)
	checkSeq(t, "leaky queue", lq, []float64{nan, -5, 0, 0, 0.5, 1}, []bool{true, true, false, false, false, true})
}

// Goroutines sharing a Limiter at one instant get exactly the burst.
func TestLimiterConcurrent(t *testing.T) {
	g, _ := NewGCRA(Limit{Rate: 1, Burst: 500})
	lim := NewLimiter(g)
	var mu sync.Mutex
	allowed := 0
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 0
			for range 200 {
				if lim.AllowN(1, 1).Allowed {
					n++
				}
			}
			mu.Lock()
			allowed += n
			mu.Unlock()
		}()
	}
	wg.Wait()
	if allowed != 500 {
		t.Errorf("allowed %d of 1600 at one instant, want the burst 500", allowed)
	}
	if d := lim.Allow(1.5); d.Allowed || d.RetryAfter != 0.5 {
		t.Errorf("after the burst: %+v, want refused with RetryAfter 0.5", d)
	}
}

// Decisions do not allocate once a ring-based state has grown to its limit,
// on the allow path and on the deny path (Retry-After search) alike.
func TestNoAllocs(t *testing.T) {
	l := Limit{Rate: 10, Burst: 8}
	q := Quota{Limit: 8, Window: 1}
	tb, m, lq, g, fw, sl, sc := newAllSeven(t, l, q)
	checkAllocs(t, "token bucket", tb)
	checkAllocs(t, "leaky meter", m)
	checkAllocs(t, "leaky queue", lq)
	checkAllocs(t, "GCRA", g)
	checkAllocs(t, "fixed window", fw)
	checkAllocs(t, "sliding log", sl)
	checkAllocs(t, "sliding counter", sc)
	checkAllocs(t, "limiter", limiterDecider[GCRAState]{NewLimiter(g)})
}

type limiterDecider[S any] struct{ l *Limiter[S] }

func (d limiterDecider[S]) Decide(_ *S, now float64, cost int) Decision { return d.l.AllowN(now, cost) }

func checkAllocs[S any](t *testing.T, name string, alg Decider[S]) {
	t.Helper()
	var s S
	now := 0.0
	step := func() {
		// 16 requests per second against 8 per second: half are refused.
		now += 1.0 / 16
		alg.Decide(&s, now, 1)
		alg.Decide(&s, now, 1)
	}
	for range 100 {
		step() // grow the rings
	}
	if a := testing.AllocsPerRun(1000, step); a != 0 {
		t.Errorf("%s: %v allocations per decision pair, want 0", name, a)
	}
}

// newAllSeven returns one of each algorithm: the four bucket algorithms for
// l and the three window algorithms for q.
func newAllSeven(t testing.TB, l Limit, q Quota) (*TokenBucket, *LeakyMeter, *LeakyQueue, *GCRA, *FixedWindow, *SlidingLog, *SlidingCounter) {
	t.Helper()
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	tb, err := NewTokenBucket(l)
	must(err)
	m, err := NewLeakyMeter(l)
	must(err)
	lq, err := NewLeakyQueue(l)
	must(err)
	g, err := NewGCRA(l)
	must(err)
	fw, err := NewFixedWindow(q)
	must(err)
	sl, err := NewSlidingLog(q)
	must(err)
	sc, err := NewSlidingCounter(q)
	must(err)
	return tb, m, lq, g, fw, sl, sc
}

package ratelimit

import (
	"math"
	"math/rand/v2"
	"testing"
)

// req is one request of a generated stream.
type req struct {
	t    float64
	cost int
}

// stream returns n requests with exponential gaps of mean meanGap seconds,
// some in bunches at the same instant and some after long pauses, costing 1
// mostly and up to maxCost.
func stream(r *rand.Rand, n int, meanGap float64, maxCost int) []req {
	out := make([]req, 0, n)
	t := r.Float64() * 3 * meanGap
	for len(out) < n {
		switch x := r.Float64(); {
		case x < 0.1: // a bunch at one instant
		case x < 0.13: // a long pause
			t += 50 * meanGap * r.Float64()
		default:
			t += r.ExpFloat64() * meanGap
		}
		c := 1
		if r.Float64() < 0.2 {
			c = 1 + r.IntN(maxCost)
		}
		out = append(out, req{t, c})
	}
	return out
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x5eed)) }

// spans calls check for every span [admitted[i].t, admitted[j].t] of a list
// of admitted requests in time order, with its length and the units admitted
// in it.
func spans(admitted []req, check func(from, to int, dt float64, units int)) {
	for i := range admitted {
		units := 0
		for j := i; j < len(admitted); j++ {
			units += admitted[j].cost
			check(i, j, admitted[j].t-admitted[i].t, units)
		}
	}
}

// A token bucket never admits more than b + r·t units in any span of t
// seconds.
func TestTokenBucketSpanBound(t *testing.T) {
	r := newRand(1)
	for _, l := range []Limit{{0.5, 1}, {3, 5}, {10, 20}, {100, 7}} {
		tb, _ := NewTokenBucket(l)
		var s TokenBucketState
		var admitted []req
		for _, q := range stream(r, 1500, 1/(3*l.Rate), 4) {
			if tb.Decide(&s, q.t, q.cost).Allowed {
				admitted = append(admitted, q)
			}
		}
		if len(admitted) < 100 {
			t.Fatalf("%+v: only %d admitted; the stream is too thin to test anything", l, len(admitted))
		}
		spans(admitted, func(i, j int, dt float64, units int) {
			if bound := float64(l.Burst) + l.Rate*dt; float64(units) > bound+1e-9 {
				t.Fatalf("%+v: %d units admitted in [%v, %v], bound b + r·t = %v", l, units, admitted[i].t, admitted[j].t, bound)
			}
		})
	}
}

// A sliding log never admits more than Limit units in any window of length
// Window, whatever the costs.
func TestSlidingLogWindowBound(t *testing.T) {
	r := newRand(6)
	for _, q := range []Quota{{5, 1}, {20, 10}, {3, 0.25}} {
		sl, _ := NewSlidingLog(q)
		var s SlidingLogState
		var admitted []req
		for _, x := range stream(r, 2000, q.Window/float64(3*q.Limit), 3) {
			if sl.Decide(&s, x.t, x.cost).Allowed {
				admitted = append(admitted, x)
			}
		}
		spans(admitted, func(i, j int, dt float64, units int) {
			if dt < q.Window && units > q.Limit {
				t.Fatalf("%+v: %d units admitted in [%v, %v]", q, units, admitted[i].t, admitted[j].t)
			}
		})
	}
}

// A fixed window admits at most Limit per window, so at most 2·Limit in any
// span shorter than a window — and exactly that in the seed's case A.
func TestFixedWindowBoundary(t *testing.T) {
	r := newRand(7)
	for _, q := range []Quota{{5, 1}, {20, 10}} {
		fw, _ := NewFixedWindow(q)
		var s FixedWindowState
		var admitted []req
		for _, x := range stream(r, 2000, q.Window/float64(3*q.Limit), 3) {
			if fw.Decide(&s, x.t, x.cost).Allowed {
				admitted = append(admitted, x)
			}
		}
		spans(admitted, func(i, j int, dt float64, units int) {
			same := math.Floor(admitted[i].t/q.Window) == math.Floor(admitted[j].t/q.Window)
			if (same && units > q.Limit) || (dt < q.Window && units > 2*q.Limit) {
				t.Fatalf("%+v: %d units admitted in [%v, %v]", q, units, admitted[i].t, admitted[j].t)
			}
		})
	}

	// Case A: 100 requests 10 ms apart from 0:59, and 100 from 1:00.
	fw, _ := NewFixedWindow(Quota{Limit: 100, Window: 60})
	var s FixedWindowState
	var first, last float64
	n := 0
	for _, start := range []float64{59, 60} {
		for i := range 100 {
			at := start + float64(i)*0.01
			if fw.Decide(&s, at, 1).Allowed {
				if n == 0 {
					first = at
				}
				last = at
				n++
			}
		}
	}
	if n != 200 || last-first >= 2 {
		t.Errorf("case A: %d allowed between %v and %v, want 200 within 2 s", n, first, last)
	}
}

func cloneLog(s SlidingLogState) SlidingLogState {
	s.log.buf = append([]int64(nil), s.log.buf...)
	return s
}

func cloneQueue(s LeakyQueueState) LeakyQueueState {
	s.out.buf = append([]int64(nil), s.out.buf...)
	return s
}

func same[S any](s S) S { return s }

// checkRetry replays a stream and, at every denial, checks on copies of the
// state that the same request is allowed at now+RetryAfter and refused a
// microsecond earlier.
func checkRetry[S any](t *testing.T, name string, alg Decider[S], clone func(S) S, reqs []req) {
	t.Helper()
	var s S
	denied, never := 0, 0
	for i, q := range reqs {
		d := alg.Decide(&s, q.t, q.cost)
		if d.Allowed {
			if d.RetryAfter != 0 {
				t.Fatalf("%s request %d: allowed with RetryAfter %v", name, i, d.RetryAfter)
			}
			continue
		}
		if math.IsInf(d.RetryAfter, 1) {
			never++
			continue
		}
		denied++
		if !(d.RetryAfter >= 0) {
			t.Fatalf("%s request %d: RetryAfter %v", name, i, d.RetryAfter)
		}
		c := clone(s)
		if again := alg.Decide(&c, q.t+d.RetryAfter, q.cost); !again.Allowed {
			t.Fatalf("%s request %d (t=%v cost=%d): refused again at t+RetryAfter (%v): %+v",
				name, i, q.t, q.cost, d.RetryAfter, again)
		}
		const eps = 1e-6
		if d.RetryAfter > eps {
			c := clone(s)
			if early := alg.Decide(&c, q.t+d.RetryAfter-eps, q.cost); early.Allowed {
				t.Fatalf("%s request %d (t=%v cost=%d): already allowed %v s before t+RetryAfter (%v)",
					name, i, q.t, q.cost, eps, d.RetryAfter)
			}
		}
	}
	if denied < 50 || never == 0 {
		t.Fatalf("%s: %d denials with a finite RetryAfter and %d never; the stream tests too little", name, denied, never)
	}
}

func TestRetryAfter(t *testing.T) {
	for seed := uint64(10); seed < 14; seed++ {
		r := newRand(seed)
		l := Limit{Rate: 3 + r.Float64()*10, Burst: 2 + r.IntN(8)}
		q := Quota{Limit: 2 + r.IntN(8), Window: 0.5 + r.Float64()*5}
		checkRetryAll(t, r, l, q, 0)
	}
}

// checkRetryAll runs checkRetry for the seven algorithms on streams of
// bursts well above the limit, costs up to one more than capacity, from
// base seconds on.
func checkRetryAll(t *testing.T, r *rand.Rand, l Limit, q Quota, base float64) {
	t.Helper()
	bucket := stream(r, 3000, 1/(3*l.Rate), l.Burst+1)
	window := stream(r, 3000, q.Window/float64(3*q.Limit), q.Limit+1)
	for i := range bucket {
		bucket[i].t += base
	}
	for i := range window {
		window[i].t += base
	}
	tb, m, lq, g, fw, sl, sc := newAllSeven(t, l, q)
	checkRetry(t, "token bucket", tb, same, bucket)
	checkRetry(t, "leaky meter", m, same, bucket)
	checkRetry(t, "leaky queue", lq, cloneQueue, bucket)
	checkRetry(t, "GCRA", g, same, bucket)
	checkRetry(t, "fixed window", fw, same, window)
	checkRetry(t, "sliding log", sl, cloneLog, window)
	checkRetry(t, "sliding counter", sc, same, window)
}

// Every zero state is a full quota, at any first time.
func TestZeroStateIsFull(t *testing.T) {
	l := Limit{Rate: 3, Burst: 4}
	q := Quota{Limit: 4, Window: 7}
	tb, m, lq, g, fw, sl, sc := newAllSeven(t, l, q)
	for _, now := range []float64{0, 0.25, 13.7, 1e9} {
		checkFull(t, "token bucket", tb, now, 4)
		checkFull(t, "leaky meter", m, now, 4)
		checkFull(t, "GCRA", g, now, 4)
		checkFull(t, "fixed window", fw, now, 4)
		checkFull(t, "sliding log", sl, now, 4)
		checkFull(t, "sliding counter", sc, now, 4)
		// The queue lets the first unit go at once and queues Burst more.
		checkFull(t, "leaky queue", lq, now, 5)
	}
}

func checkFull[S any](t *testing.T, name string, alg Decider[S], now float64, n int) {
	t.Helper()
	var s S
	for i := range n {
		if d := alg.Decide(&s, now, 1); !d.Allowed {
			t.Errorf("%s at %v: request %d of %d refused on a fresh state: %+v", name, now, i+1, n, d)
		}
	}
	if d := alg.Decide(&s, now, 1); d.Allowed {
		t.Errorf("%s at %v: request %d allowed on a fresh state", name, now, n+1)
	}
}

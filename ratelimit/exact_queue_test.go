package ratelimit

import (
	"math/big"
	"testing"
)

// Oracles for the leaky queue and the three window algorithms, in exact
// arithmetic over decimal timestamps (see exact_test.go), written from the
// seed's definitions.

// exactQueue is the leaky bucket as a queue: a request at t starts at
// out = max(t, nextFree); its units leave at out, out + T, ...; it is refused
// if the units still waiting (release > t) plus its cost exceed the size.
type exactQueue struct {
	interval *big.Rat // T = 1/rate
	size     int
	nextFree *big.Rat
	releases []*big.Rat
}

func newExactQueue(rate *big.Rat, size int) *exactQueue {
	return &exactQueue{interval: new(big.Rat).Inv(rate), size: size, nextFree: new(big.Rat)}
}

func (q *exactQueue) decide(t *big.Rat, cost int) exactDecision {
	waiting := q.releases[:0]
	for _, r := range q.releases {
		if r.Cmp(t) > 0 {
			waiting = append(waiting, r)
		}
	}
	q.releases = waiting
	n := len(waiting)
	if cost <= 0 {
		return exactDecision{allowed: true, remaining: q.size - n}
	}
	if n+cost > q.size {
		d := exactDecision{remaining: q.size - n}
		if cost <= q.size {
			d.wait = new(big.Rat).Sub(waiting[n+cost-q.size-1], t)
		}
		return d
	}
	out := new(big.Rat).Set(t)
	if q.nextFree.Cmp(t) > 0 {
		out.Set(q.nextFree)
	}
	at := new(big.Rat).Set(out)
	for range cost {
		if at.Cmp(t) > 0 {
			q.releases = append(q.releases, new(big.Rat).Set(at))
		}
		at.Add(at, q.interval)
	}
	q.nextFree = at
	return exactDecision{allowed: true, remaining: q.size - len(q.releases), delay: new(big.Rat).Sub(out, t)}
}

// ratFloorInt is ⌊x⌋ for x ≥ 0, as a big.Int.
func ratFloorInt(x *big.Rat) *big.Int { return new(big.Int).Quo(x.Num(), x.Denom()) }

// exactFixedWindow counts per window ⌊t/W⌋.
type exactFixedWindow struct {
	limit, count int
	window       *big.Rat
	id           *big.Int
}

func (w *exactFixedWindow) decide(t *big.Rat, cost int) exactDecision {
	id := ratFloorInt(new(big.Rat).Quo(t, w.window))
	if w.id == nil || id.Cmp(w.id) != 0 {
		w.id, w.count = id, 0
	}
	if cost <= 0 || w.count+cost <= w.limit {
		w.count += max(cost, 0)
		return exactDecision{allowed: true, remaining: w.limit - w.count}
	}
	d := exactDecision{remaining: w.limit - w.count}
	if cost <= w.limit {
		end := new(big.Rat).SetInt(new(big.Int).Add(id, big.NewInt(1)))
		d.wait = end.Mul(end, w.window).Sub(end, t)
	}
	return d
}

// exactSlidingLog keeps the admitted timestamps of the last W seconds.
type exactSlidingLog struct {
	limit  int
	window *big.Rat
	log    []*big.Rat
}

func (l *exactSlidingLog) decide(t *big.Rat, cost int) exactDecision {
	cut := new(big.Rat).Sub(t, l.window)
	for len(l.log) > 0 && l.log[0].Cmp(cut) <= 0 {
		l.log = l.log[1:]
	}
	n := len(l.log)
	if cost <= 0 || n+cost <= l.limit {
		for range max(cost, 0) {
			l.log = append(l.log, t)
		}
		return exactDecision{allowed: true, remaining: l.limit - len(l.log)}
	}
	d := exactDecision{remaining: l.limit - n}
	if cost <= l.limit {
		d.wait = new(big.Rat).Add(l.log[n+cost-l.limit-1], l.window)
		d.wait.Sub(d.wait, t)
	}
	return d
}

// exactSlidingCounter is prev·(1 − (t − id·W)/W) + cur + cost − 1 < limit.
// Its wait is not computed (a strict bound has no first instant in exact
// arithmetic); RetryAfter is checked by TestRetryAfter.
type exactSlidingCounter struct {
	limit, prev, cur int
	window           *big.Rat
	id               *big.Int
}

func (c *exactSlidingCounter) decide(t *big.Rat, cost int) exactDecision {
	id := ratFloorInt(new(big.Rat).Quo(t, c.window))
	if c.id == nil || id.Cmp(c.id) != 0 {
		if c.id != nil && new(big.Int).Sub(id, c.id).Cmp(big.NewInt(1)) == 0 {
			c.prev = c.cur
		} else {
			c.prev = 0
		}
		c.cur, c.id = 0, id
	}
	start := new(big.Rat).Mul(new(big.Rat).SetInt(id), c.window)
	weight := new(big.Rat).Sub(t, start)
	weight.Quo(weight, c.window).Sub(big.NewRat(1, 1), weight)
	base := weight.Mul(weight, big.NewRat(int64(c.prev), 1))
	// The largest k with base + cur + k − 1 < limit: limit − cur − ⌊base⌋.
	room := max(0, c.limit-c.cur-int(ratFloorInt(base).Int64()))
	if cost <= 0 || (cost <= c.limit && cost <= room) {
		c.cur += max(cost, 0)
		return exactDecision{allowed: true, remaining: room - max(cost, 0)}
	}
	return exactDecision{remaining: room}
}

// windowQuotas are window lengths that float64 division does not divide
// exactly on decimal grids (0.7/0.1 is 6.999999999999999 in float64).
var windowQuotas = []struct {
	limit        int
	perNum, perD int64 // window = perNum/perD seconds
}{{3, 1, 10}, {7, 3, 10}, {5, 1, 1}, {100, 60, 1}, {4, 15, 10}}

// The leaky queue and the three window algorithms decide exactly like
// their oracles on decimal grids.
func TestQueueAndWindowsExact(t *testing.T) {
	rnd := newRand(22)
	for _, r := range exactRates {
		for _, g := range []grid{{100}, {10}} {
			for _, size := range []int{1, 5} {
				maxGap := max(1, 2*g.den*r.perNum/(r.perD*r.count))
				ticks, costs := randomGridRequests(rnd, 3000, maxGap, size)
				q, err := NewLeakyQueue(r.limit(size))
				if err != nil {
					t.Fatal(err)
				}
				if run := compareOracle(q, newExactQueue(r.rat(), size), g, ticks, costs); run.differ != 0 {
					t.Errorf("leaky queue %v size %d, grid 1/%d s: %d of %d differ; first: %s", r, size, g.den, run.differ, run.decisions, run.first)
				}
			}
		}
	}
	for _, wq := range windowQuotas {
		window := big.NewRat(wq.perNum, wq.perD)
		quota := Quota{Limit: wq.limit, Window: float64(wq.perNum) / float64(wq.perD)}
		for _, g := range []grid{{100}, {10}, {1000}} {
			maxGap := max(1, g.den*wq.perNum/(wq.perD*int64(wq.limit)))
			ticks, costs := randomGridRequests(rnd, 4000, 2*maxGap, wq.limit)
			fw, _ := NewFixedWindow(quota)
			sl, _ := NewSlidingLog(quota)
			sc, _ := NewSlidingCounter(quota)
			for name, run := range map[string]oracleRun{
				"fixed window":    compareOracle(fw, &exactFixedWindow{limit: wq.limit, window: window}, g, ticks, costs),
				"sliding log":     compareOracle(sl, &exactSlidingLog{limit: wq.limit, window: window}, g, ticks, costs),
				"sliding counter": compareOracle(sc, &exactSlidingCounter{limit: wq.limit, window: window}, g, ticks, costs),
			} {
				if run.differ != 0 {
					t.Errorf("%s %+v, grid 1/%d s: %d of %d differ; first: %s", name, quota, g.den, run.differ, run.decisions, run.first)
				}
				if run.refused < run.decisions/20 {
					t.Errorf("%s %+v, grid 1/%d s: %d of %d refused: the stream tests too little", name, quota, g.den, run.refused, run.decisions)
				}
			}
		}
	}
}

// The seed's example of the artefact: at t = 7 × 0.1 a window of 0.1 s is
// window 7, not 6 (0.7/0.1 = 6.999999999999999 in float64).
func TestFixedWindowDecimalBoundary(t *testing.T) {
	fw, _ := NewFixedWindow(Quota{Limit: 1, Window: 0.1})
	var s FixedWindowState
	for k := 1; k <= 1000; k++ {
		if d := fw.Decide(&s, float64(k)*0.1, 1); !d.Allowed {
			t.Fatalf("request at %d × 0.1 refused: %+v (each is alone in its window)", k, d)
		}
	}
}

package brownout

import (
	"math"
	"sync/atomic"
)

// The latency histogram is log-linear: values are counted in microseconds,
// each power of two from 1 µs up to 2^27 µs (about 134 s) is split into 8
// equal buckets, and two more buckets take what falls below 1 µs and at or
// above 2^27 µs. A value's bucket comes straight from its float64 bits (the
// exponent picks the octave, the top three mantissa bits the eighth), so no
// logarithm is taken on the hot path.
//
// A bucket [lo, lo+w) in octave 2^o has w = 2^o/8 and lo ≥ 2^o = 8w, so
// reporting its midpoint is off by at most w/2 ≤ lo/16: a relative error of
// at most 6.25% for any value in [1 µs, 134 s). Below 1 µs the estimate is
// 0.5 µs (absolute error ≤ 0.5 µs); at or above 134 s it is 134 s (a lower
// bound).
const (
	subBuckets  = 8                          // buckets per power of two
	subBits     = 3                          // log2(subBuckets)
	octaves     = 27                         // 1 µs … 2^27 µs
	nBuckets    = 1 + octaves*subBuckets + 1 // underflow, log-linear, overflow
	maxMicros   = float64(1 << octaves)      // first value of the overflow bucket, in µs
	maxSeconds  = maxMicros / 1e6            // the same, in seconds (134.217728)
	overflowIdx = nBuckets - 1               // index of the overflow bucket
	mantShift   = 52 - subBits               // float64 mantissa bits below the three kept
	expBias     = 1023                       // float64 exponent bias
	expMask     = 0x7ff                      // float64 exponent field
	maxRelError = 1.0 / (2 * subBuckets)     // 6.25%, see above
	underflowAt = 0.5e-6                     // estimate for the underflow bucket, seconds
	nanosPerSec = 1e9                        // wait sums are kept in integer nanoseconds
	noPeriod    = math.MinInt64              // period number of a sub-window never used
	resetting   = math.MinInt64 + 1          // period number while a sub-window is being zeroed
	maxPeriodNo = float64(1 << 62)           // |now/Period| beyond this is ignored
	maxSubs     = 1000                       // Window is at most this many Periods
)

// bucketOf returns the histogram bucket of a latency in seconds (finite, ≥ 0).
func bucketOf(seconds float64) int {
	us := seconds * 1e6
	if us < 1 {
		return 0
	}
	if us >= maxMicros {
		return overflowIdx
	}
	bits := math.Float64bits(us)
	octave := int(bits>>52&expMask) - expBias // 0 … octaves-1, as 1 ≤ us < 2^27
	eighth := int(bits>>mantShift) & (subBuckets - 1)
	return 1 + octave*subBuckets + eighth
}

// bucketValue returns the value, in seconds, that stands for bucket i: the
// midpoint of a log-linear bucket, 0.5 µs for underflow, 2^27 µs for
// overflow.
func bucketValue(i int) float64 {
	switch {
	case i <= 0:
		return underflowAt
	case i >= overflowIdx:
		return maxSeconds
	}
	octave := (i - 1) / subBuckets
	eighth := (i - 1) % subBuckets
	// Midpoint of [2^o(1+j/8), 2^o(1+(j+1)/8)) is 2^o(1+(2j+1)/16).
	mid := math.Ldexp(1+float64(2*eighth+1)/(2*subBuckets), octave)
	return mid / 1e6
}

// histogram is a plain (non-atomic) copy of bucket counts, merged from
// sub-windows when a control step is taken. It lives on the stack.
type histogram [nBuckets]uint64

// quantile returns the estimated num/den quantile (e.g. 99/100) of the
// counts in h, which hold n observations in total, by the nearest-rank
// definition: the value of the ceil(n·num/den)-th smallest observation
// (at least the first). It returns 0 when n is 0.
func (h *histogram) quantile(n, num, den uint64) float64 {
	if n == 0 {
		return 0
	}
	rank := (n*num + den - 1) / den
	if rank < 1 {
		rank = 1
	}
	var seen uint64
	for i := range h {
		seen += h[i]
		if seen >= rank {
			return bucketValue(i)
		}
	}
	// Counts changed under a racing reset: the sum fell short of n.
	return bucketValue(overflowIdx)
}

// subWindow holds the observations of one control Period: a latency
// histogram and the sum of queue waits. All fields are atomics, so Observe
// and the control step may touch it at the same time. period tells which
// Period the counts belong to; a sub-window found holding an older period
// is reset by the first observation of the new one.
type subWindow struct {
	period  atomic.Int64  // period number floor(now/Period) of the counts, noPeriod if unused
	waitNs  atomic.Uint64 // sum of queue waits in nanoseconds (each clamped to maxSeconds)
	buckets [nBuckets]atomic.Uint64
}

// ring is the fixed set of sub-windows, indexed by period number mod len.
type ring []subWindow

func newRing(n int) ring {
	r := make(ring, n)
	for i := range r {
		r[i].period.Store(noPeriod)
	}
	return r
}

// slot returns the sub-window of period p.
func (r ring) slot(p int64) *subWindow {
	m := p % int64(len(r))
	if m < 0 {
		m += int64(len(r))
	}
	return &r[m]
}

// add counts one observation in period p: its latency bucket and its wait
// in nanoseconds. It never blocks and never loops more than a few times.
//
// A sub-window still holding an older period is claimed by compare-and-swap
// (period ← resetting), zeroed by the winner, then given period p. Lost on
// the way, by design: observations that arrive at that sub-window while it
// is being zeroed (a few hundred nanoseconds, once per Period); an
// observation whose period is older than the one its sub-window now holds
// (it arrived after its sub-window was reused); and, if a goroutine stalls
// between reading the period and adding for as long as the whole ring
// (Window), its observation lands in the newer period's counts.
func (r ring) add(p int64, bucket int, waitNs uint64) {
	s := r.slot(p)
	for {
		q := s.period.Load()
		if q == p {
			break
		}
		if q > p || q == resetting {
			return // late, or being zeroed: drop it
		}
		if s.period.CompareAndSwap(q, resetting) {
			s.waitNs.Store(0)
			for i := range s.buckets {
				s.buckets[i].Store(0)
			}
			s.period.Store(p)
			break
		}
		// Another goroutine claimed it first; look again.
	}
	s.buckets[bucket].Add(1)
	s.waitNs.Add(waitNs)
}

// collect merges into h the sub-windows whose period lies in [from, to] and
// returns the number of observations and the sum of their waits in
// nanoseconds. A sub-window being reset, or reset while it is read, is left
// out (the resetting marker and noPeriod lie below any valid from).
func (r ring) collect(h *histogram, from, to int64) (n, waitNs uint64) {
	for i := range r {
		s := &r[i]
		q := s.period.Load()
		if q < from || q > to {
			continue
		}
		var local histogram
		var cnt uint64
		for j := range s.buckets {
			c := s.buckets[j].Load()
			local[j] = c
			cnt += c
		}
		w := s.waitNs.Load()
		if s.period.Load() != q {
			continue // reset under us: its counts are a mix of two periods
		}
		for j := range local {
			h[j] += local[j]
		}
		n += cnt
		waitNs += w
	}
	return n, waitNs
}

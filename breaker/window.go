package breaker

import "math"

// tally counts reported calls: all of them, the failed ones and the slow
// ones (a slow call is counted as slow whether it failed or not).
type tally struct {
	calls, failures, slow int
}

func (t *tally) add(fail, slow bool) {
	t.calls++
	if fail {
		t.failures++
	}
	if slow {
		t.slow++
	}
}

// Outcome codes kept by a count window, one byte per call.
const (
	codeFail uint8 = 1 << iota
	codeSlow
)

func code(fail, slow bool) uint8 {
	var c uint8
	if fail {
		c |= codeFail
	}
	if slow {
		c |= codeSlow
	}
	return c
}

// countRing is a count window: the outcomes of the last len(ring) calls
// and their running tally. add is O(1); memory is fixed at construction.
type countRing struct {
	ring []uint8 // outcome codes; ring[next] is the oldest once full
	next int
	full bool
	sum  tally
}

func newCountRing(n int) countRing { return countRing{ring: make([]uint8, n)} }

// add records a call, dropping the oldest one when the window is full,
// and returns the window's tally.
func (w *countRing) add(fail, slow bool) tally {
	if w.full {
		old := w.ring[w.next]
		w.sum.calls--
		if old&codeFail != 0 {
			w.sum.failures--
		}
		if old&codeSlow != 0 {
			w.sum.slow--
		}
	}
	w.ring[w.next] = code(fail, slow)
	w.sum.add(fail, slow)
	if w.next++; w.next == len(w.ring) {
		w.next, w.full = 0, true
	}
	return w.sum
}

// reset empties the window in O(1): slots are read only once written again.
func (w *countRing) reset() { w.next, w.full, w.sum = 0, false, tally{} }

// bucket is one non-empty bucket of a time window: its index (the report
// time divided by the bucket width, rounded down) and its tally.
type bucket struct {
	idx int64
	t   tally
}

// Bucket indexes are kept within ±maxIndex so that idx − n never
// overflows; times that far out (or NaN) go into the newest bucket.
const maxIndex = 1 << 62

// timeRing is a time window of n buckets of width seconds. It keeps only
// the non-empty buckets, oldest first, in a ring of n slots, and a running
// tally of them: add pushes at most one bucket and each bucket leaves once,
// so add is O(1) amortised whatever the gaps between reports, and the
// memory (n buckets) is fixed at construction.
type timeRing struct {
	width float64
	n     int64
	ring  []bucket // ring[head], ring[head+1], … (mod n): size live buckets, oldest first
	head  int
	size  int
	last  int64 // the newest bucket index seen (valid when seen)
	seen  bool
	sum   tally
}

func newTimeRing(width float64, n int) timeRing {
	return timeRing{width: width, n: int64(n), ring: make([]bucket, n)}
}

// index returns the bucket of a report at now. Reports are counted at the
// newest bucket seen if now is earlier than it (time does not run back in
// a window), NaN or too far out.
func (w *timeRing) index(now float64) int64 {
	x := math.Floor(now / w.width)
	if x >= -maxIndex && x <= maxIndex && (!w.seen || int64(x) > w.last) {
		w.last = int64(x)
	}
	w.seen = true
	return w.last
}

// add records a call reported at now, drops the buckets that have left the
// window, and returns the window's tally.
func (w *timeRing) add(now float64, fail, slow bool) tally {
	k := w.index(now)
	for w.size > 0 && w.ring[w.head].idx <= k-w.n {
		old := &w.ring[w.head].t
		w.sum.calls -= old.calls
		w.sum.failures -= old.failures
		w.sum.slow -= old.slow
		if w.head++; w.head == len(w.ring) {
			w.head = 0
		}
		w.size--
	}
	tail := w.head + w.size - 1
	if tail >= len(w.ring) {
		tail -= len(w.ring)
	}
	if w.size == 0 || w.ring[tail].idx != k {
		// A new bucket; after the expiry above at most n−1 are live.
		if tail++; tail == len(w.ring) {
			tail = 0
		}
		w.ring[tail] = bucket{idx: k}
		w.size++
	}
	w.ring[tail].t.add(fail, slow)
	w.sum.add(fail, slow)
	return w.sum
}

// reset empties the window in O(1).
func (w *timeRing) reset() { w.head, w.size, w.sum = 0, 0, tally{} }

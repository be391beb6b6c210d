package ratelimit

import (
	"testing"
	"unsafe"
)

// The state types are no larger than the seed's memory model says.
func TestStateSizesMatchModel(t *testing.T) {
	for _, c := range []struct {
		alg  Algorithm
		size uintptr
	}{
		{AlgGCRA, unsafe.Sizeof(GCRAState{})},
		{AlgTokenBucket, unsafe.Sizeof(TokenBucketState{})},
		{AlgLeakyMeter, unsafe.Sizeof(LeakyMeterState{})},
		{AlgFixedWindow, unsafe.Sizeof(FixedWindowState{})},
		{AlgSlidingCounter, unsafe.Sizeof(SlidingCounterState{})},
	} {
		if model := StateBytes(c.alg, 100); int(c.size) != model {
			t.Errorf("%v: state is %d bytes, model says %d", c.alg, c.size, model)
		}
	}
	// The seed's figures.
	for _, c := range []struct {
		alg  Algorithm
		want int
	}{{AlgSlidingLog, 800}, {AlgFixedWindow, 8}, {AlgSlidingCounter, 12}, {AlgTokenBucket, 16}, {AlgGCRA, 8}} {
		if got := StateBytes(c.alg, 100); got != c.want {
			t.Errorf("StateBytes(%v, 100) = %d, want %d", c.alg, got, c.want)
		}
	}
	if got := SortedSetLogBytes(100); got != 6400 {
		t.Errorf("SortedSetLogBytes(100) = %d, want 6400", got)
	}
	if got := StateBytes(Algorithm(99), 100); got != 0 {
		t.Errorf("unknown algorithm: %d bytes, want 0", got)
	}
}

// A ring-based state filled far past its limit holds at most limit
// timestamps: the model's size plus a 32-byte header.
func TestRingStatesAreBounded(t *testing.T) {
	const header = 32
	for _, limit := range []int{1, 3, 100, 1000} {
		sl, _ := NewSlidingLog(Quota{Limit: limit, Window: 10})
		lq, _ := NewLeakyQueue(Limit{Rate: 1, Burst: limit})
		var ls SlidingLogState
		var qs LeakyQueueState
		for i := range 5 * limit {
			at := float64(i) * 0.001
			sl.Decide(&ls, at, 1+i%3)
			lq.Decide(&qs, at, 1+i%3)
		}
		if got := int(unsafe.Sizeof(ls)) + 8*cap(ls.log.buf); got > StateBytes(AlgSlidingLog, limit)+header {
			t.Errorf("sliding log, limit %d: %d bytes, model %d + %d", limit, got, StateBytes(AlgSlidingLog, limit), header)
		}
		if got := int(unsafe.Sizeof(qs)) + 8*cap(qs.out.buf); got > StateBytes(AlgLeakyQueue, limit)+header {
			t.Errorf("leaky queue, size %d: %d bytes, model %d + %d", limit, got, StateBytes(AlgLeakyQueue, limit), header)
		}
		if int(ls.log.n) != limit {
			t.Errorf("sliding log, limit %d: holds %d timestamps after an overload, want %d", limit, ls.log.n, limit)
		}
	}
}

package loadgen

import (
	"testing"
	"time"
)

// The quantiles carry the mean (Little's law's W for spillway load
// --propose): of 1, 2, 3 and 10 ms, 4 ms, to the histogram's 3 digits.
func TestQuantilesMean(t *testing.T) {
	h := newHist(time.Second)
	for _, ms := range []int{1, 2, 3, 10} {
		h.record(time.Duration(ms) * time.Millisecond)
	}
	q := h.quantiles()
	if d := q.Mean - 4*time.Millisecond; d < -4*time.Microsecond || d > 4*time.Microsecond {
		t.Errorf("mean %v, want 4ms within 0.1%%", q.Mean)
	}
	if q.Max != 10*time.Millisecond {
		t.Errorf("max %v, want 10ms", q.Max)
	}
	empty := newHist(time.Second)
	if q := empty.quantiles(); q.Mean != 0 {
		t.Errorf("mean of nothing %v, want 0", q.Mean)
	}
}

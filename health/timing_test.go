package health

import (
	"math"
	"testing"
)

// The seed's example: inter 2 s, timeout 1 s, fall 3, rise 2 detects a hung
// server in 6 s on average and 7 s at worst, and takes it back within 4 s.
func TestCheckTimingSeedExample(t *testing.T) {
	c := CheckTiming{Interval: 2, Timeout: 1, Fall: 3, Rise: 2}
	if got := c.MeanDetection(); got != 6 {
		t.Errorf("mean detection = %v, want 6", got)
	}
	if got := c.WorstDetection(); got != 7 {
		t.Errorf("worst detection = %v, want 7", got)
	}
	if got := c.Recovery(); got != 4 {
		t.Errorf("recovery = %v, want 4", got)
	}
}

func TestCheckTimingBounds(t *testing.T) {
	for _, c := range []CheckTiming{{1, 0.5, 2, 3}, {5, 2, 3, 2}, {0.25, 0.1, 1, 1}, {10, 9, 7, 1}} {
		// Mean is half an interval below worst, whatever the setting.
		if d := c.WorstDetection() - c.MeanDetection(); math.Abs(d-c.Interval/2) > 1e-12 {
			t.Errorf("%+v: worst − mean = %v, want interval/2 = %v", c, d, c.Interval/2)
		}
		if c.MeanDetection() < c.Timeout+float64(c.Fall-1)*c.Interval {
			t.Errorf("%+v: mean detection below the last check's timeout", c)
		}
	}
}

func TestPassiveTiming(t *testing.T) {
	p := PassiveTiming{Consecutive: 5, RequestTimeout: 1}
	if got := p.FastErrorDetection(500); got != 0.01 {
		t.Errorf("fast = %v, want 0.01", got)
	}
	if got := p.HungDetection(500); got != 1.01 {
		t.Errorf("hung = %v, want 1.01", got)
	}
	if got := CheckRate(20, 500, 2); got != 5000 {
		t.Errorf("check rate = %v, want 5000", got)
	}
}

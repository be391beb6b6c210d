package demo

import (
	"testing"
	"time"
)

// The knee is the highest load below the first failing one: good ≥ 95%
// of the arrivals, shed ≤ 1%, p99 ≤ 3 × the lowest load's.
func TestKneeLoad(t *testing.T) {
	ms := time.Millisecond
	rows := []Row{
		{Lane: "a", Load: 50, Offered: 600, Good: 590, P99: 400 * ms},
		{Lane: "a", Load: 100, Offered: 1200, Good: 1140, Rejected: 12, P99: 1200 * ms}, // 95%, 1%, 3×: passes
		{Lane: "a", Load: 150, Offered: 1800, Good: 1700, P99: 500 * ms},                // 94.4%: fails
		{Lane: "a", Load: 200, Offered: 2400, Good: 2400, P99: 500 * ms},                // passes, but above a failure
		{Lane: "b", Load: 50, Offered: 600, Good: 600, Rejected: 7, P99: 400 * ms},      // shed 1.17%: fails
		{Lane: "c", Load: 50, Offered: 600, Good: 600, P99: 100 * ms},
		{Lane: "c", Load: 100, Offered: 1200, Good: 1200, P99: 301 * ms}, // above 3 × 100 ms
	}
	loads := []float64{50, 100, 150, 200}
	for lane, want := range map[string]float64{"a": 100, "b": 0, "c": 50, "d": 0} {
		if got := kneeLoad(rows, lane, loads); got != want {
			t.Errorf("lane %s: knee %v, want %v", lane, got, want)
		}
	}
}

package health_test

import (
	"fmt"

	"github.com/spillwayhq/spillway/health"
)

// A Tracker driven by hand: fall 3, rise 2, starting unhealthy.
func ExampleTracker() {
	tr, _ := health.NewTracker(0, health.ActiveConfig{Fall: 3, Rise: 2})
	for i, ok := range []bool{true, false, false, false, true, true} {
		if tr.Record(float64(2*i), ok) {
			fmt.Printf("t=%2ds healthy=%v\n", 2*i, tr.Healthy())
		}
	}
	// Output:
	// t= 0s healthy=true
	// t= 6s healthy=false
	// t=10s healthy=true
}

// Outlier detection over injected time: the caller applies the decisions
// to its endpoint set (set.Eject and the returns below stand for it).
func ExampleDetector() {
	d, _ := health.NewDetector(health.OutlierConfig{}) // 5 in a row, 30 s, 10%
	d.SetHosts([]string{"10.0.0.1:80", "10.0.0.2:80"})
	for i := range 5 {
		now := 100 + float64(i)/10
		if e := d.Record(now, "10.0.0.1:80", health.HTTPResult(503)); e.Ejected() {
			fmt.Printf("t=%v eject until %v (%v, ×%d)\n", now, e.Until, e.Reason, e.Multiplier)
		}
	}
	for _, now := range []float64{120, 130.4, 131} {
		for _, addr := range d.Tick(now) {
			fmt.Printf("t=%v return %s\n", now, addr)
		}
	}
	// Output:
	// t=100.4 eject until 130.4 (consecutive_gateway_failure, ×1)
	// t=130.4 return 10.0.0.1:80
}

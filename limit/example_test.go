package limit_test

import (
	"fmt"

	"github.com/spillwayhq/spillway/limit"
)

// AIMD with seed 000's defaults: +1/limit per good sample, ×0.9 on a drop
// or on an RTT over twice the 40 ms baseline, at most once per round trip.
func ExampleAIMD() {
	a, err := limit.NewAIMD(limit.AIMDConfig{})
	if err != nil {
		panic(err)
	}
	fmt.Println(a.Limit())
	for i := 1; i <= 20; i++ { // 20 good samples: 20 + about 20 × 1/20
		a.Update(limit.Sample{Now: float64(i) * 0.01, RTT: 0.030})
	}
	fmt.Println(a.Limit())
	fmt.Println(a.Update(limit.Sample{Now: 1, RTT: 0.5, Dropped: true})) // timeout: ×0.9
	fmt.Println(a.Update(limit.Sample{Now: 1.1, RTT: 0.2}))              // started before the cut: ignored
	fmt.Println(a.Update(limit.Sample{Now: 2, RTT: 0.1}))                // slow (> 80 ms): ×0.9
	// Output:
	// 20
	// 20
	// 18
	// 18
	// 16
}

// The enforcer feeds every finished request to the algorithm and admits a
// new one while fewer than Limit() are in flight.
func ExampleGradient() {
	g, err := limit.NewGradient(limit.GradientConfig{InitialLimit: 50})
	if err != nil {
		panic(err)
	}
	now := 0.0
	for i := 0; i < 2000; i++ { // a server that answers in 20 ms, not saturated
		now += 0.001
		g.Update(limit.Sample{Now: now, RTT: 0.020, InFlight: g.Limit()})
	}
	fmt.Println("no-load RTT:", g.NoLoadRTT())
	fmt.Println("grew:", g.Limit() > 50)
	// Output:
	// no-load RTT: 0.02
	// grew: true
}

func ExampleNewVegas() {
	_, err := limit.NewVegas(limit.VegasConfig{Alpha: 6, Beta: 3})
	fmt.Println(err)
	// Output:
	// limit: Beta: must be greater than Alpha (6), got 3
}

package limit_test

import (
	"fmt"

	"github.com/spillwayhq/spillway/limit"
	"github.com/spillwayhq/spillway/shed"
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

// A fixed limit, as a load test measured it: samples do not move it, and
// the Limiter admits while fewer than that many requests are in flight.
func ExampleFixed() {
	alg, err := limit.NewFixed(3)
	if err != nil {
		panic(err)
	}
	fmt.Println(alg.Update(limit.Sample{Now: 1, RTT: 5, Dropped: true}))       // a timeout changes nothing
	l, err := limit.NewLimiter(alg, limit.LimiterConfig{Shares: []float64{1}}) // one class
	if err != nil {
		panic(err)
	}
	var held [4]limit.Ticket
	var admitted [4]bool
	for i := range held {
		held[i], admitted[i] = l.Acquire(2, shed.Critical)
	}
	fmt.Println(admitted)
	for i := range held {
		held[i].Done(2.1, limit.Success) // a refused Ticket's Done does nothing
	}
	fmt.Println("in flight:", l.InFlight())
	_, err = limit.NewFixed(0)
	fmt.Println(err)
	// Output:
	// 3
	// [true true true false]
	// in flight: 0
	// limit: n: must be at least 1, got 0
}

// Gradient2 compares each sample's RTT with a long-term average: while the
// RTT stays near it the limit grows by the queue allowance, when the RTT
// climbs well above it the limit shrinks; it does not grow while fewer than
// half the limit are in flight.
func ExampleGradient2() {
	newG := func() *limit.Gradient2 {
		g, err := limit.NewGradient2(limit.Gradient2Config{}) // starts at 20
		if err != nil {
			panic(err)
		}
		return g
	}

	g := newG()
	now := 0.0
	for i := 0; i < 500; i++ { // 10 ms answers, but only 5 requests in flight
		now += 0.001
		g.Update(limit.Sample{Now: now, RTT: 0.010, InFlight: 5})
	}
	fmt.Println("little used:", g.Limit())

	g = newG()
	for i := 0; i < 500; i++ { // 10 ms answers with the limit in use
		now += 0.001
		g.Update(limit.Sample{Now: now, RTT: 0.010, InFlight: g.Limit()})
	}
	grown := g.Limit()
	fmt.Println("in use, steady RTT, grew:", grown > 20)
	for i := 0; i < 100; i++ { // a queue builds: answers take 50 ms
		now += 0.001
		g.Update(limit.Sample{Now: now, RTT: 0.050, InFlight: g.Limit()})
	}
	fmt.Println("RTT ×5, shrank:", g.Limit() < grown)

	g = newG()
	fmt.Println("a timeout:", g.Update(limit.Sample{Now: 1, RTT: 1, Dropped: true})) // 20 × Backoff 0.9
	// Output:
	// little used: 20
	// in use, steady RTT, grew: true
	// RTT ×5, shrank: true
	// a timeout: 18
}

package brownout_test

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/spillwayhq/spillway/brownout"
)

// Three seconds of responses at 200 ms against a p99 target of 100 ms, then
// three seconds at 50 ms: the level falls by 0.8 per Period, then climbs
// back by 0.05 per Period.
func ExampleDimmer() {
	d, err := brownout.New(brownout.Config{TargetP99: 0.1, Period: 1, Window: 1})
	if err != nil {
		panic(err)
	}
	for sec := range 6 {
		latency := 0.2
		if sec >= 3 {
			latency = 0.05
		}
		for i := range 100 { // 100 requests per second, no queueing
			d.Observe(float64(sec)+float64(i)/100, 0, latency)
		}
		now := float64(sec + 1)
		fmt.Printf("t=%v level %.3f", now, d.Level(now))
		st := d.Stats()
		fmt.Printf(" (p99 %.3f s over %d requests)\n", st.P99, st.Samples)
	}
	// Output:
	// t=1 level 0.800 (p99 0.205 s over 100 requests)
	// t=2 level 0.640 (p99 0.205 s over 100 requests)
	// t=3 level 0.512 (p99 0.205 s over 100 requests)
	// t=4 level 0.562 (p99 0.051 s over 100 requests)
	// t=5 level 0.612 (p99 0.051 s over 100 requests)
	// t=6 level 0.662 (p99 0.051 s over 100 requests)
}

// Middleware decides once per request and stores the decision in the
// context; the handler reads it. A handler called without the middleware
// gets full service.
func ExampleOptionalFrom() {
	handler := func(ctx context.Context) string {
		if brownout.OptionalFrom(ctx) {
			return "page + recommendations"
		}
		return "page"
	}
	d, _ := brownout.New(brownout.Config{TargetWait: 0.05})
	now := 0.0 // in a server: clock.NewReal().Now()
	ctx := brownout.WithOptional(context.Background(), d.Optional(now, rand.Float64()))
	fmt.Println(handler(ctx))                  // a new dimmer is at level 1
	fmt.Println(handler(context.Background())) // no decision: full service
	fmt.Println(handler(brownout.WithOptional(context.Background(), false)))
	// Output:
	// page + recommendations
	// page + recommendations
	// page
}

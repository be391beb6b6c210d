package ratelimit_test

import (
	"fmt"
	"math"

	"github.com/spillwayhq/spillway/ratelimit"
)

// The seed's GCRA example: r = 2, b = 5. Five requests at t = 0 take TAT from
// 0 to 2.5; the sixth sees 2.5 − 0 > τ = 2 and is refused, to retry after
// tat − now − τ = 0.5 s.
func ExampleGCRA() {
	g, err := ratelimit.NewGCRA(ratelimit.Limit{Rate: 2, Burst: 5})
	if err != nil {
		panic(err)
	}
	var s ratelimit.GCRAState // zero value: never seen, full bucket
	for i := 1; i <= 6; i++ {
		d := g.Decide(&s, 0, 1)
		fmt.Printf("request %d: allowed=%v remaining=%d retry-after=%vs\n", i, d.Allowed, d.Remaining, d.RetryAfter)
	}
	fmt.Println("at 0.5 s:", g.Decide(&s, 0.5, 1).Allowed)
	// Output:
	// request 1: allowed=true remaining=4 retry-after=0s
	// request 2: allowed=true remaining=3 retry-after=0s
	// request 3: allowed=true remaining=2 retry-after=0s
	// request 4: allowed=true remaining=1 retry-after=0s
	// request 5: allowed=true remaining=0 retry-after=0s
	// request 6: allowed=false remaining=0 retry-after=0.5s
	// at 0.5 s: true
}

// A token bucket takes cost units per request: here a search costs 5 and an
// export 50, more than the bucket holds, so it can never pass.
func ExampleTokenBucket() {
	tb, err := ratelimit.NewTokenBucket(ratelimit.Limit{Rate: 10, Burst: 20})
	if err != nil {
		panic(err)
	}
	var s ratelimit.TokenBucketState
	for _, cost := range []int{5, 5, 5, 5, 1, 50} {
		d := tb.Decide(&s, 0, cost)
		fmt.Printf("cost %2d: allowed=%-5v remaining=%2d retry-after=%v\n", cost, d.Allowed, d.Remaining, d.RetryAfter)
	}
	d := tb.Decide(&s, 0, 50)
	fmt.Println("cost 50 can never pass:", math.IsInf(d.RetryAfter, 1))
	// Output:
	// cost  5: allowed=true  remaining=15 retry-after=0
	// cost  5: allowed=true  remaining=10 retry-after=0
	// cost  5: allowed=true  remaining= 5 retry-after=0
	// cost  5: allowed=true  remaining= 0 retry-after=0
	// cost  1: allowed=false remaining= 0 retry-after=0.1
	// cost 50: allowed=false remaining= 0 retry-after=+Inf
	// cost 50 can never pass: true
}

// The leaky bucket as a queue smooths a burst: each admitted request gets a
// Delay, one 1/Rate step after the previous one; a full queue refuses.
func ExampleLeakyQueue() {
	q, err := ratelimit.NewLeakyQueue(ratelimit.Limit{Rate: 4, Burst: 2})
	if err != nil {
		panic(err)
	}
	var s ratelimit.LeakyQueueState
	for range 4 {
		d := q.Decide(&s, 0, 1)
		fmt.Printf("allowed=%-5v delay=%v retry-after=%v\n", d.Allowed, d.Delay, d.RetryAfter)
	}
	// Output:
	// allowed=true  delay=0 retry-after=0
	// allowed=true  delay=0.25 retry-after=0
	// allowed=true  delay=0.5 retry-after=0
	// allowed=false delay=0 retry-after=0.25
}

// A fixed window admits twice its limit across a boundary; the sliding
// window counter does not.
func ExampleSlidingCounter() {
	q := ratelimit.Quota{Limit: 4, Window: 60}
	fw, _ := ratelimit.NewFixedWindow(q)
	sc, _ := ratelimit.NewSlidingCounter(q)
	var fs ratelimit.FixedWindowState
	var cs ratelimit.SlidingCounterState
	fixed, counter := 0, 0
	for _, at := range []float64{59, 59, 59, 59, 60, 60, 60, 60} {
		if fw.Decide(&fs, at, 1).Allowed {
			fixed++
		}
		if sc.Decide(&cs, at, 1).Allowed {
			counter++
		}
	}
	fmt.Println("fixed window:", fixed, "sliding counter:", counter)
	// Output: fixed window: 8 sliding counter: 4
}

// A Limiter shares one key's state between goroutines.
func ExampleLimiter() {
	g, err := ratelimit.NewGCRA(ratelimit.Limit{Rate: 1, Burst: 2})
	if err != nil {
		panic(err)
	}
	lim := ratelimit.NewLimiter(g)
	for _, now := range []float64{0, 0, 0, 1} {
		d := lim.Allow(now)
		fmt.Printf("t=%v allowed=%v reset=%v\n", now, d.Allowed, d.Reset)
	}
	// Output:
	// t=0 allowed=true reset=1
	// t=0 allowed=true reset=2
	// t=0 allowed=false reset=2
	// t=1 allowed=true reset=2
}

// The seed's memory estimate: 10 million keys at 100 per minute.
func ExampleStateBytes() {
	const users, keyBytes = 10_000_000, 64
	for _, a := range []ratelimit.Algorithm{ratelimit.AlgSlidingLog, ratelimit.AlgFixedWindow, ratelimit.AlgTokenBucket, ratelimit.AlgGCRA} {
		per := ratelimit.StateBytes(a, 100) + keyBytes
		fmt.Printf("%-13s %4d B/key %6.0f MB\n", a, per, float64(per*users)/1e6)
	}
	// Output:
	// sliding log    864 B/key   8640 MB
	// fixed window    72 B/key    720 MB
	// token bucket    80 B/key    800 MB
	// GCRA            72 B/key    720 MB
}

package ratelimit_test

import (
	"context"
	"fmt"

	"github.com/spillwayhq/spillway/ratelimit"
)

// The seed's rule "user-default": 100 per minute with a burst of 20, per
// user, in memory. Each user has a bucket of their own; a key whose bucket
// is full again is forgotten.
func ExampleNewMemory() {
	m, err := ratelimit.NewMemory(ratelimit.Spec{Rate: 100, Per: 60, Burst: 20}, ratelimit.MemoryConfig{})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for range 20 {
		m.AllowN(ctx, "user:42", 0, 1) // u42 spends the burst at t = 0
	}
	d, _ := m.AllowN(ctx, "user:42", 0, 1)
	fmt.Printf("u42: allowed=%v retry-after=%.1fs\n", d.Allowed, d.RetryAfter)
	d, _ = m.AllowN(ctx, "user:7", 0, 1)
	fmt.Printf("u7:  allowed=%v remaining=%d\n", d.Allowed, d.Remaining)
	fmt.Println("keys held:", m.Len())
	fmt.Println("dropped at t = 13 s:", m.Sweep(13)) // both buckets full again by then
	// Output:
	// u42: allowed=false retry-after=0.6s
	// u7:  allowed=true remaining=19
	// keys held: 2
	// dropped at t = 13 s: 2
}

// Lower classes first: critical traffic keeps the rule's rate whatever the
// health, default traffic scales with it, and sheddable traffic has nothing
// left at half health.
func ExampleMemory_SetHealth() {
	m, err := ratelimit.NewMemory(ratelimit.Spec{Rate: 10, Per: 1, Burst: 10}, ratelimit.MemoryConfig{
		Classes: []ratelimit.ClassCurve{
			{Low: 0, High: 0},   // critical
			{Low: 0, High: 1},   // default: in proportion to health
			{Low: 0.5, High: 1}, // sheddable
		},
	})
	if err != nil {
		panic(err)
	}
	for _, h := range []float64{1, 0.8, 0.4} {
		m.SetHealth(h)
		fmt.Printf("health %.1f: critical %.1f, default %.1f, sheddable %.1f\n", h, m.Scale(0), m.Scale(1), m.Scale(2))
	}
	d := m.AllowClassN("tenant-9", 2, 0, 1)
	fmt.Printf("sheddable request: allowed=%v retry-after=%vs\n", d.Allowed, d.RetryAfter)
	// Output:
	// health 1.0: critical 1.0, default 1.0, sheddable 1.0
	// health 0.8: critical 1.0, default 0.8, sheddable 0.6
	// health 0.4: critical 1.0, default 0.4, sheddable 0.0
	// sheddable request: allowed=false retry-after=1s
}

// A node leases 10 units per round trip from the global store (here a
// Memory standing in for Redis) and spends them locally.
func ExampleNewLeased() {
	global, err := ratelimit.NewMemory(ratelimit.Spec{Rate: 1000, Per: 1}, ratelimit.MemoryConfig{})
	if err != nil {
		panic(err)
	}
	l, err := ratelimit.NewLeased(global, ratelimit.LeaseConfig{Size: 10, Refill: -1, TTL: 0.5})
	if err != nil {
		panic(err)
	}
	for i := range 100 {
		l.AllowN(context.Background(), "tenant-1", float64(i)*0.001, 1)
	}
	st := l.Stats()
	fmt.Printf("100 decisions, %d round trips, %d served locally\n", st.RoundTrips, st.Local)
	// Output:
	// 100 decisions, 10 round trips, 90 served locally
}

// The heavy hitters of a stream: one tenant sends half the traffic.
func ExampleHeavyHitters() {
	h, err := ratelimit.NewHeavyHitters(ratelimit.HotKeysConfig{TopK: 2, Width: 4096})
	if err != nil {
		panic(err)
	}
	for i := range 1000 {
		key := fmt.Sprint("tenant-", i%100)
		if i%2 == 0 {
			key = "tenant-big"
		}
		h.Observe(key, 1, 0)
	}
	for _, hk := range h.Top(nil)[:1] {
		fmt.Printf("%s: at least %d requests\n", hk.Key, hk.Count)
	}
	// Output:
	// tenant-big: at least 500 requests
}

package ratelimit_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/spillwayhq/spillway/ratelimit"
)

// ratelimit's token bucket and GCRA against golang.org/x/time/rate on
// decimal grids: x/time/rate measures elapsed time in integer nanoseconds
// (time.Time), so the float64 timestamps k × step that ratelimit's callers
// pass must get the same decisions from ratelimit as whole-nanosecond
// instants get from x/time/rate.

type gridCase struct {
	name  string
	rate  float64 // per second, as ratelimit.Spec.Limit computes it
	burst int
	step  time.Duration // the grid
	den   float64       // 1/step in seconds: the float timestamp is k × (1/den)
}

var gridCases = []gridCase{
	{"10/s burst 1, 0.1 s grid", 10, 1, 100 * time.Millisecond, 10},
	{"10/s burst 5, 10 ms grid", 10, 5, 10 * time.Millisecond, 100},
	{"3/s burst 4, 10 ms grid", 3, 4, 10 * time.Millisecond, 100},
	{"100/min burst 7, 10 ms grid", 100.0 / 60, 7, 10 * time.Millisecond, 100},
	{"7 per 1.5 s burst 3, 1 ms grid", 7 / 1.5, 3, time.Millisecond, 1000},
}

func TestDecimalGridsAgreeWithXTimeRate(t *testing.T) {
	r := rand.New(rand.NewPCG(10, 2))
	base := time.Unix(1_700_000_000, 0)
	for _, c := range gridCases {
		l := ratelimit.Limit{Rate: c.rate, Burst: c.burst}
		tb, err := ratelimit.NewTokenBucket(l)
		if err != nil {
			t.Fatal(err)
		}
		g, _ := ratelimit.NewGCRA(l)
		x := rate.NewLimiter(rate.Limit(c.rate), c.burst)
		var ts ratelimit.TokenBucketState
		var gs ratelimit.GCRAState
		k, differ, refused := int64(1), 0, 0
		const n = 50_000
		for i := range n {
			if i > 0 && r.IntN(4) != 0 {
				k += r.Int64N(int64(2*c.den/c.rate) + 1) // gaps up to two intervals
			}
			cost := 1
			if c.burst > 1 && r.IntN(3) == 0 {
				cost = 1 + r.IntN(c.burst)
			}
			now := float64(k) * (1 / c.den)
			want := x.AllowN(base.Add(time.Duration(k)*c.step), cost)
			dt, dg := tb.Decide(&ts, now, cost), g.Decide(&gs, now, cost)
			if !want {
				refused++
			}
			if dt.Allowed != want || dg.Allowed != want {
				if differ == 0 {
					t.Errorf("%s: request %d at tick %d cost %d: x/time/rate %v, token bucket %v, GCRA %v",
						c.name, i, k, cost, want, dt.Allowed, dg.Allowed)
				}
				differ++
			}
		}
		if differ != 0 {
			t.Errorf("%s: %d of %d decisions differ", c.name, differ, n)
		}
		if c.burst > 1 && (refused < n/20 || refused > n*19/20) {
			t.Errorf("%s: x/time/rate refused %d of %d: the stream tests too little", c.name, refused, n)
		}
	}
}

package redisstore

import (
	"context"
	"math"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/spillwayhq/spillway/ratelimit"
)

// redisNow reads Redis's clock as the scripts do: seconds + µs/10^6.
func redisNow(t *testing.T, c redis.UniversalClient) float64 {
	t.Helper()
	ts, err := c.Time(context.Background()).Result()
	must(t, err)
	return float64(ts.Unix()) + float64(ts.Nanosecond()/1000)/1000000
}

// TestRedisClock runs each algorithm on Redis's own clock (the production
// path; AllowN's now is garbage on purpose): a burst of 5 passes, the sixth
// request is refused, and its RetryAfter lies where the formula puts it
// given the instants tb and ta read from Redis before and after the burst.
// One unit per slow seconds: the burst passes however long a loaded
// machine takes over it (with one per second, 1 s of delays let a sixth
// request through).
func TestRedisClock(t *testing.T) {
	be := testBackend(t)
	client := newClient(t, be.addr)
	const slow = 1000.0   // seconds per unit
	const bigWindow = 1e6 // seconds: the burst cannot straddle a window boundary (p ≈ 10^-6)
	windowEnd := func(x float64) float64 { return (math.Floor(x/bigWindow) + 1) * bigWindow }
	cases := []struct {
		spec ratelimit.Spec
		// retry returns the bounds of the sixth request's RetryAfter.
		retry func(tb, ta float64) (lo, hi float64)
	}{
		{ratelimit.Spec{Algorithm: ratelimit.AlgGCRA, Rate: 1, Per: slow, Burst: 5},
			func(tb, ta float64) (float64, float64) { return slow - (ta - tb), slow }},
		{ratelimit.Spec{Algorithm: ratelimit.AlgTokenBucket, Rate: 1, Per: slow, Burst: 5},
			func(tb, ta float64) (float64, float64) { return slow - (ta - tb), slow }},
		{ratelimit.Spec{Algorithm: ratelimit.AlgLeakyMeter, Rate: 1, Per: slow, Burst: 5},
			func(tb, ta float64) (float64, float64) { return slow - (ta - tb), slow }},
		// One unit leaves at once, four wait: the sixth waits for the first
		// waiting one, released slow seconds after the first request.
		{ratelimit.Spec{Algorithm: ratelimit.AlgLeakyQueue, Rate: 1, Per: slow, Burst: 4},
			func(tb, ta float64) (float64, float64) { return slow - (ta - tb), slow }},
		{ratelimit.Spec{Algorithm: ratelimit.AlgFixedWindow, Rate: 5, Per: bigWindow},
			func(tb, ta float64) (float64, float64) { return windowEnd(tb) - ta, windowEnd(tb) - tb }},
		{ratelimit.Spec{Algorithm: ratelimit.AlgSlidingLog, Rate: 5, Per: slow},
			func(tb, ta float64) (float64, float64) { return slow - (ta - tb), slow }},
		{ratelimit.Spec{Algorithm: ratelimit.AlgSlidingCounter, Rate: 5, Per: bigWindow},
			func(tb, ta float64) (float64, float64) { return windowEnd(tb) - ta, windowEnd(tb) - tb }},
	}
	for _, tc := range cases {
		t.Run(tc.spec.Algorithm.Name(), func(t *testing.T) {
			st := newStore(t, client, tc.spec, Config{Rule: "clock", Prefix: testPrefix(t), Timeout: 5})
			ctx := context.Background()
			tb := redisNow(t, client)
			var ds []ratelimit.Decision
			for range 6 {
				d, err := st.AllowN(ctx, "k", -123, 1)
				must(t, err)
				ds = append(ds, d)
			}
			ta := redisNow(t, client)
			for i, d := range ds[:5] {
				if !d.Allowed || d.Remaining != 4-i {
					t.Fatalf("request %d: %+v, want allowed with Remaining %d", i, d, 4-i)
				}
			}
			if tc.spec.Algorithm == ratelimit.AlgLeakyQueue {
				for i, d := range ds[:5] {
					if lo, hi := float64(i)*slow-(ta-tb), float64(i)*slow; d.Delay < lo-1e-6 || d.Delay > hi+1e-6 {
						t.Errorf("request %d: Delay %v, want in [%v, %v]", i, d.Delay, lo, hi)
					}
				}
			}
			d := ds[5]
			lo, hi := tc.retry(tb, ta)
			// Redis's clock has 1 µs steps; the bounds are a few µs loose.
			if d.Allowed || d.RetryAfter < lo-1e-5 || d.RetryAfter > hi+1e-5 {
				t.Fatalf("sixth request: %+v, want refused with RetryAfter in [%v, %v]", d, lo, hi)
			}
		})
	}
}

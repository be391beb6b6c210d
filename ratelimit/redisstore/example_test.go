package redisstore_test

import (
	"context"
	"fmt"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/spillwayhq/spillway/ratelimit"
	"github.com/spillwayhq/spillway/ratelimit/redisstore"
)

// A rule of 60 per minute with a burst of 3, on Redis (here a miniredis
// standing in for the server), failing open if Redis is unreachable. The
// fourth request in a row is refused and may retry in about a second.
func Example() {
	srv, err := miniredis.Run()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
	defer rdb.Close()

	st, err := redisstore.New(rdb, ratelimit.Spec{Algorithm: ratelimit.AlgGCRA, Rate: 60, Per: 60, Burst: 3},
		redisstore.Config{Rule: "user-default", Timeout: 0.5}) // a generous timeout for the example
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()
	limit, err := ratelimit.NewGuarded(st, ratelimit.GuardConfig{Mode: ratelimit.FailOpen})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("key:", st.RedisKey("u42"))
	for range 4 {
		// now (0 here) drives the breaker; Redis's own clock decides.
		d, err := limit.AllowN(context.Background(), "u42", 0, 1)
		fmt.Printf("allowed=%v remaining=%d retry≈%.0fs err=%v\n", d.Allowed, d.Remaining, d.RetryAfter, err)
	}
	// Output:
	// key: rl:{u42}:user-default
	// allowed=true remaining=2 retry≈0s err=<nil>
	// allowed=true remaining=1 retry≈0s err=<nil>
	// allowed=true remaining=0 retry≈0s err=<nil>
	// allowed=false remaining=0 retry≈1s err=<nil>
}

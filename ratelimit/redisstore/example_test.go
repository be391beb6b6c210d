package redisstore_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/spillwayhq/spillway/ratelimit"
	"github.com/spillwayhq/spillway/ratelimit/httplimit"
	"github.com/spillwayhq/spillway/ratelimit/redisstore"
	"github.com/spillwayhq/spillway/ratelimit/rules"
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
	srv.SetTime(time.Unix(1_700_000_000, 0)) // Redis's clock stands still: the output cannot depend on the machine's speed
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
	defer rdb.Close()

	st, err := redisstore.New(rdb, ratelimit.Spec{Algorithm: ratelimit.AlgGCRA, Rate: 60, Per: 60, Burst: 3},
		redisstore.Config{Rule: "user-default", Timeout: 5}) // a generous timeout: examples run as tests, on busy machines too
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

// Rules on Redis through the HTTP middleware: Stores.ForRule makes each
// rule's store (Redis keys rl:{key}:rule-id, the rule's fail mode with a
// breaker, a local floor for fail-open rules); the Limiter closes the
// stores it stops using, and all of them at Close.
func ExampleStores() {
	srv, err := miniredis.Run()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	srv.SetTime(time.Unix(1_700_000_000, 0)) // Redis's clock stands still: the output cannot depend on the machine's speed
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
	defer rdb.Close()

	stores, err := redisstore.NewStores(rdb, redisstore.StoresConfig{Store: redisstore.Config{Timeout: 5}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer stores.Close()
	set, err := rules.Parse("rules.yaml", []byte(`rules:
  - {id: per-ip, key: [ip], rate: 3, per: 1m}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	lim, err := httplimit.New(set, httplimit.Config{Store: stores.ForRule})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer lim.Close()
	h := lim.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	for range 4 {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil)) // from 192.0.2.1
		fmt.Println(w.Code, w.Header().Get("RateLimit"))
	}
	fmt.Println(srv.Keys())
	// Output:
	// 200 "per-ip";r=2;t=20
	// 200 "per-ip";r=1;t=40
	// 200 "per-ip";r=0;t=60
	// 429 "per-ip";r=0;t=20
	// [rl:{192.0.2.1}:per-ip]
}

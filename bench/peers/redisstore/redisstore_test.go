package redisstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/spillwayhq/spillway/ratelimit"
	"github.com/spillwayhq/spillway/ratelimit/redisstore"
)

// benchCallers is the number of concurrent callers in the Redis benchmarks.
const benchCallers = 64

// BenchmarkRedisDecisions compares GCRA decisions per second on the same
// real Redis and the same client (go-redis defaults) at 64 concurrent
// callers over 10,000 keys: go-redis/redis_rate (one EVALSHA round trip per
// decision) against this package's Store (auto-batched pipelines). The
// spillway sub-benchmark reports its ratio to redis_rate's rate measured
// just before it (x_redis_rate) and the round trips per decision. It needs
// a real Redis at SPILLWAY_REDIS_ADDR (default 127.0.0.1:6379):
//
//	cd bench/peers && go test -run '^$' -bench . -benchtime 2s -count 3 ./redisstore/
func BenchmarkRedisDecisions(b *testing.B) {
	client := redis.NewClient(&redis.Options{Addr: redisAddr()})
	defer client.Close()
	if err := client.Ping(context.Background()).Err(); err != nil {
		b.Fatalf("no Redis at %s: %v", redisAddr(), err)
	}
	keys := make([]string, 10000)
	for i := range keys {
		keys[i] = "user-" + strconv.Itoa(i)
	}
	par := (benchCallers + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0)
	ctx := context.Background()
	var peer float64 // redis_rate's decisions/s

	b.Run("redis_rate", func(b *testing.B) {
		lim := redis_rate.NewLimiter(client)
		limit := redis_rate.Limit{Rate: 1000, Burst: 1000, Period: time.Second}
		prefix := testPrefix(b) + ":"
		var gid atomic.Int64
		var failed atomic.Int64
		b.ReportAllocs()
		b.SetParallelism(par)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			i := int(gid.Add(1)) * 7919
			for pb.Next() {
				i++
				if _, err := lim.Allow(ctx, prefix+keys[i%len(keys)], limit); err != nil {
					failed.Add(1)
				}
			}
		})
		peer = float64(b.N) / b.Elapsed().Seconds()
		b.ReportMetric(peer, "decisions/s")
		if failed.Load() > 0 {
			b.Fatalf("%d errors", failed.Load())
		}
	})

	b.Run("spillway", func(b *testing.B) {
		st, err := redisstore.New(client, ratelimit.Spec{Algorithm: ratelimit.AlgGCRA, Rate: 1000, Per: 1, Burst: 1000},
			redisstore.Config{Rule: "bench", Prefix: testPrefix(b), Timeout: 1})
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		before := st.Stats()
		var gid atomic.Int64
		var failed atomic.Int64
		b.ReportAllocs()
		b.SetParallelism(par)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			i := int(gid.Add(1)) * 7919
			for pb.Next() {
				i++
				if _, err := st.AllowN(ctx, keys[i%len(keys)], 0, 1); err != nil {
					failed.Add(1)
				}
			}
		})
		dps := float64(b.N) / b.Elapsed().Seconds()
		b.ReportMetric(dps, "decisions/s")
		if peer > 0 {
			b.ReportMetric(dps/peer, "x_redis_rate")
		}
		after := st.Stats()
		b.ReportMetric(float64(after.RoundTrips-before.RoundTrips)/float64(b.N), "roundtrips/decision")
		if failed.Load() > 0 {
			b.Fatalf("%d errors", failed.Load())
		}
	})
}

func redisAddr() string {
	if a := os.Getenv("SPILLWAY_REDIS_ADDR"); a != "" {
		return a
	}
	return "127.0.0.1:6379"
}

// testPrefix is a fresh key prefix, so runs never see each other's keys.
func testPrefix(t testing.TB) string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return "rlbench-" + hex.EncodeToString(b[:])
}

package redisstore

import (
	"context"
	"runtime"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/spillwayhq/spillway/ratelimit"
)

// benchCallers is the number of concurrent callers in the Redis
// benchmarks.
const benchCallers = 64

// threeRules makes the rule stores of BenchmarkThreeRules.
func threeRules(b *testing.B, client *redis.Client) (*Stores, [3]ratelimit.Keyed) {
	stores, err := NewStores(client, StoresConfig{Store: Config{Prefix: testPrefix(b), Timeout: 1}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { stores.Close() })
	var rss [3]ratelimit.Keyed
	for i, src := range []string{"{id: user, key: [user], rate: 1000, per: 1s}", "{id: ip, key: [ip], rate: 1000, per: 1s}",
		"{id: tenant, key: [tenant], rate: 100000, per: 1s}"} {
		if rss[i], err = stores.ForRule(ruleOf(b, src)); err != nil {
			b.Fatal(err)
		}
	}
	if err := rss[0].(*RuleStore).Redis().Load(context.Background()); err != nil {
		b.Fatal(err)
	}
	return stores, rss
}

// decideAlone decides items one after another, each by its store's AllowN:
// a round trip (and a timeout) each.
func decideAlone(items []ratelimit.JointItem) error {
	for i := range items {
		it := &items[i]
		if it.Decision, it.Err = it.Store.AllowN(context.Background(), it.Key, 0, 1); it.Err != nil {
			return it.Err
		}
	}
	return nil
}

// benchParallelism is the b.SetParallelism that runs benchCallers
// goroutines.
func benchParallelism() int {
	return (benchCallers + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0)
}

// benchClient returns a client (go-redis defaults) of the real Redis at
// SPILLWAY_REDIS_ADDR, closed when b ends, or skips b without one:
// miniredis numbers mean nothing.
func benchClient(b *testing.B) *redis.Client {
	addr := sharedRedisAddr()
	if addr == "" {
		b.Skip("no real Redis at SPILLWAY_REDIS_ADDR: miniredis numbers mean nothing")
	}
	client := redis.NewClient(&redis.Options{Addr: addr})
	b.Cleanup(func() { client.Close() })
	return client
}

// BenchmarkThreeRules decides requests that match three Redis rules
// (GCRA; keyed by user, IP and tenant over 10,000 users) on the real Redis
// at SPILLWAY_REDIS_ADDR, two ways in the same run:
//
//	alone  the rules one after another, each its own decision (three
//	       AllowN: three waits for a round trip, as before the joint path)
//	joint  all three in one Stores.AllowJoint (one round trip)
//
// at 64 concurrent callers (decisions/s, three per request, and round
// trips per request) and at 1 caller (p50 and p99 of a request's latency,
// µs). Skipped without a real Redis: miniredis numbers mean nothing.
//
//	go test -run '^$' -bench ThreeRules -benchtime 2s -count 3 ./ratelimit/redisstore/
func BenchmarkThreeRules(b *testing.B) {
	client := benchClient(b)
	var pipes pipelines
	client.AddHook(&pipes)
	stores, rss := threeRules(b, client)
	keys := make([][3]string, 10000)
	for i := range keys {
		keys[i] = [3]string{"u" + strconv.Itoa(i), "10.0." + strconv.Itoa(i/256) + "." + strconv.Itoa(i%256), "t" + strconv.Itoa(i%100)}
	}
	decide := map[string]func(items []ratelimit.JointItem) error{"alone": decideAlone, "joint": func(items []ratelimit.JointItem) error {
		stores.AllowJoint(context.Background(), 0, items)
		for _, it := range items {
			if it.Err != nil {
				return it.Err
			}
		}
		return nil
	}}
	request := func(items []ratelimit.JointItem, i int) []ratelimit.JointItem {
		items = items[:0]
		for r, k := range keys[i%len(keys)] {
			items = append(items, ratelimit.JointItem{Store: rss[r], Key: k, Cost: 1})
		}
		return items
	}
	par := benchParallelism()
	for _, mode := range []string{"alone", "joint"} {
		b.Run(mode+"/callers=64", func(b *testing.B) {
			var gid, failed atomic.Int64
			before := pipes.n.Load()
			b.ReportAllocs()
			b.SetParallelism(par)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := int(gid.Add(1)) * 7919
				items := make([]ratelimit.JointItem, 0, 3)
				for pb.Next() {
					i++
					items = request(items, i)
					if decide[mode](items) != nil {
						failed.Add(1)
					}
				}
			})
			b.ReportMetric(3*float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
			b.ReportMetric(float64(pipes.n.Load()-before)/float64(b.N), "roundtrips/request")
			if failed.Load() > 0 {
				b.Fatalf("%d errors", failed.Load())
			}
		})
	}
	for _, mode := range []string{"alone", "joint"} {
		b.Run(mode+"/callers=1", func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			items := make([]ratelimit.JointItem, 0, 3)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				items = request(items, i*7919)
				start := time.Now()
				if err := decide[mode](items); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50_µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99_µs")
		})
	}
}

package ratelimit_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/spillwayhq/spillway/ratelimit"
)

// The keyed store's comparisons with x/time/rate (one limiter per key in a
// sync.Map) live in the side module bench/peers (see its README). These are
// the benchmarks without a peer.

var (
	memSink    ratelimit.Decision
	benchStart atomic.Uint64
)

// benchOffset gives each RunParallel goroutine its own place in a sequence.
func benchOffset() int { return int(benchStart.Add(1) * 7919 * 1021) }

// BenchmarkLeasedRoundTrips reports the global store's round trips per
// decision with leases of 10, from parallel goroutines on 16 hot keys.
func BenchmarkLeasedRoundTrips(b *testing.B) {
	global, _ := ratelimit.NewMemory(ratelimit.Spec{Rate: 1e9, Per: 1, Burst: 1e9}, ratelimit.MemoryConfig{})
	counted := &benchCounting{inner: global}
	l, _ := ratelimit.NewLeased(counted, ratelimit.LeaseConfig{Size: 10})
	keys := make([]string, 16)
	for i := range keys {
		keys[i] = fmt.Sprint("tenant-", i)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := benchOffset()
		for pb.Next() {
			memSink, _ = l.AllowN(ctx, keys[i&15], 1, 1)
			i++
		}
	})
	b.ReportMetric(float64(counted.calls.Load())/float64(b.N), "round-trips/op")
}

type benchCounting struct {
	inner ratelimit.Keyed
	calls atomic.Int64
}

func (c *benchCounting) AllowN(ctx context.Context, key string, now float64, cost int) (ratelimit.Decision, error) {
	c.calls.Add(1)
	return c.inner.AllowN(ctx, key, now, cost)
}

// BenchmarkHeavyHittersObserve is the hot path of the hot-key tracker on a
// Zipf stream (most observations are of tracked keys).
func BenchmarkHeavyHittersObserve(b *testing.B) {
	h, _ := ratelimit.NewHeavyHitters(ratelimit.HotKeysConfig{})
	r := rand.New(rand.NewPCG(3, 4))
	z := rand.NewZipf(r, 1.2, 1, 9999)
	stream := make([]string, 1<<16)
	for i := range stream {
		stream[i] = fmt.Sprint("tenant-", z.Uint64())
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := benchOffset()
		for pb.Next() {
			h.Observe(stream[i&(1<<16-1)], 1, 0)
			i++
		}
	})
}

package limit_test

// Benchmarks of limit.Limiter against github.com/platinummonkey/go-concurrency-limits
// v0.6.0 ("the peer"), in one run so both sides see the same machine:
//
//	cd bench/peers && go test -run '^$' -bench 'AcquireRelease|Reject' -benchmem -count=5 ./limit/
//
// Each pair is spillway-NAME against peer-NAME. How the two sides are set up,
// and what still differs:
//
//   - Both enforce without waiting: ours is Limiter.Acquire (refuses at once);
//     the peer's is limiter.DefaultLimiter with strategy.SimpleStrategy (one
//     counter; Acquire returns (nil, false) at once — the blocking variants
//     BlockingLimiter, FifoBlockingLimiter and LifoBlockingLimiter are not
//     used). Ours is configured with a single class (Shares {1}), matching the
//     peer's single counter.
//   - No logging and no metrics on either side: the peer gets NoopLimitLogger
//     and EmptyMetricRegistry (its per-sample metric calls remain as calls
//     into no-op listeners).
//   - Time: ours is given now from a counter advancing 1 µs per operation
//     (every sample has RTT 1 µs, injected); the peer reads time.Now itself
//     (at Acquire, at OnSuccess, and once more when it adds the sample to its
//     window), which is part of its measured cost and gives it RTTs of a few
//     tens of nanoseconds.
//   - Feeding the algorithm: ours feeds every Success to the algorithm. The
//     peer's DefaultLimiter aggregates samples into a window and calls the
//     algorithm once per window; with its defaults (RTTs under 100 µs
//     discarded, 1 s windows) no sample of this benchmark would ever reach
//     it. So the peer is configured as close to "fed on release" as its
//     validation allows: minRTTThreshold 0 (every release is recorded into
//     the window), window times 1 ns, windowSize 10 (its minimum), so its
//     algorithm runs on every 11th release, with the window's minimum RTT.
//   - Algorithms are configured alike where both have the knob: initial
//     limit 20, maximum 1000 (the peer's AIMD has no maximum), minimum 1,
//     backoff 0.9; otherwise each side's defaults.
//   - One goroutine keeps one request in flight, so Gradient2 and Vegas on
//     both sides skip growth (fewer than half the limit in flight); our AIMD
//     still climbs by 1/limit per success towards 1000, the peer's only grows
//     when the limit is reached. This measures per-request overhead, not the
//     algorithms' dynamics.

import (
	"context"
	"sync/atomic"
	"testing"

	pcore "github.com/platinummonkey/go-concurrency-limits/core"
	plimit "github.com/platinummonkey/go-concurrency-limits/limit"
	plimiter "github.com/platinummonkey/go-concurrency-limits/limiter"
	pstrategy "github.com/platinummonkey/go-concurrency-limits/strategy"

	"github.com/spillwayhq/spillway/limit"
	"github.com/spillwayhq/spillway/shed"
)

// benchTick is how far the injected clock advances per operation: 1 µs.
const benchTick = 1e-6

// peerPair names one algorithm and builds it on both sides.
type peerPair struct {
	name string
	ours func() (limit.Algorithm, error)
	peer func() pcore.Limit
}

var peerPairs = []peerPair{
	{
		name: "fixed",
		ours: func() (limit.Algorithm, error) { return limit.NewFixed(1000) },
		peer: func() pcore.Limit {
			return plimit.NewFixedLimit("bench", 1000, pcore.EmptyMetricRegistryInstance)
		},
	},
	{
		name: "gradient2",
		ours: func() (limit.Algorithm, error) {
			return limit.NewGradient2(limit.Gradient2Config{InitialLimit: 20, MinLimit: 1, MaxLimit: 1000})
		},
		peer: func() pcore.Limit {
			l, err := plimit.NewGradient2Limit("bench", 20, 1000, 1, nil, 0.2, 600,
				plimit.NoopLimitLogger{}, pcore.EmptyMetricRegistryInstance)
			if err != nil {
				panic(err)
			}
			return l
		},
	},
	{
		name: "vegas",
		ours: func() (limit.Algorithm, error) {
			return limit.NewVegas(limit.VegasConfig{InitialLimit: 20, MinLimit: 1, MaxLimit: 1000})
		},
		peer: func() pcore.Limit {
			return plimit.NewDefaultVegasLimitWithLimit("bench", 20,
				plimit.NoopLimitLogger{}, pcore.EmptyMetricRegistryInstance)
		},
	},
	{
		name: "aimd",
		ours: func() (limit.Algorithm, error) {
			return limit.NewAIMD(limit.AIMDConfig{InitialLimit: 20, MinLimit: 1, MaxLimit: 1000, Backoff: 0.9})
		},
		peer: func() pcore.Limit {
			return plimit.NewAIMDLimit("bench", 20, 0.9, 1, pcore.EmptyMetricRegistryInstance)
		},
	},
}

// newOurs builds a single-class Limiter over alg.
func newOurs(b *testing.B, mk func() (limit.Algorithm, error)) *limit.Limiter {
	b.Helper()
	alg, err := mk()
	if err != nil {
		b.Fatal(err)
	}
	l, err := limit.NewLimiter(alg, limit.LimiterConfig{Shares: []float64{1}})
	if err != nil {
		b.Fatal(err)
	}
	return l
}

// newPeer builds the peer's non-blocking DefaultLimiter over lim with a
// SimpleStrategy, no logging and no metrics, feeding its algorithm as often
// as its configuration allows (see the file comment).
func newPeer(tb testing.TB, lim pcore.Limit) *plimiter.DefaultLimiter {
	tb.Helper()
	const (
		minWindow  = 1  // ns
		maxWindow  = 1  // ns
		minRTT     = 0  // ns: record every release
		windowSize = 10 // the peer's minimum
		startLimit = 1  // replaced by lim's limit in NewDefaultLimiter
	)
	l, err := plimiter.NewDefaultLimiter(lim, minWindow, maxWindow, minRTT, windowSize,
		pstrategy.NewSimpleStrategyWithMetricRegistry(startLimit, pcore.EmptyMetricRegistryInstance),
		plimit.NoopLimitLogger{}, pcore.EmptyMetricRegistryInstance)
	if err != nil {
		tb.Fatal(err)
	}
	return l
}

// BenchmarkAcquireRelease: one goroutine, acquire then release with success,
// the algorithm fed on release.
func BenchmarkAcquireRelease(b *testing.B) {
	for _, p := range peerPairs {
		b.Run("spillway-"+p.name, func(b *testing.B) {
			l := newOurs(b, p.ours)
			b.ReportAllocs()
			now := 0.0
			for b.Loop() {
				t, ok := l.Acquire(now, shed.Critical)
				if !ok {
					b.Fatal("refused with nothing in flight")
				}
				now += benchTick
				t.Done(now, limit.Success)
			}
		})
		b.Run("peer-"+p.name, func(b *testing.B) {
			l := newPeer(b, p.peer())
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				lis, ok := l.Acquire(ctx)
				if !ok {
					b.Fatal("refused with nothing in flight")
				}
				lis.OnSuccess()
			}
		})
	}
}

// BenchmarkAcquireReleaseParallel: the same under b.RunParallel (GOMAXPROCS
// goroutines). An adaptive limit may fall low enough to refuse a request
// when several are in flight; refusals are counted, not failed, and
// reported as refused/op (a refused operation is cheaper than an admitted
// one, so a side with many refusals looks faster than it is).
func BenchmarkAcquireReleaseParallel(b *testing.B) {
	for _, p := range peerPairs {
		b.Run("spillway-"+p.name, func(b *testing.B) {
			l := newOurs(b, p.ours)
			var refused atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				// Each goroutine has its own injected clock, advancing 1 µs
				// per operation as the others do; samples reach the
				// algorithm slightly out of order, as real ones would.
				now, n := 0.0, int64(0)
				for pb.Next() {
					t, ok := l.Acquire(now, shed.Critical)
					now += benchTick
					if !ok {
						n++
						continue
					}
					t.Done(now, limit.Success)
				}
				refused.Add(n)
			})
			b.ReportMetric(float64(refused.Load())/float64(b.N), "refused/op")
		})
		b.Run("peer-"+p.name, func(b *testing.B) {
			l := newPeer(b, p.peer())
			var refused atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				n := int64(0)
				for pb.Next() {
					lis, ok := l.Acquire(ctx)
					if !ok {
						n++
						continue
					}
					lis.OnSuccess()
				}
				refused.Add(n)
			})
			b.ReportMetric(float64(refused.Load())/float64(b.N), "refused/op")
		})
	}
}

// BenchmarkReject: limit 1 with one request held, so every Acquire is
// refused. The algorithm plays no part in a refusal on either side, so only
// the fixed limit is measured.
func BenchmarkReject(b *testing.B) {
	b.Run("spillway-fixed", func(b *testing.B) {
		l := newOurs(b, func() (limit.Algorithm, error) { return limit.NewFixed(1) })
		held, ok := l.Acquire(0, shed.Critical)
		if !ok {
			b.Fatal("first request refused")
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := l.Acquire(0, shed.Critical); ok {
				b.Fatal("admitted over the limit")
			}
		}
		held.Done(benchTick, limit.Success)
	})
	b.Run("peer-fixed", func(b *testing.B) {
		l := newPeer(b, plimit.NewFixedLimit("bench", 1, pcore.EmptyMetricRegistryInstance))
		ctx := context.Background()
		held, ok := l.Acquire(ctx)
		if !ok {
			b.Fatal("first request refused")
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := l.Acquire(ctx); ok {
				b.Fatal("admitted over the limit")
			}
		}
		held.OnSuccess()
	})
}

// BenchmarkRejectParallel: the refusal path under b.RunParallel, where all
// goroutines refuse against the same full limiter.
func BenchmarkRejectParallel(b *testing.B) {
	b.Run("spillway-fixed", func(b *testing.B) {
		l := newOurs(b, func() (limit.Algorithm, error) { return limit.NewFixed(1) })
		held, ok := l.Acquire(0, shed.Critical)
		if !ok {
			b.Fatal("first request refused")
		}
		var admitted atomic.Bool
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, ok := l.Acquire(0, shed.Critical); ok {
					admitted.Store(true)
				}
			}
		})
		b.StopTimer()
		if admitted.Load() {
			b.Fatal("admitted over the limit")
		}
		held.Done(benchTick, limit.Success)
	})
	b.Run("peer-fixed", func(b *testing.B) {
		l := newPeer(b, plimit.NewFixedLimit("bench", 1, pcore.EmptyMetricRegistryInstance))
		held, ok := l.Acquire(context.Background())
		if !ok {
			b.Fatal("first request refused")
		}
		var admitted atomic.Bool
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			ctx := context.Background()
			for pb.Next() {
				if _, ok := l.Acquire(ctx); ok {
					admitted.Store(true)
				}
			}
		})
		b.StopTimer()
		if admitted.Load() {
			b.Fatal("admitted over the limit")
		}
		held.OnSuccess()
	})
}

// countingLimit counts the samples the peer's limiter feeds its algorithm.
type countingLimit struct {
	pcore.Limit
	samples int // guarded by the peer limiter's mutex
}

func (c *countingLimit) OnSample(startTime, rtt int64, inFlight int, didDrop bool) {
	c.samples++
	c.Limit.OnSample(startTime, rtt, inFlight, didDrop)
}

// TestPeerBenchFeedsAlgorithm checks the premise of the peer benchmarks: with
// newPeer's configuration the peer's algorithm is fed on release, once per
// window of more than windowSize (10) samples, so 220 releases feed it at
// least once and at most 220/11 = 20 times. (Under the peer's defaults it
// would be fed 0 times: these RTTs are far below its 100 µs threshold.)
func TestPeerBenchFeedsAlgorithm(t *testing.T) {
	c := &countingLimit{Limit: plimit.NewFixedLimit("bench", 1000, pcore.EmptyMetricRegistryInstance)}
	l := newPeer(t, c)
	for range 220 {
		lis, ok := l.Acquire(context.Background())
		if !ok {
			t.Fatal("refused with nothing in flight")
		}
		lis.OnSuccess()
	}
	if c.samples < 1 || c.samples > 20 {
		t.Fatalf("algorithm fed %d times over 220 releases, want 1 to 20", c.samples)
	}
}

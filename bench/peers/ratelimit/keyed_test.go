package ratelimit_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spillwayhq/spillway/ratelimit"
	"golang.org/x/time/rate"
)

// The keyed benchmarks compare the in-memory store with its peer, a sync.Map
// of golang.org/x/time/rate limiters (one per key, created in advance), in
// the same run:
//
//	cd bench/peers && go test ./ratelimit/ -run '^$' -bench 'Keyed' -benchtime=1s -count=3
//
// Both decide a bucket of 1000/s with a burst of 1000 per key at a fixed
// instant, so every decision is an allowed one on an existing key. Each
// operation takes the next key of a precomputed random sequence (each
// goroutine starting at its own offset); the sequence's strings are copies
// of the stored keys, as a server's requests carry keys of their own, so
// neither store finds its key by pointer equality. The ratio is the peer's
// ns/op over the store's. spillway-memory is the default (hashed) table,
// spillway-memory-exact the exact-key one (MemoryConfig.ExactKeys).

const (
	benchKeys    = 1_000_000
	benchSeqLen  = 1 << 21
	benchKeyRate = 1000
)

var (
	benchOnce  sync.Once
	benchSeq   []string          // keys to decide, in a random order
	benchMem   *ratelimit.Memory // hashed table (the default)
	benchExact *ratelimit.Memory // exact-key table
	benchPeer  sync.Map
	benchT0    = time.Unix(1_700_000_000, 0)
	memSink    ratelimit.Decision
	peerSink   bool
	benchStart atomic.Uint64
)

// benchKeyName is a 16-byte key, so a key string is one 16-byte allocation.
func benchKeyName(i int) string { return fmt.Sprintf("user:%011d", i) }

func benchSetup(b *testing.B) {
	benchOnce.Do(func() {
		spec := ratelimit.Spec{Rate: benchKeyRate, Per: 1, Burst: benchKeyRate}
		m, err := ratelimit.NewMemory(spec, ratelimit.MemoryConfig{})
		if err != nil {
			panic(err)
		}
		exact, err := ratelimit.NewMemory(spec, ratelimit.MemoryConfig{ExactKeys: true})
		if err != nil {
			panic(err)
		}
		lookup := make([]string, benchKeys)
		for i := range lookup {
			k := benchKeyName(i)
			m.AllowN(context.Background(), k, 1000, 1)
			exact.AllowN(context.Background(), k, 1000, 1) // the store copies the key
			benchPeer.Store(k, rate.NewLimiter(benchKeyRate, benchKeyRate))
			lookup[i] = strings.Clone(k)
		}
		r := rand.New(rand.NewPCG(1, 2))
		benchSeq = make([]string, benchSeqLen)
		for i := range benchSeq {
			benchSeq[i] = lookup[r.IntN(benchKeys)]
		}
		benchMem, benchExact = m, exact
		runtime.GC()
	})
	b.ReportAllocs()
	b.ResetTimer()
}

// benchOffset gives each RunParallel goroutine its own place in the sequence.
func benchOffset() int {
	return int(benchStart.Add(1) * 7919 * 1021 % benchSeqLen)
}

func BenchmarkKeyed1MParallel(b *testing.B) {
	b.Run("spillway-memory", func(b *testing.B) {
		benchSetup(b)
		ctx := context.Background()
		b.RunParallel(func(pb *testing.PB) {
			i := benchOffset()
			var d ratelimit.Decision
			for pb.Next() {
				d, _ = benchMem.AllowN(ctx, benchSeq[i&(benchSeqLen-1)], 1000, 1)
				i++
			}
			memSink = d
		})
	})
	b.Run("spillway-memory-exact", func(b *testing.B) {
		benchSetup(b)
		ctx := context.Background()
		b.RunParallel(func(pb *testing.PB) {
			i := benchOffset()
			var d ratelimit.Decision
			for pb.Next() {
				d, _ = benchExact.AllowN(ctx, benchSeq[i&(benchSeqLen-1)], 1000, 1)
				i++
			}
			memSink = d
		})
	})
	b.Run("x-time-rate-sync-map", func(b *testing.B) {
		benchSetup(b)
		b.RunParallel(func(pb *testing.PB) {
			i := benchOffset()
			ok := false
			for pb.Next() {
				v, _ := benchPeer.Load(benchSeq[i&(benchSeqLen-1)])
				ok = v.(*rate.Limiter).AllowN(benchT0, 1)
				i++
			}
			peerSink = ok
		})
	})
}

// BenchmarkKeyed1KParallel is the same over 1,000 keys, which stay in the
// CPU caches: the decision's own cost rather than the memory's latency.
// Each key takes thousands of decisions at the fixed instant here, so the
// buckets hold 10^9 to keep every decision an allowed one.
func BenchmarkKeyed1KParallel(b *testing.B) {
	keys := make([]string, 1000)
	m, _ := ratelimit.NewMemory(ratelimit.Spec{Rate: 1e9, Per: 1, Burst: 1e9}, ratelimit.MemoryConfig{})
	var peer sync.Map
	for i := range keys {
		k := benchKeyName(i)
		m.AllowN(context.Background(), k, 1000, 1)
		peer.Store(k, rate.NewLimiter(1e9, 1e9))
		keys[i] = strings.Clone(k)
	}
	b.Run("spillway-memory", func(b *testing.B) {
		ctx := context.Background()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := benchOffset()
			var d ratelimit.Decision
			for pb.Next() {
				d, _ = m.AllowN(ctx, keys[(i*7)%1000], 1000, 1)
				i++
			}
			memSink = d
		})
	})
	b.Run("x-time-rate-sync-map", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := benchOffset()
			ok := false
			for pb.Next() {
				v, _ := peer.Load(keys[(i*7)%1000])
				ok = v.(*rate.Limiter).AllowN(benchT0, 1)
				i++
			}
			peerSink = ok
		})
	})
}

// BenchmarkKeyedOneKeyParallel is every goroutine on one key: the shard
// lock (or the limiter's mutex) is the contended part.
func BenchmarkKeyedOneKeyParallel(b *testing.B) {
	b.Run("spillway-memory", func(b *testing.B) {
		m, _ := ratelimit.NewMemory(ratelimit.Spec{Rate: 1e9, Per: 1, Burst: 1e9}, ratelimit.MemoryConfig{})
		ctx := context.Background()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			var d ratelimit.Decision
			for pb.Next() {
				d, _ = m.AllowN(ctx, "tenant:42", 1000, 1)
			}
			memSink = d
		})
	})
	b.Run("x-time-rate-sync-map", func(b *testing.B) {
		var peer sync.Map
		peer.Store("tenant:42", rate.NewLimiter(1e9, 1e9))
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			ok := false
			for pb.Next() {
				v, _ := peer.Load("tenant:42")
				ok = v.(*rate.Limiter).AllowN(benchT0, 1)
			}
			peerSink = ok
		})
	})
}

// BenchmarkKeyedBytesPerIdleKey inserts b.N idle keys (16-byte strings) and
// reports the heap they take per key, beyond the copy of the key string the
// store keeps (16 bytes for the exact-key table and the peer; the hashed
// table keeps none, so its figure is its whole cost). Run it with
// -benchtime=1000000x for the million-key figure.
func BenchmarkKeyedBytesPerIdleKey(b *testing.B) {
	measure := func(b *testing.B, stored int, insert func(keys []string) any) {
		keys := make([]string, b.N)
		for i := range keys {
			keys[i] = benchKeyName(i)
		}
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		b.ResetTimer()
		store := insert(keys)
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(b.N)-float64(stored), "B/key")
		runtime.KeepAlive(store)
		runtime.KeepAlive(keys)
	}
	for _, mode := range []struct {
		name  string
		exact bool
	}{{"spillway-memory-gcra", false}, {"spillway-memory-gcra-exact", true}} {
		b.Run(mode.name, func(b *testing.B) {
			stored := 0
			if mode.exact {
				stored = 16
			}
			measure(b, stored, func(keys []string) any {
				m, _ := ratelimit.NewMemory(ratelimit.Spec{Rate: 1, Per: 60},
					ratelimit.MemoryConfig{MaxKeys: max(len(keys), 1<<10), ExactKeys: mode.exact})
				for _, k := range keys {
					m.AllowN(context.Background(), k, 0, 1)
				}
				return m
			})
		})
	}
	b.Run("x-time-rate-sync-map", func(b *testing.B) {
		measure(b, 16, func(keys []string) any {
			var peer sync.Map
			for _, k := range keys {
				lim := rate.NewLimiter(1.0/60, 1)
				lim.AllowN(benchT0, 1)
				peer.Store(strings.Clone(k), lim)
			}
			return &peer
		})
	})
}

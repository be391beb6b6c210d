package ratelimit_test

import (
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/spillwayhq/spillway/ratelimit"
)

// The reference points for the main module's BenchmarkGCRA, BenchmarkTokenBucket
// and friends (ratelimit/bench_test.go): the same limit and time step.
const (
	benchRate  = 100
	benchBurst = 20
)

var xsink bool

// BenchmarkXTimeRateAllowN is golang.org/x/time/rate's AllowN(t, 1) with a
// fixed time, as in its own BenchmarkAllowN: the reference point for
// ratelimit's BenchmarkGCRA and the others.
func BenchmarkXTimeRateAllowN(b *testing.B) {
	lim := rate.NewLimiter(benchRate, benchBurst)
	t := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		xsink = lim.AllowN(t, 1)
	}
}

// BenchmarkXTimeRateAllowNStepping steps the time like ratelimit's benchmarks
// (1/150 s per request).
func BenchmarkXTimeRateAllowNStepping(b *testing.B) {
	lim := rate.NewLimiter(benchRate, benchBurst)
	t := time.Now()
	step := time.Second / 150
	b.ReportAllocs()
	for b.Loop() {
		t = t.Add(step)
		xsink = lim.AllowN(t, 1)
	}
}

var sink bool

// BenchmarkSpillwayGCRAStepping and BenchmarkSpillwayTokenBucketStepping are
// ratelimit's GCRA and token bucket on the same limit and step, so that one
// run of this package gives both sides.
func BenchmarkSpillwayGCRAStepping(b *testing.B) {
	g, _ := ratelimit.NewGCRA(ratelimit.Limit{Rate: benchRate, Burst: benchBurst})
	var s ratelimit.GCRAState
	now := 0.0
	b.ReportAllocs()
	for b.Loop() {
		now += 1.0 / 150
		sink = g.Decide(&s, now, 1).Allowed
	}
}

func BenchmarkSpillwayTokenBucketStepping(b *testing.B) {
	tb, _ := ratelimit.NewTokenBucket(ratelimit.Limit{Rate: benchRate, Burst: benchBurst})
	var s ratelimit.TokenBucketState
	now := 0.0
	b.ReportAllocs()
	for b.Loop() {
		now += 1.0 / 150
		sink = tb.Decide(&s, now, 1).Allowed
	}
}

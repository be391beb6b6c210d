package ratelimit_test

import (
	"testing"

	"github.com/spillwayhq/spillway/ratelimit"
)

// The benchmarks decide with the state in place and now stepping by a fixed
// amount per request: 1/150 s against a limit of 100/s, so about a third of
// the decisions are refusals (which compute Retry-After). Compare with
// x/time/rate's AllowN, in the side module bench/peers (ratelimit/xtimerate_test.go).

const (
	benchRate  = 100
	benchBurst = 20
	benchStep  = 1.0 / 150
)

var (
	benchLimit = ratelimit.Limit{Rate: benchRate, Burst: benchBurst}
	benchQuota = ratelimit.Quota{Limit: benchBurst, Window: float64(benchBurst) / benchRate}
	sink       ratelimit.Decision
)

func benchDecide[S any](b *testing.B, alg ratelimit.Decider[S]) {
	var s S
	now := 0.0
	b.ReportAllocs()
	for b.Loop() {
		now += benchStep
		sink = alg.Decide(&s, now, 1)
	}
}

func BenchmarkGCRA(b *testing.B) {
	g, _ := ratelimit.NewGCRA(benchLimit)
	benchDecide(b, g)
}

func BenchmarkTokenBucket(b *testing.B) {
	tb, _ := ratelimit.NewTokenBucket(benchLimit)
	benchDecide(b, tb)
}

func BenchmarkLeakyMeter(b *testing.B) {
	m, _ := ratelimit.NewLeakyMeter(benchLimit)
	benchDecide(b, m)
}

func BenchmarkLeakyQueue(b *testing.B) {
	q, _ := ratelimit.NewLeakyQueue(benchLimit)
	benchDecide(b, q)
}

func BenchmarkFixedWindow(b *testing.B) {
	fw, _ := ratelimit.NewFixedWindow(benchQuota)
	benchDecide(b, fw)
}

func BenchmarkSlidingLog(b *testing.B) {
	sl, _ := ratelimit.NewSlidingLog(benchQuota)
	benchDecide(b, sl)
}

func BenchmarkSlidingCounter(b *testing.B) {
	sc, _ := ratelimit.NewSlidingCounter(benchQuota)
	benchDecide(b, sc)
}

// BenchmarkGCRAAllowOnly steps at the rate, so every decision is allowed.
func BenchmarkGCRAAllowOnly(b *testing.B) {
	g, _ := ratelimit.NewGCRA(benchLimit)
	var s ratelimit.GCRAState
	now := 0.0
	b.ReportAllocs()
	for b.Loop() {
		now += 1.0 / benchRate
		sink = g.Decide(&s, now, 1)
	}
}

// BenchmarkGCRADenyOnly decides at one instant after the burst is spent, so
// every decision is a refusal with its Retry-After.
func BenchmarkGCRADenyOnly(b *testing.B) {
	g, _ := ratelimit.NewGCRA(benchLimit)
	var s ratelimit.GCRAState
	for range benchBurst {
		g.Decide(&s, 1, 1)
	}
	b.ReportAllocs()
	for b.Loop() {
		sink = g.Decide(&s, 1, 1)
	}
}

func BenchmarkLimiterGCRA(b *testing.B) {
	g, _ := ratelimit.NewGCRA(benchLimit)
	lim := ratelimit.NewLimiter(g)
	now := 0.0
	b.ReportAllocs()
	for b.Loop() {
		now += benchStep
		sink = lim.AllowN(now, 1)
	}
}

func BenchmarkLimiterTokenBucket(b *testing.B) {
	tb, _ := ratelimit.NewTokenBucket(benchLimit)
	lim := ratelimit.NewLimiter(tb)
	now := 0.0
	b.ReportAllocs()
	for b.Loop() {
		now += benchStep
		sink = lim.AllowN(now, 1)
	}
}

package ratelimit

import (
	"math"
	"testing"
)

// agreeLimits are bucket limits for the agreement tests: exact lattices of
// several kinds (m = 1, 3, 7, 11), one rounded (m = 1024), and a fast one.
var agreeLimits = []Limit{
	{10, 5}, {3, 4}, {100.0 / 60, 7}, {7 / 1.5, 3}, {11, 13}, {0.5, 1}, {math.Pi * 100, 9}, {1e10, 1000},
}

// While the clock runs forward, GCRA, the token bucket and the leaky meter
// make the same decisions, field for field (the package doc's claim), on
// decimal timestamps and at a base of 1.7·10^9 s (Unix time, where the time
// units of m = 7 wrap around 2^64).
func TestBucketsAgree(t *testing.T) {
	r := newRand(2)
	for _, l := range agreeLimits {
		for _, base := range []float64{0, 1.7e9} {
			tb, m, _, g, _, _, _ := newAllSeven(t, l, Quota{Limit: 1, Window: 1})
			var ts TokenBucketState
			var ms LeakyMeterState
			var gs GCRAState
			k := int64(r.IntN(1000))
			for i := range 3000 {
				k += r.Int64N(int64(3000/l.Rate) + 2) // ms ticks, gaps up to 3 intervals
				now := base + float64(k)*0.001
				c := 1
				if r.IntN(4) == 0 {
					c = r.IntN(l.Burst + 2) // 0 (a query) up to Burst+1 (never)
				}
				dt, dm, dg := tb.Decide(&ts, now, c), m.Decide(&ms, now, c), g.Decide(&gs, now, c)
				if dt != dg || dm != dg {
					t.Fatalf("%+v base %v, request %d (t=%v cost=%d):\n token bucket %+v\n leaky meter  %+v\n GCRA         %+v",
						l, base, i, now, c, dt, dm, dg)
				}
			}
		}
	}
}

// When the clock steps back, the token bucket and GCRA differ, exactly as
// the package doc says: the token bucket takes the gap as zero (no refill,
// its tokens as they were), GCRA reads its TAT against the earlier now (the
// refill since then is not there yet), so at such a step GCRA allows only
// what the token bucket allows, and (deciding alike) reports no more
// Remaining. After GCRA refused what the token bucket allowed, the two hold
// different states (the test then starts both afresh); with no step back
// they never differ.
func TestTokenBucketAndGCRAOnBackwardSteps(t *testing.T) {
	r := newRand(23)
	steps, differ := 0, 0
	for _, l := range agreeLimits[:6] {
		tb, _ := NewTokenBucket(l)
		g, _ := NewGCRA(l)
		var ts TokenBucketState
		var gs GCRAState
		latest, now := 0.0, 100.0
		for i := range 20000 {
			switch u := r.Float64(); {
			case u < 0.1:
				now -= r.Float64() * float64(l.Burst) / l.Rate // back by up to a fill time
			case u < 0.3: // the same instant
			default:
				now += float64(r.IntN(int(2000/l.Rate)+1)) * 0.001
			}
			now = math.Round(now*1000) / 1000
			c := 1 + r.IntN(l.Burst)
			dt, dg := tb.Decide(&ts, now, c), g.Decide(&gs, now, c)
			back := now < latest
			latest = max(latest, now)
			switch {
			case !back && dt != dg:
				t.Fatalf("%+v request %d at %v (clock forward): token bucket %+v, GCRA %+v", l, i, now, dt, dg)
			case back:
				steps++
				if dg.Allowed && !dt.Allowed || dg.Allowed == dt.Allowed && dg.Remaining > dt.Remaining {
					t.Fatalf("%+v request %d at %v (clock back): GCRA %+v allows more than the token bucket %+v", l, i, now, dg, dt)
				}
				if dt.Allowed != dg.Allowed {
					differ++
					ts, gs, latest = TokenBucketState{}, GCRAState{}, 0
				}
			}
		}
	}
	t.Logf("%d decisions after a step back, %d of them decided differently", steps, differ)
	if steps < 1000 || differ < 50 {
		t.Errorf("%d backward steps, %d decisions that differed: the sequences test too little", steps, differ)
	}
}

// Rates are read as the simplest fraction that rounds to them.
func TestSimplestFraction(t *testing.T) {
	for _, c := range []struct {
		x    float64
		p, q uint64
	}{
		{100.0 / 60, 5, 3}, {7 / 1.5, 14, 3}, {0.1, 1, 10}, {3, 3, 1}, {1.0 / 3, 1, 3},
		{1000.0 / 3600, 5, 18}, {1e10, 1e10, 1}, {0.37, 37, 100}, {1e-6, 1, 1e6},
	} {
		if p, q, ok := simplestFraction(c.x); !ok || p != c.p || q != c.q {
			t.Errorf("simplestFraction(%v) = %d/%d %v, want %d/%d", c.x, p, q, ok, c.p, c.q)
		}
	}
	if p, q, ok := simplestFraction(math.Pi); ok && float64(p)/float64(q) != math.Pi {
		t.Errorf("simplestFraction(π) = %d/%d, which does not round to π", p, q)
	}
}

// The lattices of a few rates: the time unit (1/m ns, or 2^shift ns) and
// the emission interval in it, worked out by hand.
func TestLattices(t *testing.T) {
	for _, c := range []struct {
		l        Limit
		m        uint64
		shift    uint
		interval uint64
	}{
		{Limit{10, 1}, 1, 0, 1e8},                   // 0.1 s
		{Limit{3, 1}, 3, 0, 1e9},                    // 1/3 s = 10^9 units of 1/3 ns
		{Limit{100.0 / 60, 1}, 1, 0, 6e8},           // 0.6 s
		{Limit{7 / 1.5, 1}, 7, 0, 15e8},             // 3/14 s = 1.5·10^9 units of 1/7 ns
		{Limit{1e10, 1}, 10, 0, 1},                  // 0.1 ns
		{Limit{1031, 1}, 1024, 0, 993210476},        // m = 1031 is too fine: ⌈1024·10^9/1031⌉ units of 1/1024 ns
		{Limit{1e-9, 2}, 1, 0, 1e18},                // 31.7 years per unit, 63 years to fill: 2·10^18 ≤ 2^61
		{Limit{1e-9, 4}, 1, 1, 5e17},                // 127 years to fill: units of 2 ns
		{Limit{1e-9, 1000}, 1, 9, 1953125000000000}, // 31,700 years to fill: units of 2^9 ns
	} {
		lat := newLattice(c.l.Rate, c.l.Burst)
		if lat.m != c.m || lat.shift != c.shift || lat.interval != c.interval {
			t.Errorf("%+v: m %d, shift %d, interval %d; want %d, %d, %d", c.l, lat.m, lat.shift, lat.interval, c.m, c.shift, c.interval)
		}
	}
}

// A rate that has no exact lattice is enforced slightly slower, never
// faster: over a long steady overload GCRA admits at most Burst + Rate·t.
func TestRoundedRateNeverFaster(t *testing.T) {
	for _, l := range []Limit{{1031, 5}, {math.Pi * 100, 9}, {math.E, 2}} {
		g, _ := NewGCRA(l)
		var s GCRAState
		admitted := 0
		const span = 1000.0 // seconds, requests every 0.1 ms
		for k := range int(span * 1e4) {
			if g.Decide(&s, float64(k)*1e-4, 1).Allowed {
				admitted++
			}
		}
		bound := float64(l.Burst) + l.Rate*span
		if float64(admitted) > bound || float64(admitted) < bound*(1-1e-6)-1 {
			t.Errorf("%+v: %d admitted in %v s, want at most Burst + Rate·t = %v and within 10^-6 of it", l, admitted, span, bound)
		}
	}
}

// A bucket that would take longer than the whole timeline to refill (the
// sim's --rate 1e-300) admits its burst and then nothing, instead of
// failing or overflowing. RetryAfter is finite — the request fits the
// configuration, so it must not read as one that can never pass (+Inf,
// which httplimit answers with 400) — and at least the rest of the
// timeline (2^62 ns, about 146 years).
func TestBeyondTheTimeline(t *testing.T) {
	l := Limit{Rate: 1e-300, Burst: 1_000_000}
	tb, m, lq, g, _, _, _ := newAllSeven(t, l, Quota{Limit: 1, Window: 1})
	check := func(name string, decide func(now float64) Decision) {
		t.Helper()
		for i := range l.Burst {
			if d := decide(1); !d.Allowed {
				t.Fatalf("%s: request %d of the burst refused: %+v", name, i, d)
			}
		}
		if d := decide(1e9); d.Allowed || math.IsInf(d.RetryAfter, 0) || d.RetryAfter < 0x1p62/1e9-1e9 {
			t.Errorf("%s: after the burst, 31 years later: %+v, want refused with a finite RetryAfter to the end of the timeline", name, d)
		}
	}
	var ts TokenBucketState
	var ms LeakyMeterState
	var gs GCRAState
	var qs LeakyQueueState
	check("token bucket", func(now float64) Decision { return tb.Decide(&ts, now, 1) })
	check("leaky meter", func(now float64) Decision { return m.Decide(&ms, now, 1) })
	check("GCRA", func(now float64) Decision { return g.Decide(&gs, now, 1) })
	lq.Decide(&qs, 1, 1) // the queue's first unit leaves at once
	check("leaky queue", func(now float64) Decision { return lq.Decide(&qs, now, 1) })
}

// A state carries over to a configuration made by WithLimit: GCRA's TAT
// stays where it is, the token bucket's tokens stay tokens (cut to the new
// Burst), the leaky meter's level stays the level.
func TestWithLimitSharesStates(t *testing.T) {
	base, half := Limit{Rate: 10, Burst: 10}, Limit{Rate: 5, Burst: 5}
	tb, m, lq, g, _, _, _ := newAllSeven(t, base, Quota{Limit: 1, Window: 1})
	g2, err := g.WithLimit(half)
	if err != nil {
		t.Fatal(err)
	}
	tb2, _ := tb.WithLimit(half)
	m2, _ := m.WithLimit(half)
	lq2, _ := lq.WithLimit(half)
	var gs GCRAState
	var ts TokenBucketState
	var ms LeakyMeterState
	var qs LeakyQueueState
	for range 4 { // 4 of 10 at 10/s: TAT 0.4 s, 6 tokens, level 4
		g.Decide(&gs, 0, 1)
		tb.Decide(&ts, 0, 1)
		m.Decide(&ms, 0, 1)
		lq.Decide(&qs, 0, 1) // releases at 0, 0.1, 0.2, 0.3
	}
	count := func(decide func() Decision) int {
		n := 0
		for n < 20 && decide().Allowed {
			n++
		}
		return n
	}
	if n := count(func() Decision { return g2.Decide(&gs, 0, 1) }); n != 3 { // 0.4, 0.6, 0.8 ≤ τ = 0.8
		t.Errorf("GCRA at half: %d admitted, want 3", n)
	}
	if n := count(func() Decision { return tb2.Decide(&ts, 0, 1) }); n != 5 { // 6 tokens cut to 5
		t.Errorf("token bucket at half: %d admitted, want 5", n)
	}
	if n := count(func() Decision { return m2.Decide(&ms, 0, 1) }); n != 1 { // level 4 of 5
		t.Errorf("leaky meter at half: %d admitted, want 1", n)
	}
	if n := count(func() Decision { return lq2.Decide(&qs, 0, 1) }); n != 2 { // 3 waiting of 5
		t.Errorf("leaky queue at half: %d admitted, want 2", n)
	}
	// A level above the smaller Burst drains at the smaller rate: the base
	// meter full (10), then 2 s at 5/s empty it.
	for range 6 {
		m.Decide(&ms, 0, 1)
	}
	if d := m2.Decide(&ms, 0.999, 0); d.Remaining != 0 {
		t.Errorf("leaky meter at half, 10 units, 0.999 s later: %+v, want still above Burst 5", d)
	}
	if n := count(func() Decision { return m2.Decide(&ms, 2, 1) }); n != 5 {
		t.Errorf("leaky meter at half, 10 units, 2 s later: %d admitted, want 5 (drained)", n)
	}
	// The refill at the half rate, in the base's units: 0.2 s per token.
	if d := tb2.Decide(&ts, 0.2, 1); !d.Allowed {
		t.Errorf("token bucket at half, 0.2 s later: %+v, want one token back", d)
	}
	if d := tb2.Decide(&ts, 0.399, 1); d.Allowed {
		t.Errorf("token bucket at half, 0.399 s: %+v, want the second token not yet back", d)
	}
}

// ScaledDecider is what Memory decides a class with: base itself at scale
// 1, nothing when closed, and at other scales a configuration on base's
// states that decides like Memory.
func TestScaledDecider(t *testing.T) {
	spec := Spec{Algorithm: AlgGCRA, Rate: 9, Per: 1, Burst: 9} // 9/s: time units of 1/9 ns
	base, _ := NewGCRA(spec.Limit())
	if d, ok := ScaledDecider[GCRAState](base, spec, 1); !ok || d != Decider[GCRAState](base) {
		t.Errorf("scale 1: %v %v, want base", d, ok)
	}
	if _, ok := ScaledDecider[GCRAState](base, spec, 0); ok {
		t.Error("scale 0: a configuration, want closed")
	}
	half, ok := ScaledDecider[GCRAState](base, spec, 0.5) // 4.5/s, burst 4
	if !ok {
		t.Fatal("scale 0.5: closed")
	}
	m := mustMemory(t, spec, MemoryConfig{})
	m.SetScale(0.5)
	var s GCRAState
	r := newRand(24)
	now := 0.0
	for i := range 2000 {
		now += float64(r.IntN(300)) * 0.001
		want := m.AllowClassN("k", 0, now, 1)
		if got := half.Decide(&s, now, 1); got != want {
			t.Fatalf("request %d at %v: ScaledDecider %+v, Memory %+v", i, now, got, want)
		}
	}
}

// RetryAfter holds at Unix-time magnitudes too (now ≈ 1.7·10^9 s, where a
// float64 is 238 ns coarse and now × 10^9 is no longer exact): the retry at
// now+RetryAfter is allowed, a microsecond earlier it is refused.
func TestRetryAfterAtUnixTime(t *testing.T) {
	// Time units of 1/7 ns, which wrap around 2^64 at that magnitude.
	checkRetryAll(t, newRand(26), Limit{Rate: 7 / 1.5, Burst: 4}, Quota{Limit: 4, Window: 0.3}, 1.7e9)
}

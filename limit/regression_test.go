package limit

import (
	"math"
	"testing"
)

func adaptive(t *testing.T, initial int) map[string]Algorithm {
	t.Helper()
	a, err1 := NewAIMD(AIMDConfig{InitialLimit: initial})
	g, err2 := NewGradient(GradientConfig{InitialLimit: initial})
	g2, err3 := NewGradient2(Gradient2Config{InitialLimit: initial})
	v, err4 := NewVegas(VegasConfig{InitialLimit: initial})
	for _, err := range []error{err1, err2, err3, err4} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return map[string]Algorithm{"AIMD": a, "Gradient": g, "Gradient2": g2, "Vegas": v}
}

// Regression: Netflix's Gradient2Limit ignores dropped samples, so under
// steady timeouts (every request times out at the same deadline, so the RTT
// looks flat and the gradient stays 1) it climbs to its maximum. Ours must go
// down and never up.
func TestDropsShrinkLimitUnderSteadyTimeouts(t *testing.T) {
	for name, alg := range adaptive(t, 100) {
		t.Run(name, func(t *testing.T) {
			prev := alg.Limit()
			// a timeout of 0.5 s every millisecond, for 60 s, all requests busy
			for i := 1; i <= 60000; i++ {
				l := alg.Update(Sample{Now: float64(i) * 0.001, RTT: 0.5, InFlight: 100, Dropped: true})
				if l > prev {
					t.Fatalf("sample %d: limit rose from %d to %d under steady timeouts", i, prev, l)
				}
				prev = l
			}
			if prev > 10 {
				t.Fatalf("after 60 s of timeouts the limit is %d, want ≤ 10", prev)
			}
		})
	}
}

// Regression: with the gradient pinned near 0.8 (a constant 25% queueing
// delay) the queue term keeps adding; the limit must settle at the fixed
// point of limit = 0.8×limit + √limit, i.e. limit = 25, not creep up.
func TestGradientSettlesWhenGradientSitsNear08(t *testing.T) {
	g, err := NewGradient(GradientConfig{InitialLimit: 100, Probe: ProbeConfig{Interval: -1}})
	if err != nil {
		t.Fatal(err)
	}
	g.Update(Sample{Now: 0, RTT: 0.100, InFlight: 100}) // no-load RTT 100 ms
	for i := 1; i <= 200000; i++ {
		l := g.Update(Sample{Now: float64(i) * 0.001, RTT: 0.125, InFlight: 100})
		if l > 100 {
			t.Fatalf("sample %d: limit %d rose above its start", i, l)
		}
		if i > 150000 && (l < 24 || l > 25) {
			t.Fatalf("sample %d: limit %d, want the fixed point 25 (floor 24..25)", i, l)
		}
	}
}

// Regression: a long-term RTT average that follows the queue the limit
// itself builds lets the limit creep up forever under steady overload
// (Gradient2). With MaxDrift the limit stays bounded; without it (MaxDrift
// huge) the same run climbs, which shows the test can fail.
func TestGradient2DoesNotCreepUnderSteadyOverload(t *testing.T) {
	const C = 100
	phases := []simPhase{{until: 100, L: 0.04}, {until: 300, L: 0.04}}
	run := func(drift float64) simResult {
		g, err := NewGradient2(Gradient2Config{Tolerance: 1.1, MaxDrift: drift})
		if err != nil {
			t.Fatal(err)
		}
		return runSim(g, C, phases, 50)
	}
	capped, uncapped := run(0), run(1e9)
	t.Logf("mean limit at 100 s / 300 s: capped %.0f / %.0f, uncapped %.0f / %.0f",
		capped.mean[0], capped.mean[1], uncapped.mean[0], uncapped.mean[1])
	if capped.mean[1] > 1.05*capped.mean[0] || capped.mean[1] > 1.5*C {
		t.Errorf("capped: mean limit %.0f at 300 s vs %.0f at 100 s: creeping", capped.mean[1], capped.mean[0])
	}
	if uncapped.mean[1] < 2*C {
		t.Errorf("uncapped: mean limit %.0f; expected the creep this guard prevents (test lost its teeth?)", uncapped.mean[1])
	}
}

// Regression: minimum-RTT probing that drops concurrency to the minimum
// pins the limit low and causes bursts of 503s (reported against Envoy's
// adaptive concurrency filter). Our probe keeps Probe.Ratio of the limit,
// lasts a few RTTs and returns to the previous limit.
func TestProbeDoesNotPinLimitLow(t *testing.T) {
	g, err := NewGradient(GradientConfig{InitialLimit: 100, Probe: ProbeConfig{Interval: 10}})
	if err != nil {
		t.Fatal(err)
	}
	// RTT 40 ms, one sample a millisecond; the first at 1 ms, so the probe
	// starts at 10.001 s and lasts 4 × 40 ms.
	var before int
	for i := 1; i <= 12000; i++ {
		now := float64(i) * 0.001
		l := g.Update(Sample{Now: now, RTT: 0.040, InFlight: 1000})
		switch {
		case now < 10.0005:
			before = l
		case now < 10.001+0.16-0.0005:
			if want := before / 2; l != want && l != want+1 {
				t.Fatalf("t=%.3f: probe limit %d, want about half of %d (not the minimum)", now, l, before)
			}
		default:
			if l < before {
				t.Fatalf("t=%.3f: limit %d after the probe, want ≥ %d (back to the previous limit)", now, l, before)
			}
		}
	}
	if before < 100 {
		t.Fatalf("limit before the probe %d: the setup lost its meaning", before)
	}
}

// Regression: after the latency rises to a slower normal, a stale no-load
// RTT drives the gradient to its floor and the limit to a handful until the
// next periodic probe. The early probe learns the new RTT within a few RTTs
// and the limit does not collapse to the minimum.
func TestSlowerNormalIsLearnedWithoutCollapse(t *testing.T) {
	g, err := NewGradient(GradientConfig{InitialLimit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var atSwitch, lowest int
	lowest = math.MaxInt
	// one sample every 0.1 ms (a busy server: limit ÷ RTT samples a second)
	for i := 1; i <= 200000; i++ {
		now := float64(i) * 0.0001
		rtt := 0.040
		if now > 5 {
			rtt = 0.080
		}
		l := g.Update(Sample{Now: now, RTT: rtt, InFlight: 1000})
		if now <= 5 {
			atSwitch = l
		} else {
			lowest = min(lowest, l)
		}
		if now > 6 && g.NoLoadRTT() != 0.080 {
			t.Fatalf("t=%.3f: NoLoadRTT %v, want the new normal 0.080 within a second", now, g.NoLoadRTT())
		}
	}
	if lowest < atSwitch/5 {
		t.Fatalf("limit fell to %d after the latency doubled (was %d): collapsed", lowest, atSwitch)
	}
	if l := g.Limit(); l < atSwitch {
		t.Fatalf("limit %d at the end, want ≥ %d (recovered)", l, atSwitch)
	}
	t.Logf("limit %d at the switch, lowest %d after it, %d at 20 s", atSwitch, lowest, g.Limit())
}

// noLoadOf returns the no-load RTT tracker of an algorithm that has one.
func noLoadOf(t *testing.T, alg Algorithm) *noLoad {
	t.Helper()
	switch a := alg.(type) {
	case *AIMD:
		return &a.probe
	case *Gradient:
		return &a.nl
	case *Gradient2:
		return &a.nl
	case *Vegas:
		return &a.nl
	}
	t.Fatalf("%T has no no-load RTT", alg)
	return nil
}

// Regression: a dropped first sample became the no-load RTT, although
// dropped samples are excluded from the RTTs. A 1 s timeout as the first
// sample made 1 s the no-load RTT; with the default quantile it took two
// windows (64 good samples) to fall, and until then a queue that more than
// doubled the RTT looked like no queue at all, so the limits grew. The
// drop must leave the no-load RTT unset, the first good sample set it,
// and the queue then shrink every limit.
func TestDroppedFirstSampleIsNotTheNoLoadRTT(t *testing.T) {
	algs := map[string]func() (Algorithm, error){
		"AIMD":      func() (Algorithm, error) { return NewAIMD(AIMDConfig{InitialLimit: 100, LearnBaseline: true}) },
		"Gradient":  func() (Algorithm, error) { return NewGradient(GradientConfig{InitialLimit: 100}) },
		"Gradient2": func() (Algorithm, error) { return NewGradient2(Gradient2Config{InitialLimit: 100}) },
		"Vegas":     func() (Algorithm, error) { return NewVegas(VegasConfig{InitialLimit: 100}) },
	}
	for name, mk := range algs {
		t.Run(name, func(t *testing.T) {
			alg, err := mk()
			if err != nil {
				t.Fatal(err)
			}
			nl := noLoadOf(t, alg)
			alg.Update(Sample{Now: 1, RTT: 1, InFlight: 100, Dropped: true})
			if nl.rtt != 0 {
				t.Errorf("after a dropped first sample of 1 s: no-load RTT %v, want none (0)", nl.rtt)
			}
			l0 := alg.Update(Sample{Now: 1.04, RTT: 0.040, InFlight: 100})
			if nl.rtt != 0.040 {
				t.Errorf("after the first good sample of 40 ms: no-load RTT %v, want 0.04", nl.rtt)
			}
			// a queue: 100 ms, 2.5 × the no-load RTT
			for i := 1; i <= 10; i++ {
				alg.Update(Sample{Now: 1.04 + 0.1*float64(i), RTT: 0.100, InFlight: 100})
			}
			if l := alg.Limit(); l >= l0 {
				t.Errorf("after 10 samples of 2.5 × the no-load RTT: limit %d, want below %d", l, l0)
			}
		})
	}
}

package limit

import (
	"errors"
	"math"
	"testing"
)

// step is one sample fed at an explicit instant and the limit expected after it.
type step struct {
	now, rtt float64
	inFlight int
	dropped  bool
	want     int
}

func runSteps(t *testing.T, alg Algorithm, steps []step) {
	t.Helper()
	for i, st := range steps {
		got := alg.Update(Sample{Now: st.now, RTT: st.rtt, InFlight: st.inFlight, Dropped: st.dropped})
		if got != st.want || alg.Limit() != got {
			t.Fatalf("step %d (now=%v rtt=%v dropped=%v): limit %d (Limit() %d), want %d",
				i, st.now, st.rtt, st.dropped, got, alg.Limit(), st.want)
		}
	}
}

func TestFixed(t *testing.T) {
	f, err := NewFixed(7)
	if err != nil {
		t.Fatal(err)
	}
	runSteps(t, f, []step{{1, 0.01, 1, false, 7}, {2, 9, 1, true, 7}})
	if _, err := NewFixed(0); !errors.Is(err, ErrConfig) {
		t.Fatalf("NewFixed(0): %v, want ErrConfig", err)
	}
}

func TestAIMDSteps(t *testing.T) {
	a, err := NewAIMD(AIMDConfig{MinLimit: 13}) // start 20, baseline 40 ms, tolerance 2
	if err != nil {
		t.Fatal(err)
	}
	runSteps(t, a, []step{
		{0.50, 0.04, 1, false, 20}, // 20 + 1/20 = 20.05
		{1.00, 0.10, 1, false, 18}, // 0.1 > 2×0.04: floor(20.05×0.9) = 18
		{1.05, 0.10, 1, false, 18}, // started 0.95, before the cut at 1.00: no second cut
		{2.20, 0.10, 1, false, 16}, // started 2.1: floor(18×0.9) = 16
		{3.50, 0.01, 1, true, 14},  // dropped: floor(16×0.9) = 14
		{3.60, 0.01, 1, false, 14}, // 14 + 1/14
		{4.00, 0.01, 1, true, 13},  // floor(14.07×0.9) = 12 → MinLimit 13
		{4.01, math.NaN(), 1, true, 13},
		{4.02, 0, 1, true, 13}, // invalid RTTs are ignored
	})
}

func TestAIMDMaxLimit(t *testing.T) {
	a, err := NewAIMD(AIMDConfig{InitialLimit: 2, MaxLimit: 3})
	if err != nil {
		t.Fatal(err)
	}
	// 2 → 2.5 → 2.9 → 3.245 capped at 3 → stays 3
	runSteps(t, a, []step{{1, 0.01, 1, false, 2}, {2, 0.01, 1, false, 2}, {3, 0.01, 1, false, 3}, {4, 0.01, 1, false, 3}})
}

// The step tables of Gradient and Vegas check seed 004's per-sample
// arithmetic, so they take the minimum (Probe.Quantile < 0): the no-load
// RTT is the smallest RTT and each sample's RTT is compared with it. The
// default quantile mode is stepped through in noise_test.go.
func TestGradientSteps(t *testing.T) {
	g, err := NewGradient(GradientConfig{InitialLimit: 100, Probe: ProbeConfig{Interval: -1, Quantile: -1}})
	if err != nil {
		t.Fatal(err)
	}
	runSteps(t, g, []step{
		{1.0, 0.1, 100, false, 100}, // gradient 1: 100 + 0.002×(110−100) = 100.02
		{1.1, 0.4, 100, false, 99},  // gradient 0.25 → 0.5: 100.02 − (0.2/100.02)×(100.02−60.01) ≈ 99.94
		{1.2, 0.4, 100, true, 89},   // drop: 99.94 × 0.9 = 89.95
		{1.3, 0.4, 100, true, 89},   // started 0.9, before the cut: ignored
	})
	if got := g.NoLoadRTT(); got != 0.1 {
		t.Fatalf("NoLoadRTT = %v, want 0.1", got)
	}
}

func TestVegasSteps(t *testing.T) {
	v, err := NewVegas(VegasConfig{InitialLimit: 100, Probe: ProbeConfig{Interval: -1, Quantile: -1}})
	if err != nil {
		t.Fatal(err)
	}
	// log10(100) = 2, alpha 6, beta 12; smoothing 1/limit per sample (per
	// round trip); queue = ⌈limit × (1 − RTT_noload ÷ RTT)⌉.
	runSteps(t, v, []step{
		{1.0, 0.1, 100, false, 100},   // the first sample only measures the no-load RTT
		{1.1, 0.2, 100, false, 99},    // queue 50 > 12: newLimit 98: 100 − 0.02 = 99.98
		{1.2, 0.2, 10, false, 99},     // 10 in flight < 50: not tested, unchanged
		{1.25, 0.1, 100, false, 100},  // queue 0 ≤ 2: newLimit 111.98: 99.98 + 12/99.98 = 100.10
		{1.3, 0.104, 100, false, 100}, // queue ⌈3.85⌉ = 4 < 6: newLimit 102.10: 100.10 + 2/100.10 = 100.12
		{1.4, 0.1, 100, true, 90},     // drop: 100.12 × 0.9 = 90.108
		{1.45, 0.1, 100, true, 90},    // started 1.35, before the cut: ignored
	})
	if math.Abs(v.limit-90.108) > 1e-5 {
		t.Errorf("internal limit %v, want 90.108", v.limit)
	}
}

// Tolerance (Netflix GradientLimit's rttTolerance) multiplies the ratio:
// gradient = clamp(Tolerance × RTT_noload ÷ RTT, MinGradient, 1). With 2
// an RTT 1.5 × the no-load RTT is no queue (gradient 1, the limit grows)
// and 3 × gives 2/3; with the default 1 they give 2/3 and 1/3 → 0.5.
func TestGradientTolerance(t *testing.T) {
	for _, c := range []struct {
		tolerance float64
		want      []float64 // the internal limit after each sample, by hand
	}{
		// 100 + 0.002 × (110 − 100); then + (0.2/100.02) × √100.02; then
		// 100.04 + (0.2/100.04) × (100.04 × 2/3 + √100.04 − 100.04)
		{2, []float64{100.02, 100.03999800029995, 99.99332733503275}},
		// 100.02 + (0.2/100.02) × (100.02 × 2/3 + √100.02 − 100.02), …
		{0, []float64{100.02, 99.97333133363328, 99.89333400103345}},
	} {
		g, err := NewGradient(GradientConfig{InitialLimit: 100, Tolerance: c.tolerance, Probe: ProbeConfig{Interval: -1, Quantile: -1}})
		if err != nil {
			t.Fatal(err)
		}
		for i, rtt := range []float64{0.1, 0.15, 0.3} {
			g.Update(Sample{Now: float64(i + 1), RTT: rtt, InFlight: 100})
			if math.Abs(g.limit-c.want[i]) > 1e-9 {
				t.Errorf("Tolerance %v, RTT %v: internal limit %.15g, want %.15g", c.tolerance, rtt, g.limit, c.want[i])
			}
		}
	}
}

func TestGradient2Steps(t *testing.T) {
	g, err := NewGradient2(Gradient2Config{InitialLimit: 100, Probe: ProbeConfig{Interval: -1}})
	if err != nil {
		t.Fatal(err)
	}
	runSteps(t, g, []step{
		{1.0, 0.1, 100, false, 100}, // long 0.1, gradient 1: 100 + 0.002×4 = 100.008
		{1.1, 0.3, 100, false, 99},  // long 0.12 (cap 1.2×0.1): gradient 1.5×0.12/0.3 = 0.6 → 100.008 − 0.002×(40.003−4) ≈ 99.93
		{1.2, 0.3, 100, true, 89},   // drop: ×0.9
	})
}

func TestConfigErrorsNameTheField(t *testing.T) {
	cases := []struct {
		field string
		err   error
	}{
		{"MinLimit", func() error { _, err := NewAIMD(AIMDConfig{MinLimit: -1}); return err }()},
		{"MaxLimit", func() error { _, err := NewAIMD(AIMDConfig{MinLimit: 5, MaxLimit: 4, InitialLimit: 5}); return err }()},
		{"InitialLimit", func() error { _, err := NewGradient(GradientConfig{InitialLimit: 2000}); return err }()},
		{"Tolerance", func() error { _, err := NewAIMD(AIMDConfig{Tolerance: 0.5}); return err }()},
		{"Backoff", func() error { _, err := NewAIMD(AIMDConfig{Backoff: 1.5}); return err }()},
		{"Baseline", func() error { _, err := NewAIMD(AIMDConfig{Baseline: math.Inf(1)}); return err }()},
		{"MinGradient", func() error { _, err := NewGradient(GradientConfig{MinGradient: 1.5}); return err }()},
		{"Tolerance", func() error { _, err := NewGradient(GradientConfig{Tolerance: 0.99}); return err }()},
		{"Tolerance", func() error { _, err := NewGradient(GradientConfig{Tolerance: math.Inf(1)}); return err }()},
		{"Tolerance", func() error { _, err := NewGradient(GradientConfig{Tolerance: math.NaN()}); return err }()},
		{"Alpha", func() error {
			_, err := NewVegas(VegasConfig{Alpha: 2, AlphaFunc: func(float64) float64 { return 3 }})
			return err
		}()},
		{"Beta", func() error {
			_, err := NewVegas(VegasConfig{Beta: 7, BetaFunc: func(float64) float64 { return 6 }})
			return err
		}()},
		{"Alpha", func() error { _, err := NewVegas(VegasConfig{Alpha: -1}); return err }()},
		{"Smoothing", func() error { _, err := NewGradient(GradientConfig{Smoothing: math.NaN()}); return err }()},
		{"Probe.Ratio", func() error { _, err := NewGradient(GradientConfig{Probe: ProbeConfig{Ratio: 1}}); return err }()},
		{"Probe.RTTs", func() error { _, err := NewVegas(VegasConfig{Probe: ProbeConfig{RTTs: 1}}); return err }()},
		{"Probe.Interval", func() error { _, err := NewVegas(VegasConfig{Probe: ProbeConfig{Interval: math.NaN()}}); return err }()},
		{"Beta", func() error { _, err := NewVegas(VegasConfig{Alpha: 6, Beta: 3}); return err }()},
		{"Tolerance", func() error { _, err := NewGradient2(Gradient2Config{Tolerance: 0.9}); return err }()},
		{"LongWindow", func() error { _, err := NewGradient2(Gradient2Config{LongWindow: -3}); return err }()},
		{"MaxDrift", func() error { _, err := NewGradient2(Gradient2Config{MaxDrift: 0.5}); return err }()},
	}
	for _, c := range cases {
		var ce *ConfigError
		if !errors.As(c.err, &ce) || ce.Field != c.field || !errors.Is(c.err, ErrConfig) {
			t.Errorf("want ConfigError for %s, got %v", c.field, c.err)
		}
	}
}

// Vegas takes t = max(1, log10(limit)) again only when the limit has moved
// by more than 1%: t stays within log10(1.01) of the exact value along any
// path of the limit, is exactly 1 up to 10, and is exact right after a jump.
func TestVegasThresholdFollowsTheLimit(t *testing.T) {
	v, err := NewVegas(VegasConfig{})
	if err != nil {
		t.Fatal(err)
	}
	check := func(l float64) {
		t.Helper()
		got, want := v.threshold(l), max(1, math.Log10(l))
		if math.Abs(got-want) > math.Log10(1.01) || (l <= 10 && got != 1) {
			t.Fatalf("limit %v: t = %v, want %v within %v", l, got, want, math.Log10(1.01))
		}
	}
	for l := 1.0; l < 1000; l *= 1.003 {
		check(l)
	}
	for l := 1000.0; l > 1; l *= 0.997 {
		check(l)
	}
	for _, l := range []float64{500, 20, 900, 10.5, 11, 300} {
		if got := v.threshold(l); got != math.Log10(l) {
			t.Errorf("after a jump to %v: t = %v, want log10 = %v", l, got, math.Log10(l))
		}
		check(l * 1.00999)
		check(l / 1.00999)
		check(l)
	}
}

// A window is full at ⌈limit⌉ samples, at least 32 and at most 256.
func TestWindowFull(t *testing.T) {
	for _, c := range []struct {
		count int
		limit float64
		want  bool
	}{
		{31, 10, false}, {32, 10, true}, {32, 32, true}, {32, 32.5, false}, {33, 32.5, true},
		{99, 100, false}, {100, 100, true}, {255, 1000, false}, {256, 1000, true}, {256, 1e300, true},
	} {
		if got := windowFull(c.count, c.limit); got != c.want {
			t.Errorf("windowFull(%d, %v) = %v, want %v", c.count, c.limit, got, c.want)
		}
	}
}

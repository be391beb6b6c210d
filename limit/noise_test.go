package limit

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// noisyAlgs are the minimum-RTT algorithms under test with latency noise:
// Gradient and Vegas with their defaults, AIMD learning its baseline with a
// 20% tolerance (its default 2 aims for a doubled latency, about 2C; 1.1 is
// closer than the quantiles' few percent of sampling noise, see AIMDConfig).
// quantile sets Probe.Quantile (0: the default p10).
func noisyAlgs(quantile float64) []struct {
	name string
	alg  func() (Algorithm, error)
} {
	p := ProbeConfig{Quantile: quantile}
	return []struct {
		name string
		alg  func() (Algorithm, error)
	}{
		{"AIMD", func() (Algorithm, error) { return NewAIMD(AIMDConfig{LearnBaseline: true, Tolerance: 1.2, Probe: p}) }},
		{"Gradient", func() (Algorithm, error) { return NewGradient(GradientConfig{Probe: p}) }},
		{"Vegas", func() (Algorithm, error) { return NewVegas(VegasConfig{Probe: p}) }},
	}
}

// Regression: with latency noise the smallest RTT seen sits far below the
// typical unloaded RTT, so RTT_noload ÷ RTT stays well below 1 with no
// queue at all and the limit shrinks to a handful (measured with the sim:
// Gradient ≈ 14 for C = 100 with noise of mean 0.5 × L).
//
// The server (runNoisySim, 2× load) serves C = 100 at a time: a request
// admitted with n in flight takes L × max(1, n/C) plus exponential noise
// of mean 0.5 × L or 1 × L. The noise is added service time that every
// request may suffer whatever the load, so the latency knee, and the right
// limit, is still C: up to C in flight the RTT distribution does not
// change, past it every RTT grows by L × (n/C − 1). Noise-free the
// algorithms settle about 10% above C (TestSettle); the bound tested is the
// same as there: the mean limit over the last 20 s of each phase (L = 40
// ms, then 80 ms: the probe must learn the slower normal through the
// noise) within ±25% of C, and the limit within that band ≥ 90% of the
// time. With the minimum (Probe.Quantile < 0) the same runs end below
// 0.75 C, which shows the test can fail.
func TestSettleWithNoise(t *testing.T) {
	const C = 100
	phases := []simPhase{{until: 60, L: 0.040}, {until: 120, L: 0.080}}
	for _, noise := range []float64{0.5, 1} {
		for _, a := range noisyAlgs(0) {
			t.Run(fmt.Sprintf("%s/noise=%g", a.name, noise), func(t *testing.T) {
				alg, err := a.alg()
				if err != nil {
					t.Fatal(err)
				}
				r := runNoisySim(alg, C, phases, 20, noise, 1)
				t.Logf("mean limit %.1f (in band %.0f%%); after L doubles %.1f (%.0f%%)",
					r.mean[0], 100*r.inBand[0], r.mean[1], 100*r.inBand[1])
				for i, m := range r.mean {
					if m < 0.75*C || m > 1.25*C {
						t.Errorf("phase %d (L=%v): mean limit %.1f, want within ±25%% of %d", i, phases[i].L, m, C)
					}
					if r.inBand[i] < 0.9 {
						t.Errorf("phase %d (L=%v): limit within ±25%% of C only %.0f%% of the time, want ≥ 90%%",
							i, phases[i].L, 100*r.inBand[i])
					}
				}
			})
		}
	}
	for _, a := range noisyAlgs(-1) {
		t.Run(a.name+"/minimum", func(t *testing.T) {
			alg, err := a.alg()
			if err != nil {
				t.Fatal(err)
			}
			r := runNoisySim(alg, C, phases[:1], 20, 0.5, 1)
			t.Logf("with the minimum RTT: mean limit %.1f", r.mean[0])
			if r.mean[0] >= 0.75*C {
				t.Errorf("with the minimum RTT the mean limit is %.1f; expected the collapse the quantile prevents (test lost its teeth?)", r.mean[0])
			}
		})
	}
}

// One fast request in a window does not move the p10, so it does not
// become the no-load RTT, and the limit keeps growing at no load; with the
// minimum (Quantile < 0) it does, and the gradient halves.
func TestQuantileIgnoresAFastOutlier(t *testing.T) {
	for _, q := range []float64{0, -1} {
		g, err := NewGradient(GradientConfig{InitialLimit: 20, Probe: ProbeConfig{Interval: -1, Quantile: q}})
		if err != nil {
			t.Fatal(err)
		}
		// 100 samples of 0.1 s, one a millisecond, the fifth one 0.05 s
		for i := 1; i <= 100; i++ {
			rtt := 0.1
			if i == 5 {
				rtt = 0.05
			}
			g.Update(Sample{Now: float64(i) * 0.001, RTT: rtt, InFlight: 20})
		}
		switch {
		case q == 0 && (g.NoLoadRTT() != 0.1 || g.Limit() <= 20):
			t.Errorf("p10: NoLoadRTT %v, limit %d; want 0.1 and above the initial 20", g.NoLoadRTT(), g.Limit())
		case q < 0 && (g.NoLoadRTT() != 0.05 || g.Limit() >= 20):
			t.Errorf("minimum: NoLoadRTT %v, limit %d; want 0.05 and below the initial 20", g.NoLoadRTT(), g.Limit())
		}
	}
}

// Seed 004's steps (TestGradientSteps) with the default p10: before the
// first window is full, RTT_actual is the p10 of the RTTs gathered so far,
// taken when their count reaches 1, 2, 4, …; the slow samples among them
// do not move it, so the gradient stays 1 where each sample's RTT would
// have halved the target (minimum mode: 99 at the third step).
func TestGradientQuantileSteps(t *testing.T) {
	g, err := NewGradient(GradientConfig{InitialLimit: 100, Probe: ProbeConfig{Interval: -1}})
	if err != nil {
		t.Fatal(err)
	}
	runSteps(t, g, []step{
		{1.0, 0.1, 100, false, 100}, // first sample, RTT_noload = RTT_actual: 100 + 0.002×(110−100) = 100.02
		{1.1, 0.1, 100, false, 100}, // window {0.1}: p10 0.1, gradient 1: 100.02 + 0.002×√100.02 ≈ 100.04
		{1.2, 0.4, 100, false, 100}, // window {0.1, 0.4}: p10 0.1, gradient 1: ≈ 100.06
		{1.3, 0.4, 100, false, 100}, // 3 samples: RTT_actual not retaken, 0.1: ≈ 100.08
		{1.4, 0.4, 100, false, 100}, // window {0.1, 0.4, 0.4, 0.4}: p10 0.1: ≈ 100.10
		{1.5, 0.4, 100, true, 90},   // drop: 100.10 × 0.9 = 90.09
		{1.6, 0.4, 100, true, 90},   // started 1.2, before the cut: ignored
	})
}

// The current RTT step by step (windows of 32 samples at a limit of 10):
// before the first window is full, the p10 of the RTTs so far each time
// their count doubles; then the p10 of each full window, held until the
// next one is full; the no-load RTT falls to the higher of two
// consecutive windows' p10 when both are below it.
func TestCurrentRTTSteps(t *testing.T) {
	var n noLoad
	n.init(ProbeConfig{Interval: -1})
	now := 0.0
	feed := func(k int, rtt float64) {
		for range k {
			now += 0.001
			n.observe(now, rtt, 10, false)
		}
	}
	want := func(what string, cur, noLoad float64) {
		t.Helper()
		if n.current(1) != cur || n.rtt != noLoad || n.ratio(1) != noLoad/cur {
			t.Fatalf("%s: current %v, no-load %v, ratio %v; want %v, %v, %v",
				what, n.current(1), n.rtt, n.ratio(1), cur, noLoad, noLoad/cur)
		}
	}
	feed(1, 0.1)
	want("first sample", 0.1, 0.1)
	feed(1, 0.4)
	want("window {0.4}", 0.4, 0.1)
	feed(1, 0.1)
	want("window {0.4, 0.1}", 0.1, 0.1)
	feed(1, 0.3)
	want("3 samples: not retaken", 0.1, 0.1)
	feed(1, 0.3)
	want("window {0.4, 0.1, 0.3, 0.3}", 0.1, 0.1)
	feed(4, 0.5)
	want("8 samples: p10 is the smallest", 0.1, 0.1)
	feed(7, 0.2)
	want("15 samples: not retaken", 0.1, 0.1)
	feed(1, 0.2)
	want("16 samples: p10 is the 2nd smallest", 0.2, 0.1)
	feed(15, 0.25)
	want("31 samples: not retaken", 0.2, 0.1)
	feed(1, 0.25)
	want("the first full window: its 4th smallest", 0.2, 0.1)
	feed(31, 0.05)
	want("31 samples of the next window: held", 0.2, 0.1)
	feed(1, 0.05)
	want("a window of 0.05: p10s 0.2 and 0.05", 0.05, 0.1)
	feed(32, 0.06)
	want("then a window of 0.06: p10s 0.05 and 0.06", 0.06, 0.06)
}

// Between probes the no-load RTT falls only when two consecutive windows
// (32 samples each at a limit below 32) both have their p10 below it, and
// then to the higher of the two.
func TestNoLoadFallsOnTwoWindows(t *testing.T) {
	// InitialLimit 10: the limit stays below 32 through the 260 samples
	g, err := NewGradient(GradientConfig{InitialLimit: 10, Probe: ProbeConfig{Interval: -1}})
	if err != nil {
		t.Fatal(err)
	}
	now := 0.0
	feed := func(k int, rtt float64) {
		for range k {
			now += 0.001
			g.Update(Sample{Now: now, RTT: rtt, InFlight: 20})
		}
	}
	want := func(what string, rtt float64) {
		t.Helper()
		if got := g.NoLoadRTT(); got != rtt {
			t.Fatalf("%s: NoLoadRTT %v, want %v", what, got, rtt)
		}
	}
	feed(1, 0.1) // the first sample: 0.1
	feed(32, 0.08)
	want("one window of 0.08", 0.1)
	feed(32, 0.1)
	want("then a window of 0.1", 0.1) // windows 0.08 and 0.1: the higher is not below
	feed(32, 0.07)
	want("then a window of 0.07", 0.1) // 0.1 and 0.07
	feed(32, 0.09)
	want("then a window of 0.09", 0.09) // 0.07 and 0.09: falls to 0.09
	feed(31, 0.05)
	want("31 samples of 0.05", 0.09)
	feed(1, 0.05)
	want("32 samples of 0.05", 0.09) // 0.09 and 0.05
	feed(32, 0.05)
	want("two windows of 0.05", 0.05)
	if g.Limit() >= rttWindowMin {
		t.Fatalf("limit %d: the windows were not 32 samples long", g.Limit())
	}
}

// A probe takes the p10 of the RTTs of requests started during it (by
// nearest rank: the 2nd smallest of 20), not their minimum; requests that
// started before it do not count.
func TestProbeTakesTheQuantile(t *testing.T) {
	for _, q := range []float64{0, -1} {
		g, err := NewGradient(GradientConfig{InitialLimit: 20, Probe: ProbeConfig{Interval: 1, RTTs: 2, Quantile: q}})
		if err != nil {
			t.Fatal(err)
		}
		g.Update(Sample{Now: 0, RTT: 0.05, InFlight: 20}) // next probe at 1 s
		g.Update(Sample{Now: 0.5, RTT: 0.05, InFlight: 20})
		// starts the probe until 1 + 2 × 0.05 s
		if l := g.Update(Sample{Now: 1, RTT: 0.05, InFlight: 20}); l != 10 {
			t.Fatalf("probe limit %d, want 10 (half of 20)", l)
		}
		g.Update(Sample{Now: 1.05, RTT: 0.2, InFlight: 20}) // started at 0.85, before the probe: ignored
		for k := range 20 {
			// started at 1.01 s, RTTs 0.050 s to 0.069 s
			rtt := 0.050 + 0.001*float64(k)
			g.Update(Sample{Now: 1.01 + rtt, RTT: rtt, InFlight: 10})
		}
		g.Update(Sample{Now: 1.2, RTT: 0.25, InFlight: 10}) // ends the probe; started before it
		want := 0.050 + 0.001*float64(1)
		if q < 0 {
			want = 0.050 + 0.001*float64(0)
		}
		if got := g.NoLoadRTT(); got != want || g.Limit() != 20 {
			t.Errorf("Quantile %v: after the probe NoLoadRTT %v, limit %d; want %v and 20", q, got, g.Limit(), want)
		}
	}
}

// take returns the nearest-rank quantile of the values pushed since the
// window was last emptied (the last rttWindowMax of them), whatever their
// order, sizes and repeats, and empties the window. The expected value is
// read from a sorted copy.
func TestRTTWindowTakeMatchesASortedCopy(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var w rttWindow
	orders := []string{"random", "ascending", "descending", "equal", "few values", "organ pipe"}
	for i := range 20000 {
		size := 1 + r.IntN(rttWindowMax+64) // past rttWindowMax the oldest are overwritten
		order := orders[i%len(orders)]
		var all []float64
		for j := range size {
			var x float64
			switch order {
			case "random":
				x = 0.040 + r.ExpFloat64()*0.02
			case "ascending":
				x = float64(j)
			case "descending":
				x = float64(size - j)
			case "equal":
				x = 0.25
			case "few values":
				x = float64(r.IntN(4))
			case "organ pipe":
				x = float64(min(j, size-j))
			}
			w.push(x)
			all = append(all, x)
		}
		last := all[max(0, len(all)-rttWindowMax):]
		want := slices.Clone(last)
		slices.Sort(want)
		q := r.Float64() / 2
		if i%50 == 0 {
			q = 1e-9 // rank below 1: the smallest
		}
		rank := max(1, int(math.Ceil(q*float64(len(want)))))
		if got := w.take(q); got != want[rank-1] {
			t.Fatalf("%s, %d values: take(%v) = %v, want the %d-th smallest %v of %v", order, size, q, got, rank, want[rank-1], want)
		}
		if w.n != 0 {
			t.Fatalf("take left %d values in the window", w.n)
		}
	}
}

// selectKth finds every rank of a small array with repeats, and leaves the
// same values (a permutation) behind.
func TestSelectKthEveryRank(t *testing.T) {
	in := []float64{5, 3, 9, 3, 1, 7, 3, 8, 2, 6, 4, 9, 0, 5, 3, 1, 2, 8, 7, 6, 5}
	want := []float64{0, 1, 1, 2, 2, 3, 3, 3, 3, 4, 5, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9}
	for k := range in {
		s := slices.Clone(in)
		var rnd uint64
		if got := selectKth(s, k, &rnd); got != want[k] {
			t.Errorf("rank %d: %v, want %v", k, got, want[k])
		}
		slices.Sort(s)
		if !slices.Equal(s, want) {
			t.Fatalf("rank %d: values changed: %v", k, s)
		}
	}
}

func TestRTTWindowQuantileByHand(t *testing.T) {
	var w rttWindow
	for _, c := range []struct{ q, want float64 }{{0.1, 1}, {0.05, 1}, {0.11, 2}, {0.25, 3}, {0.49, 5}} {
		for _, x := range []float64{7, 3, 10, 1, 9, 2, 8, 4, 6, 5} {
			w.push(x)
		}
		if got := w.take(c.q); got != c.want {
			t.Errorf("quantile(%v) of 1..10 = %v, want %v", c.q, got, c.want)
		}
	}
	// 300 values: the window keeps the last 256, 45..300; the p10 is the
	// ⌈25.6⌉ = 26th smallest of them, 70
	for x := 1; x <= 300; x++ {
		w.push(float64(x))
	}
	if got := w.take(0.1); got != 70 {
		t.Errorf("p10 of the last 256 of 1..300 = %v, want 70", got)
	}
}

func TestProbeQuantileConfig(t *testing.T) {
	for _, q := range []float64{0.5, 0.7, math.NaN(), math.Inf(-1), math.Inf(1)} {
		_, err := NewGradient(GradientConfig{Probe: ProbeConfig{Quantile: q}})
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != "Probe.Quantile" || !errors.Is(err, ErrConfig) {
			t.Errorf("Quantile %v: %v, want a ConfigError for Probe.Quantile", q, err)
		}
	}
	for _, q := range []float64{-1, -1e-9, 1e-9, 0.25, 0.4999} {
		if _, err := NewVegas(VegasConfig{Probe: ProbeConfig{Quantile: q}}); err != nil {
			t.Errorf("Quantile %v: %v", q, err)
		}
	}
	// AIMD validates Probe only when it learns its baseline
	if _, err := NewAIMD(AIMDConfig{LearnBaseline: true, Probe: ProbeConfig{Quantile: 0.5}}); err == nil {
		t.Error("AIMD with LearnBaseline accepted Quantile 0.5")
	}
}

// Update with a full window (256 RTTs, limit above 256) allocates nothing.
func TestNoisyUpdateDoesNotAllocate(t *testing.T) {
	g, err := NewGradient(GradientConfig{InitialLimit: 500})
	if err != nil {
		t.Fatal(err)
	}
	src := rand.New(rand.NewPCG(3, 4))
	now := 0.0
	allocs := testing.AllocsPerRun(2000, func() {
		now += 0.0001
		g.Update(Sample{Now: now, RTT: 0.040 + src.ExpFloat64()*0.02, InFlight: 500})
	})
	if allocs != 0 {
		t.Errorf("Update allocates %v times per call", allocs)
	}
}

// BenchmarkGradientUpdateNoisy: Update with noisy RTTs and windows of 256
// (the largest selection, once per 256 samples).
func BenchmarkGradientUpdateNoisy(b *testing.B) {
	g, _ := NewGradient(GradientConfig{InitialLimit: 500})
	src := rand.New(rand.NewPCG(5, 6))
	rtts := make([]float64, 4096)
	for i := range rtts {
		rtts[i] = 0.040 + src.ExpFloat64()*0.02
	}
	b.ReportAllocs()
	now := 0.0
	for i := 0; b.Loop(); i++ {
		now += 0.0001
		g.Update(Sample{Now: now, RTT: rtts[i%len(rtts)], InFlight: 500})
	}
}

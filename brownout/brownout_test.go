package brownout

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

// feed observes n requests spread evenly over period p (Period 1 s), each
// with the given queue wait and latency.
func feed(d *Dimmer, p, n int, wait, latency float64) {
	for i := range n {
		d.Observe(float64(p)+(float64(i)+0.5)/float64(n), wait, latency)
	}
}

func mustNew(t *testing.T, cfg Config) *Dimmer {
	t.Helper()
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// A window of one Period makes every step see only the Period just ended,
// so each step's input is exactly what the test fed.
func TestLevelFallsByDecreasePerPeriod(t *testing.T) {
	for _, tc := range []struct {
		name     string
		decrease float64 // as configured (0 = default)
		factor   float64 // the documented factor
	}{{"default", 0, 0.8}, {"half", 0.5, 0.5}} {
		t.Run(tc.name, func(t *testing.T) {
			d := mustNew(t, Config{TargetP99: 0.1, Window: 1, Decrease: tc.decrease})
			want := 1.0
			for p := range 12 {
				feed(d, p, 100, 0, 0.2)
				// Within a Period the level does not move (the first call
				// would take the first step, so skip p = 0).
				if p == 0 {
				} else if got := d.Level(float64(p) + 0.999); got != want {
					t.Fatalf("t=%v: level %v before the step is due, want %v", float64(p)+0.999, got, want)
				}
				want *= tc.factor
				if want < 1.0/1024 {
					want = 0
				}
				if got := d.Level(float64(p + 1)); got != want {
					t.Fatalf("step at t=%d: level %v, want %v", p+1, got, want)
				}
			}
			if st := d.Stats(); st.Samples != 100 || math.Abs(st.P99-0.2)/0.2 > maxRelError {
				t.Fatalf("stats %+v, want 100 samples and p99 ≈ 0.2", st)
			}
		})
	}
}

func TestLevelRisesByIncreaseBelowBand(t *testing.T) {
	d := mustNew(t, Config{TargetP99: 0.1, Window: 1, Increase: 0.1})
	want := 1.0
	p := 0
	for ; p < 5; p++ { // down to 0.8^5
		feed(d, p, 100, 0, 0.2)
		want *= 0.8
		d.Level(float64(p + 1))
	}
	if got := d.Level(float64(p)); got != want {
		t.Fatalf("after 5 slow periods: level %v, want %v", got, want)
	}
	// 0.05 s is below (1−0.2)×0.1 = 0.08 s: +0.1 per Period, capped at 1.
	for ; p < 15; p++ {
		feed(d, p, 100, 0, 0.05)
		want = min(1, want+0.1)
		if got := d.Level(float64(p + 1)); got != want {
			t.Fatalf("step at t=%d: level %v, want %v", p+1, got, want)
		}
	}
	if want != 1 {
		t.Fatalf("test did not reach the cap: %v", want)
	}
}

func TestLevelHoldsInHysteresisBand(t *testing.T) {
	d := mustNew(t, Config{TargetP99: 0.1, Window: 1})
	p := 0
	for ; p < 3; p++ {
		feed(d, p, 100, 0, 0.2)
		d.Level(float64(p + 1))
	}
	held := d.Level(float64(p))
	f := 0.8
	if held != f*f*f {
		t.Fatalf("level %v after 3 slow periods, want 0.512", held)
	}
	// 0.09 s lies between the rise threshold 0.08 s and the target 0.1 s.
	for ; p < 53; p++ {
		feed(d, p, 100, 0, 0.09)
		if got := d.Level(float64(p + 1)); got != held {
			t.Fatalf("step at t=%d with p99 in the band: level %v, want it held at %v", p+1, got, held)
		}
	}
	if st := d.Stats(); !(st.P99 > 0.08 && st.P99 < 0.1) {
		t.Fatalf("estimated p99 %v is not in the band (0.08, 0.1)", st.P99)
	}
}

func TestLevelStaysInMinOne(t *testing.T) {
	const min = 0.3
	d := mustNew(t, Config{TargetP99: 0.1, Window: 2, Min: min})
	rng := rand.New(rand.NewPCG(1, 2))
	sawMin, sawOne := false, false
	for p := range 400 {
		scale := 0.01 // fast regime: p99 ≈ 46 ms, under 80 ms
		if (p/25)%2 == 0 {
			scale = 0.3 // slow regime
		}
		for i := range 60 {
			d.Observe(float64(p)+float64(i)/60, rng.Float64()*0.01, rng.ExpFloat64()*scale)
		}
		got := d.Level(float64(p + 1))
		if got < min || got > 1 {
			t.Fatalf("t=%d: level %v outside [%v, 1]", p+1, got, min)
		}
		sawMin = sawMin || got == min
		sawOne = sawOne || (got == 1 && p > 30)
	}
	if !sawMin || !sawOne {
		t.Fatalf("the regimes should reach both ends: saw Min %v, saw 1 %v", sawMin, sawOne)
	}
}

func TestMinZeroSwitchesOff(t *testing.T) {
	d := mustNew(t, Config{TargetP99: 0.1, Window: 1})
	for p := range 40 {
		feed(d, p, 50, 0, 1)
		d.Level(float64(p + 1))
	}
	if got := d.Level(40.5); got != 0 {
		t.Fatalf("level %v after 40 slow periods, want 0", got)
	}
	if d.Optional(40.5, 0) {
		t.Fatal("Optional(u=0) at level 0 = true")
	}
}

func TestWaitSignal(t *testing.T) {
	t.Run("alone", func(t *testing.T) {
		d := mustNew(t, Config{TargetWait: 0.05, Window: 1})
		want := 1.0
		p := 0
		// Latencies of 10 s would lower any p99 target; none is set.
		for ; p < 4; p++ {
			feed(d, p, 100, 0.1, 10)
			want *= 0.8
			if got := d.Level(float64(p + 1)); got != want {
				t.Fatalf("step at t=%d: level %v, want %v", p+1, got, want)
			}
		}
		if st := d.Stats(); math.Abs(st.Wait-0.1) > 1e-9 || st.P99 < 9 {
			t.Fatalf("stats %+v, want mean wait 0.1 and p99 ≈ 10", st)
		}
		// Mean 0.045 s: between 0.04 and 0.05, holds.
		for ; p < 14; p++ {
			for i := range 100 {
				d.Observe(float64(p)+float64(i)/100, 0.03+float64(0.03*float64(i%2)), 10)
			}
			if got := d.Level(float64(p + 1)); got != want {
				t.Fatalf("step at t=%d, mean wait in the band: level %v, want %v", p+1, got, want)
			}
		}
		if st := d.Stats(); math.Abs(st.Wait-0.045) > 1e-9 {
			t.Fatalf("mean wait %v, want 0.045", st.Wait)
		}
		for ; p < 16; p++ {
			feed(d, p, 100, 0.01, 10)
			want += 0.05
			if got := d.Level(float64(p + 1)); got != want {
				t.Fatalf("step at t=%d, short waits: level %v, want %v", p+1, got, want)
			}
		}
	})
	t.Run("ignored without target", func(t *testing.T) {
		d := mustNew(t, Config{TargetP99: 0.1, Window: 1})
		feed(d, 0, 100, 0, 0.2)
		d.Level(1)
		for p := 1; p < 6; p++ {
			feed(d, p, 100, 30, 0.01) // long waits, fast responses
			d.Level(float64(p + 1))
		}
		if got := d.Level(6.5); got != 1 {
			t.Fatalf("level %v, want back at 1: wait has no target", got)
		}
	})
	t.Run("either over lowers", func(t *testing.T) {
		d := mustNew(t, Config{TargetP99: 0.1, TargetWait: 0.05, Window: 1})
		f, inc := 0.8, 0.05
		feed(d, 0, 100, 0.2, 0.01) // wait over, p99 well under
		if got := d.Level(1); got != f {
			t.Fatalf("level %v, want 0.8", got)
		}
		feed(d, 1, 100, 0.01, 0.09) // wait under, p99 in band: hold
		if got := d.Level(2); got != 0.8 {
			t.Fatalf("level %v, want held at 0.8", got)
		}
		feed(d, 2, 100, 0.01, 0.01)
		if got := d.Level(3); got != f+inc {
			t.Fatalf("level %v, want 0.85", got)
		}
	})
}

func TestFewerThanMinSamplesHolds(t *testing.T) {
	d := mustNew(t, Config{TargetP99: 0.1, Window: 1, MinSamples: 20})
	for p := range 10 {
		feed(d, p, 19, 0, 5)
		if got := d.Level(float64(p + 1)); got != 1 {
			t.Fatalf("step at t=%d with 19 samples: level %v, want 1", p+1, got)
		}
	}
	if st := d.Stats(); st.Samples != 19 {
		t.Fatalf("samples %d, want 19", st.Samples)
	}
	// Idle: nothing observed at all.
	for p := 10; p < 20; p++ {
		if got := d.Level(float64(p + 1)); got != 1 {
			t.Fatalf("idle step at t=%d: level %v, want 1", p+1, got)
		}
	}
	if st := d.Stats(); st.Samples != 0 || st.P99 != 0 || st.Wait != 0 {
		t.Fatalf("idle stats %+v, want zeros", st)
	}
	feed(d, 20, 20, 0, 5)
	if got := d.Level(21); got != 0.8 {
		t.Fatalf("with 20 samples: level %v, want 0.8", got)
	}
}

// exactQuantile is the nearest-rank quantile num/den of sorted values.
func exactQuantile(sorted []float64, num, den int) float64 {
	rank := (len(sorted)*num + den - 1) / den
	return sorted[max(rank, 1)-1]
}

func TestQuantileAccuracy(t *testing.T) {
	rng := rand.New(rand.NewPCG(42, 4242))
	dists := []struct {
		name string
		draw func() float64
	}{
		{"exponential 50ms", func() float64 { return rng.ExpFloat64() * 0.05 }},
		{"lognormal median 20ms", func() float64 { return 0.02 * math.Exp(rng.NormFloat64()) }},
		{"uniform 1ms-1s", func() float64 { return 0.001 + float64(rng.Float64()*0.999) }},
		{"pareto 1ms a=1.2", func() float64 { return 0.001 / math.Pow(1-rng.Float64(), 1/1.2) }},
		{"bimodal 5ms/500ms", func() float64 {
			if rng.IntN(10) == 0 {
				return 0.5 + float64(0.05*rng.NormFloat64())
			}
			return 0.005 + float64(0.001*rng.NormFloat64())
		}},
		{"microseconds", func() float64 { return 2e-6 + float64(rng.ExpFloat64()*20e-6) }},
	}
	quantiles := [][2]int{{50, 100}, {90, 100}, {99, 100}, {999, 1000}}
	for _, dist := range dists {
		t.Run(dist.name, func(t *testing.T) {
			vals := make([]float64, 0, 10000)
			for len(vals) < cap(vals) {
				v := dist.draw()
				if v >= 1e-6 && v < maxSeconds { // the documented range
					vals = append(vals, v)
				}
			}
			var h histogram
			d := mustNew(t, Config{TargetP99: 1, Window: 1})
			for i, v := range vals {
				h[bucketOf(v)]++
				d.Observe(float64(i)/float64(len(vals)), 0, v)
			}
			sorted := slices.Clone(vals)
			slices.Sort(sorted)
			for _, q := range quantiles {
				exact := exactQuantile(sorted, q[0], q[1])
				est := h.quantile(uint64(len(vals)), uint64(q[0]), uint64(q[1]))
				if rel := math.Abs(est-exact) / exact; rel > maxRelError+1e-12 {
					t.Errorf("q%d/%d: estimate %v, exact %v, relative error %.4f > %.4f", q[0], q[1], est, exact, rel, maxRelError)
				}
			}
			d.Level(1)
			st := d.Stats()
			exact := exactQuantile(sorted, 99, 100)
			if st.Samples != len(vals) || math.Abs(st.P99-exact)/exact > maxRelError+1e-12 {
				t.Errorf("dimmer: %+v, want %d samples and p99 within 6.25%% of %v", st, len(vals), exact)
			}
		})
	}
}

// Each log-linear bucket i holds [2^o(1+j/8), 2^o(1+(j+1)/8)) µs, and its
// value is within 6.25% of everything in it.
func TestBucketBounds(t *testing.T) {
	i := 1
	for o := range octaves {
		for j := range subBuckets {
			lo := math.Ldexp(1, o) * (1 + float64(j)/8) // µs
			hi := math.Ldexp(1, o) * (1 + float64(j+1)/8)
			for _, us := range []float64{lo * (1 + 1e-9), (lo + hi) / 2, hi * (1 - 1e-9)} {
				if got := bucketOf(us / 1e6); got != i {
					t.Fatalf("bucketOf(%v µs) = %d, want %d", us, got, i)
				}
			}
			v := bucketValue(i) * 1e6
			if math.Abs(v-lo)/lo > maxRelError+1e-12 || math.Abs(hi-v)/hi > maxRelError {
				t.Fatalf("bucket %d [%v, %v) µs: value %v too far", i, lo, hi, v)
			}
			i++
		}
	}
	if i != overflowIdx {
		t.Fatalf("log-linear buckets end at %d, overflow is %d", i, overflowIdx)
	}
	for _, tc := range []struct {
		seconds float64
		bucket  int
	}{{0, 0}, {0.9e-6, 0}, {134.3, overflowIdx}, {1e6, overflowIdx}} {
		if got := bucketOf(tc.seconds); got != tc.bucket {
			t.Errorf("bucketOf(%v) = %d, want %d", tc.seconds, got, tc.bucket)
		}
	}
	if bucketValue(0) != 0.5e-6 || bucketValue(overflowIdx) != 134.217728 {
		t.Errorf("edge values %v, %v", bucketValue(0), bucketValue(overflowIdx))
	}
}

func TestOldObservationsLeaveWindow(t *testing.T) {
	// Window 5: a step at t reads periods floor(t)−5 … floor(t).
	d := mustNew(t, Config{TargetP99: 0.1, Window: 5})
	feed(d, 0, 1000, 0, 2) // a burst of slow requests in [0, 1)
	for p := 1; p < 5; p++ {
		feed(d, p, 100, 0, 0.01)
	}
	d.Level(5)
	if st := d.Stats(); st.Samples != 1400 || math.Abs(st.P99-2)/2 > maxRelError {
		t.Fatalf("at t=5: %+v, want the burst still in the window (1400 samples, p99 ≈ 2 s)", st)
	}
	feed(d, 5, 100, 0, 0.01)
	d.Level(6)
	if st := d.Stats(); st.Samples != 500 || math.Abs(st.P99-0.01)/0.01 > maxRelError {
		t.Fatalf("at t=6: %+v, want the burst gone (500 samples, p99 ≈ 10 ms)", st)
	}

	// A sub-window never written again leaves the window too: period 0's
	// slot still holds the burst, untouched since.
	d = mustNew(t, Config{TargetP99: 0.1, Window: 5})
	feed(d, 0, 1000, 0, 2)
	feed(d, 100, 50, 0, 0.01) // slot 100 mod 6 = 4
	d.Level(101)
	if st := d.Stats(); st.Samples != 50 || math.Abs(st.P99-0.01)/0.01 > maxRelError {
		t.Fatalf("after a long gap: %+v, want only the 50 fresh samples", st)
	}
}

func TestLateAndInvalidObservationsIgnored(t *testing.T) {
	d := mustNew(t, Config{TargetP99: 0.1, Window: 1}) // 2 sub-windows
	feed(d, 2, 30, 0, 0.01)                            // slot 0 now holds period 2
	d.Observe(0.5, 0, 0.01)                            // period 0: its slot moved on
	for _, o := range [][3]float64{
		{math.NaN(), 0, 0.01}, {math.Inf(1), 0, 0.01}, {2.5, -1, 0.01}, {2.5, 0, -0.01},
		{2.5, math.NaN(), 0.01}, {2.5, 0, math.NaN()}, {2.5, math.Inf(1), 0.01}, {2.5, 0, math.Inf(1)},
	} {
		d.Observe(o[0], o[1], o[2])
	}
	d.Level(3)
	if st := d.Stats(); st.Samples != 30 {
		t.Fatalf("samples %d, want 30 (late and invalid observations ignored)", st.Samples)
	}
	// Negative instants are a valid timeline.
	d = mustNew(t, Config{TargetP99: 0.1, Window: 1})
	feed(d, -5, 40, 0, 0.5)
	if got := d.Level(-4); got != 0.8 {
		t.Fatalf("negative timeline: level %v, want 0.8", got)
	}
}

func TestConcurrentObserveLevel(t *testing.T) {
	const workers, perWorker = 8, 1000

	// No reset races inside one Period: every observation is counted.
	d := mustNew(t, Config{TargetP99: 0.1})
	d.Observe(0, 0, 0.01) // claims period 0's sub-window before the race
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				now := float64(i) / perWorker
				d.Observe(now, 0.001, 0.01+float64(float64(w)*0.001))
				if l := d.Level(now); l != 1 {
					t.Errorf("level %v, want 1", l)
					return
				}
			}
		})
	}
	wg.Wait()
	d.Level(2)
	if st := d.Stats(); st.Samples != workers*perWorker+1 {
		t.Fatalf("samples %d, want %d", st.Samples, workers*perWorker+1)
	}

	// Time advancing through slow and fast regimes, with resets, steps and
	// snapshots racing.
	const min = 0.2
	d = mustNew(t, Config{TargetP99: 0.1, Period: 0.1, Window: 0.5, Min: min})
	stop := make(chan struct{})
	var reader sync.WaitGroup
	reader.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			st := d.Stats()
			if st.Level < min || st.Level > 1 || st.Samples < 0 || st.P99 < 0 || st.P99 > maxSeconds {
				t.Errorf("stats out of range: %+v", st)
				return
			}
		}
	})
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 9))
			for i := range 2000 {
				now := float64(i) * 0.002 // 4 s, 40 Periods
				lat := 0.01
				if now >= 1 && now < 2 {
					lat = 0.5
				}
				d.Observe(now, 0, lat)
				d.Optional(now, rng.Float64())
				if l := d.Level(now); l < min || l > 1 {
					t.Errorf("level %v outside [%v, 1]", l, min)
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	reader.Wait()
}

func TestOptionalShare(t *testing.T) {
	d := mustNew(t, Config{TargetP99: 0.1, Window: 1})
	for p := range 2 {
		feed(d, p, 100, 0, 0.2)
		d.Level(float64(p + 1))
	}
	const now = 2.5 // no step due until t=3
	level := d.Level(now)
	if f := 0.8; level != f*f {
		t.Fatalf("level %v, want 0.64", level)
	}
	rng := rand.New(rand.NewPCG(2014, 4))
	const n = 100_000
	on := 0
	for range n {
		if d.Optional(now, rng.Float64()) {
			on++
		}
	}
	if share := float64(on) / n; math.Abs(share-level) > 0.01 {
		t.Fatalf("share %v with level %v", share, level)
	}
	full := mustNew(t, Config{TargetP99: 0.1})
	if !full.Optional(0, math.Nextafter(1, 0)) {
		t.Fatal("level 1 refused u just below 1")
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		field string
		cfg   Config
	}{
		{"TargetWait, TargetP99", Config{}},
		{"TargetWait", Config{TargetWait: -1}},
		{"TargetWait", Config{TargetWait: math.NaN()}},
		{"TargetP99", Config{TargetP99: math.Inf(1)}},
		{"Period", Config{TargetP99: 1, Period: -1}},
		{"Window", Config{TargetP99: 1, Period: 1, Window: 0.5}},
		{"Window", Config{TargetP99: 1, Period: 0.01, Window: 10.5}},
		{"Window", Config{TargetP99: 1, Window: math.NaN()}},
		{"Hysteresis", Config{TargetP99: 1, Hysteresis: 1}},
		{"Hysteresis", Config{TargetP99: 1, Hysteresis: -0.1}},
		{"Decrease", Config{TargetP99: 1, Decrease: 1}},
		{"Decrease", Config{TargetP99: 1, Decrease: math.NaN()}},
		{"Increase", Config{TargetP99: 1, Increase: 1.5}},
		{"Min", Config{TargetP99: 1, Min: 1}},
		{"Min", Config{TargetP99: 1, Min: -0.1}},
		{"MinSamples", Config{TargetP99: 1, MinSamples: -1}},
	} {
		_, err := New(tc.cfg)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field || !errors.Is(err, ErrConfig) {
			t.Errorf("New(%+v) = %v, want a ConfigError on %s wrapping ErrConfig", tc.cfg, err, tc.field)
		}
	}
	// Limits that are allowed.
	for _, cfg := range []Config{
		{TargetWait: 0.1},
		{TargetP99: 1, Period: 0.1, Window: 0.1},
		{TargetP99: 1, Period: 0.1, Window: 100}, // 1000 Periods
		{TargetP99: 1, Increase: 1, Min: 0.99},
	} {
		if _, err := New(cfg); err != nil {
			t.Errorf("New(%+v): %v", cfg, err)
		}
	}
}

func TestDefaults(t *testing.T) {
	d := mustNew(t, Config{TargetP99: 0.1})
	want := Config{TargetP99: 0.1, Period: 1, Window: 10, Hysteresis: 0.2, Decrease: 0.8, Increase: 0.05, MinSamples: 20}
	if d.cfg != want {
		t.Fatalf("defaults %+v, want %+v", d.cfg, want)
	}
	if len(d.subs) != 11 {
		t.Fatalf("%d sub-windows, want 11", len(d.subs))
	}
	if d.Level(0) != 1 {
		t.Fatal("a new dimmer is not at 1")
	}
	if d = mustNew(t, Config{TargetP99: 0.1, Period: 0.1, Window: 0.3}); len(d.subs) != 4 {
		t.Fatalf("Window 0.3 / Period 0.1: %d sub-windows, want 4", len(d.subs))
	}
}

func TestContext(t *testing.T) {
	ctx := context.Background()
	if !OptionalFrom(ctx) {
		t.Fatal("OptionalFrom without a decision = false, want true")
	}
	off := WithOptional(ctx, false)
	if OptionalFrom(off) {
		t.Fatal("OptionalFrom after WithOptional(false) = true")
	}
	if !OptionalFrom(WithOptional(off, true)) {
		t.Fatal("the innermost decision should win")
	}
	if n := testing.AllocsPerRun(100, func() { OptionalFrom(off) }); n != 0 {
		t.Fatalf("OptionalFrom allocates %v", n)
	}
}

func TestHotPathDoesNotAllocate(t *testing.T) {
	d := mustNew(t, Config{TargetP99: 0.1})
	now := 0.0
	if n := testing.AllocsPerRun(1000, func() {
		now += 0.01 // crosses Periods: resets and steps included
		d.Observe(now, 0.001, 0.02)
		d.Level(now)
		d.Stats()
	}); n != 0 {
		t.Fatalf("Observe+Level+Stats allocate %v per run", n)
	}
}

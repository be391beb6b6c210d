package health

import (
	"errors"
	"math"
	"testing"

	"github.com/spillwayhq/spillway/rng"
)

// states runs results ('P' pass, 'F' fail) through a Tracker and returns
// its state after each ('U' healthy, 'D' unhealthy) and the indices where
// Record reported a change.
func states(t *testing.T, cfg ActiveConfig, results string) (string, []int) {
	t.Helper()
	tr, err := NewTracker(0, cfg)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, len(results))
	var changes []int
	for i, r := range []byte(results) {
		if tr.Record(float64(i+1), r == 'P') {
			changes = append(changes, i)
		}
		out[i] = 'D'
		if tr.Healthy() {
			out[i] = 'U'
		}
	}
	return string(out), changes
}

func TestTrackerFallRise(t *testing.T) {
	fall3rise2 := ActiveConfig{Fall: 3, Rise: 2}
	for _, tc := range []struct {
		name    string
		cfg     ActiveConfig
		results string
		want    string
		changes []int
	}{
		{"down: first failure agrees", fall3rise2, "FPPFFPFFFPFPP", "DDUUUUUUDDDDU", []int{2, 8, 12}},
		{"down: first pass decides", fall3rise2, "PFFF", "UUUD", []int{0, 3}},
		{"up: first failure decides", ActiveConfig{Fall: 3, Rise: 2, InitiallyHealthy: true}, "FPPFFF", "DDUUUD", []int{0, 2, 5}},
		{"up: first pass agrees", ActiveConfig{Fall: 3, Rise: 2, InitiallyHealthy: true}, "PFFPFFF", "UUUUUUD", []int{6}},
		{"defaults are fall 3 rise 2", ActiveConfig{InitiallyHealthy: true}, "PFFFPPP", "UUUDDUU", []int{3, 5}},
		{"fall 1 rise 1 follows every result", ActiveConfig{Fall: 1, Rise: 1}, "PFPFF", "UDUDD", []int{0, 1, 2, 3}},
		{"flapping never reaches rise", ActiveConfig{Fall: 2, Rise: 3}, "FPPFPPFPPF", "DDDDDDDDDD", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, changes := states(t, tc.cfg, tc.results)
			if got != tc.want {
				t.Errorf("states after %s = %s, want %s", tc.results, got, tc.want)
			}
			if !equalInts(changes, tc.changes) {
				t.Errorf("changes at %v, want %v", changes, tc.changes)
			}
		})
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestTrackerStats(t *testing.T) {
	tr, err := NewTracker(10, ActiveConfig{Fall: 2, Rise: 2})
	if err != nil {
		t.Fatal(err)
	}
	if s := tr.Stats(); s.Checked || s.Healthy || s.Since != 10 || s.Last != 10 || s.Run != 0 {
		t.Fatalf("fresh stats %+v", s)
	}
	for i, ok := range []bool{true, false, false, true, true} { // up at 11, down at 13, up at 15
		tr.Record(float64(11+i), ok)
	}
	want := TrackerStats{Healthy: true, Checked: true, Run: 2, Since: 15, Last: 15, Checks: 5, Failures: 2, Transitions: 3, ToHealthy: 2}
	if s := tr.Stats(); s != want {
		t.Errorf("stats = %+v, want %+v", s, want)
	}
}

func TestActiveConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg   ActiveConfig
		field string
	}{
		{ActiveConfig{Interval: -1}, "Interval"},
		{ActiveConfig{Interval: math.Inf(1)}, "Interval"},
		{ActiveConfig{Timeout: math.NaN()}, "Timeout"},
		{ActiveConfig{Jitter: 1}, "Jitter"},
		{ActiveConfig{Jitter: math.NaN()}, "Jitter"},
		{ActiveConfig{Fall: -1}, "Fall"},
		{ActiveConfig{Rise: -2}, "Rise"},
	} {
		err := tc.cfg.Validate()
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field || !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: err = %v, want a ConfigError on %s", tc.cfg, err, tc.field)
		}
		if _, err := NewTracker(0, tc.cfg); err == nil {
			t.Errorf("%+v: NewTracker accepted it", tc.cfg)
		}
	}
	for _, ok := range []ActiveConfig{{}, {Jitter: -1}, {Jitter: 0.99, Interval: 0.05, Timeout: 1, Fall: 1, Rise: 1}} {
		if err := ok.Validate(); err != nil {
			t.Errorf("%+v: %v", ok, err)
		}
	}
}

func TestActiveConfigDefaults(t *testing.T) {
	if got, want := (ActiveConfig{}).Timing(), (CheckTiming{Interval: 2, Timeout: 1, Fall: 3, Rise: 2}); got != want {
		t.Errorf("default timing %+v, want %+v", got, want)
	}
	// The default timeout never exceeds a short interval.
	if got := (ActiveConfig{Interval: 0.25}).Timing().Timeout; got != 0.25 {
		t.Errorf("timeout with a 0.25 s interval = %v, want 0.25", got)
	}
	// Wait at the ends and the middle of the unit interval, default jitter 0.1.
	for _, tc := range []struct{ u, want float64 }{{0, 1.8}, {0.5, 2}, {-3, 1.8}, {math.NaN(), 1.8}} {
		if got := (ActiveConfig{}).Wait(tc.u); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("Wait(%v) = %v, want %v", tc.u, got, tc.want)
		}
	}
	if got := (ActiveConfig{}).Wait(2); got > 2.2 || got < 2.2-1e-9 { // clamped to just below 1
		t.Errorf("Wait(2) = %v, want 2.2 (or just below)", got)
	}
	if got := (ActiveConfig{Jitter: -1, Interval: 3}).Wait(0.9); got != 3 {
		t.Errorf("Wait without jitter = %v, want 3", got)
	}
	if got := (ActiveConfig{Jitter: -1}).FirstWait(0.9); got != 0 {
		t.Errorf("FirstWait without jitter = %v, want 0", got)
	}
	// The Checker keeps the normalized config and asks it again: defaults
	// must not be applied twice (no jitter must stay none).
	for _, c := range []ActiveConfig{{}, {Jitter: -1}, {Interval: 0.3, Fall: 1}} {
		if n := c.normalized(); n.normalized() != n || n.Wait(0.9) != c.Wait(0.9) || n.FirstWait(0.9) != c.FirstWait(0.9) {
			t.Errorf("%+v: normalized twice differs: %+v vs %+v", c, n, n.normalized())
		}
	}
	if got := (ActiveConfig{Interval: 4, Jitter: 0.5}).FirstWait(0.5); got != 1 {
		t.Errorf("FirstWait(0.5) = %v, want 1 (0.5 × 0.5 × 4)", got)
	}
}

// Seeded draws: waits cover Interval × [0.9, 1.1) evenly, and targets that
// start together drift apart.
func TestJitterSpreadsChecks(t *testing.T) {
	cfg := ActiveConfig{Interval: 2, Jitter: 0.1}
	r := rng.New(42)
	const n = 10000
	var bins [10]int
	sum := 0.0
	for range n {
		w := cfg.Wait(r.Float64())
		if w < 1.8 || w > 2.2 {
			t.Fatalf("wait %v outside [1.8, 2.2]", w)
		}
		sum += w
		bins[min(int((w-1.8)/0.04), 9)]++
	}
	if mean := sum / n; math.Abs(mean-2) > 0.01 {
		t.Errorf("mean wait %v, want 2 ± 0.01", mean)
	}
	for i, c := range bins {
		if c < 800 || c > 1200 { // expected 1000 each; σ ≈ 30
			t.Errorf("bin %d holds %d of %d waits, want about 1000", i, c, n)
		}
	}

	// 100 targets added at the same instant; their 50th checks spread over
	// more than an interval with jitter, and coincide without.
	spread := func(cfg ActiveConfig) float64 {
		lo, hi := math.Inf(1), math.Inf(-1)
		for range 100 {
			at := cfg.FirstWait(r.Float64())
			for range 49 {
				at += cfg.Wait(r.Float64())
			}
			lo, hi = min(lo, at), max(hi, at)
		}
		return hi - lo
	}
	if s := spread(cfg); s < 2 {
		t.Errorf("50th checks of 100 targets spread over %v s, want > one interval (2 s)", s)
	}
	if s := spread(ActiveConfig{Interval: 2, Jitter: -1}); s != 0 {
		t.Errorf("without jitter the 50th checks spread over %v s, want 0", s)
	}
}

package retry

import (
	"errors"
	"math"
	"strings"
	"testing"
	"testing/quick"

	"github.com/spillwayhq/spillway/rng"
)

// fixedRand returns the same u every time and counts its draws.
type fixedRand struct {
	u     float64
	draws int
}

func (f *fixedRand) Float64() float64 { f.draws++; return f.u }

// someUniforms returns edge values and a spread of mulberry32 draws.
func someUniforms() []float64 {
	us := []float64{0, 0.5, 0.999999999767169, 1 - 0x1p-53, 0x1p-32, 0.1, 0.3}
	m := rng.New(42)
	for i := 0; i < 500; i++ {
		us = append(us, m.Float64())
	}
	return us
}

// The retry-storm reference draws its jitter as rand() * 0.5 * 2 ** n with
// n = 1 for the first retry. Full jitter with Base 0.5 must give the very
// same float64 for the same u and n.
func TestFullJitterMatchesReference(t *testing.T) {
	b := Backoff{Base: 0.5, Cap: 1e9}
	for _, u := range someUniforms() {
		for n := 1; n <= 12; n++ {
			want := u * 0.5 * math.Pow(2, float64(n)) // the reference's expression, left to right
			r := &fixedRand{u: u}
			if got := b.Delay(n, 0, r); got != want {
				t.Fatalf("u=%v n=%d: Delay = %v, reference %v", u, n, got, want)
			}
			if r.draws != 1 {
				t.Fatalf("u=%v n=%d: %d draws, want 1", u, n, r.draws)
			}
		}
	}
}

func TestCeiling(t *testing.T) {
	b := Backoff{Base: 0.5, Cap: 30}
	for _, c := range []struct {
		attempt int
		want    float64
	}{{-3, 0.5}, {0, 0.5}, {1, 1}, {2, 2}, {5, 16}, {6, 30}, {60, 30}, {5000, 30}, {math.MaxInt, 30}} {
		if got := b.Ceiling(c.attempt); got != c.want {
			t.Errorf("Ceiling(%d) = %v, want %v", c.attempt, got, c.want)
		}
	}
	// The zero value uses the defaults.
	if got := (Backoff{}).Ceiling(1); got != 2*DefaultBase {
		t.Errorf("zero Backoff: Ceiling(1) = %v, want %v", got, 2*DefaultBase)
	}
	if got := (Backoff{}).Ceiling(100); got != DefaultCap {
		t.Errorf("zero Backoff: Ceiling(100) = %v, want %v", got, DefaultCap)
	}
}

func TestDelayStepTable(t *testing.T) {
	for _, c := range []struct {
		b       Backoff
		attempt int
		prev, u float64
		want    float64
	}{
		{Backoff{Base: 0.5, Cap: 30}, 1, 0, 0.5, 0.5},
		{Backoff{Base: 0.5, Cap: 30}, 3, 0, 0.25, 1},
		{Backoff{Base: 0.5, Cap: 30}, 10, 0, 0.5, 15}, // capped ceiling 30
		{Backoff{Base: 0.5, Cap: 30, Jitter: EqualJitter}, 2, 0, 0, 1},
		{Backoff{Base: 0.5, Cap: 30, Jitter: EqualJitter}, 2, 0, 0.5, 1.5},
		{Backoff{Base: 0.5, Cap: 30, Jitter: NoJitter}, 3, 0, 0.9, 4},
		{Backoff{Base: 1, Cap: 30, Jitter: DecorrelatedJitter}, 1, 0, 0, 1},     // prev 0 counts as Base
		{Backoff{Base: 1, Cap: 30, Jitter: DecorrelatedJitter}, 1, 0, 0.5, 2},   // 1 + 0.5·(3 − 1)
		{Backoff{Base: 1, Cap: 30, Jitter: DecorrelatedJitter}, 7, 4, 0.5, 6.5}, // 1 + 0.5·(12 − 1)
		{Backoff{Base: 1, Cap: 5, Jitter: DecorrelatedJitter}, 7, 4, 0.5, 5},    // capped
		{Backoff{Base: 1, Cap: 5, Jitter: DecorrelatedJitter}, 7, 99, 0, 1},     // prev beyond Cap
	} {
		r := &fixedRand{u: c.u}
		if got := c.b.Delay(c.attempt, c.prev, r); got != c.want {
			t.Errorf("%+v Delay(%d, %v) with u=%v = %v, want %v", c.b, c.attempt, c.prev, c.u, got, c.want)
		}
	}
}

func TestNoJitterDrawsNothing(t *testing.T) {
	r := &fixedRand{u: 0.5}
	Backoff{Jitter: NoJitter}.Delay(3, 0, r)
	if r.draws != 0 {
		t.Errorf("NoJitter drew %d numbers, want 0", r.draws)
	}
}

// Property: every jitter stays within its documented bounds for any valid
// configuration, attempt, previous delay and u in [0, 1).
func TestDelayBounds(t *testing.T) {
	prop := func(base, capExtra, prevScale uint32, attempt uint16, u32 uint32) bool {
		b := Backoff{Base: float64(base%100000+1) / 1000, Cap: 0}
		b.Cap = b.Base + float64(capExtra%1000000)/1000
		u := float64(u32) / 4294967296
		c := math.Min(b.Cap, b.Base*math.Pow(2, float64(attempt%80)))
		n := int(attempt % 80)

		b.Jitter = FullJitter
		if d := b.Delay(n, 0, &fixedRand{u: u}); !(d >= 0 && (d < c || d == 0)) {
			t.Logf("full: %+v n=%d u=%v: %v not in [0, %v)", b, n, u, d, c)
			return false
		}
		b.Jitter = EqualJitter
		if d := b.Delay(n, 0, &fixedRand{u: u}); !(d >= c/2 && d <= c) {
			t.Logf("equal: %+v n=%d u=%v: %v not in [%v, %v]", b, n, u, d, c/2, c)
			return false
		}
		b.Jitter = DecorrelatedJitter
		prev := b.Base * (1 + float64(prevScale%1000)/10)
		hi := math.Min(b.Cap, 3*math.Min(prev, b.Cap))
		if d := b.Delay(n, prev, &fixedRand{u: u}); !(d >= b.Base && d <= hi) {
			t.Logf("decorrelated: %+v prev=%v u=%v: %v not in [%v, %v]", b, prev, u, d, b.Base, hi)
			return false
		}
		b.Jitter = NoJitter
		return b.Delay(n, 0, nil) == c
	}
	if err := quick.Check(prop, &quick.Config{MaxCount: 5000}); err != nil {
		t.Error(err)
	}
}

// Nonsense inputs still give a finite delay within [0, Cap].
func TestDelayHostileInputs(t *testing.T) {
	bs := []Backoff{
		{}, {Base: -1, Cap: -1}, {Base: math.NaN(), Cap: math.Inf(1)}, {Base: 10, Cap: 1},
		{Base: 1e300, Cap: math.MaxFloat64, Jitter: DecorrelatedJitter}, {Jitter: 200},
	}
	for _, b := range bs {
		for _, prev := range []float64{0, -5, math.NaN(), math.Inf(1), math.MaxFloat64} {
			for _, n := range []int{math.MinInt, -1, 0, 1, 1023, 1100, math.MaxInt} {
				for _, u := range []float64{0, 0.5, 1 - 0x1p-53} {
					d := b.Delay(n, prev, &fixedRand{u: u})
					if math.IsNaN(d) || math.IsInf(d, 0) || d < 0 {
						t.Fatalf("%+v Delay(%d, %v) u=%v = %v", b, n, prev, u, d)
					}
				}
			}
		}
	}
}

func TestDelayNilRand(t *testing.T) {
	b := Backoff{Base: 0.5, Cap: 30}
	for i := 0; i < 1000; i++ {
		if d := b.Delay(2, 0, nil); d < 0 || d >= 2 {
			t.Fatalf("Delay(2) with math/rand = %v, want [0, 2)", d)
		}
	}
}

func TestBackoffValidate(t *testing.T) {
	for _, c := range []struct {
		b     Backoff
		field string // "" means valid
	}{
		{Backoff{}, ""},
		{Backoff{Base: 0.5, Cap: 0.5}, ""},
		{Backoff{Base: 40}, "Backoff.Cap"}, // above the default cap
		{Backoff{Base: -1}, "Backoff.Base"},
		{Backoff{Base: math.NaN()}, "Backoff.Base"},
		{Backoff{Base: math.Inf(1)}, "Backoff.Base"},
		{Backoff{Cap: -2}, "Backoff.Cap"},
		{Backoff{Cap: math.Inf(1)}, "Backoff.Cap"},
		{Backoff{Base: 2, Cap: 1}, "Backoff.Cap"},
		{Backoff{Jitter: NoJitter + 1}, "Backoff.Jitter"},
	} {
		err := c.b.Validate()
		switch {
		case c.field == "" && err != nil:
			t.Errorf("%+v: unexpected error %v", c.b, err)
		case c.field != "" && err == nil:
			t.Errorf("%+v: no error, want one about %s", c.b, c.field)
		case c.field != "" && (!errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.field) || !strings.HasPrefix(err.Error(), "retry: ")):
			t.Errorf("%+v: error %q does not wrap ErrConfig or name %s", c.b, err, c.field)
		}
	}
}

func TestJitterString(t *testing.T) {
	for j, want := range map[Jitter]string{FullJitter: "full", EqualJitter: "equal", DecorrelatedJitter: "decorrelated", NoJitter: "none", 9: "Jitter(9)"} {
		if got := j.String(); got != want {
			t.Errorf("Jitter(%d).String() = %q, want %q", uint8(j), got, want)
		}
	}
}

func BenchmarkDelayFull(b *testing.B) {
	bo := Backoff{Base: 0.5, Cap: 30}
	r := rng.New(1)
	b.ReportAllocs()
	var s float64
	for i := 0; b.Loop(); i++ {
		s += bo.Delay(i&7, 0, r)
	}
	_ = s
}

func BenchmarkDelayDecorrelated(b *testing.B) {
	bo := Backoff{Base: 0.5, Cap: 30, Jitter: DecorrelatedJitter}
	r := rng.New(1)
	b.ReportAllocs()
	prev := 0.0
	for b.Loop() {
		prev = bo.Delay(0, prev, r)
	}
}

package clock

import (
	"testing"
	"time"
)

func TestDurationRoundTrip(t *testing.T) {
	for _, d := range []time.Duration{0, 1, 999, time.Millisecond, 1500 * time.Millisecond, -3 * time.Second, 90 * 24 * time.Hour} {
		if got := Duration(Seconds(d)); got != d {
			t.Errorf("Duration(Seconds(%v)) = %v", d, got)
		}
	}
}

func TestRealIsMonotonicAndConverts(t *testing.T) {
	r := NewReal()
	a, b := r.Now(), r.Now()
	if a < 0 || b < a {
		t.Fatalf("Now went %v then %v", a, b)
	}
	at := time.Now()
	if got := r.Time(r.At(at)); got.Sub(at).Abs() > time.Microsecond {
		t.Fatalf("Time(At(t)) = %v, want %v", got, at)
	}
}

func TestManual(t *testing.T) {
	var m Manual
	m.Advance(1.5)
	m.Advance(0.25)
	if m.Now() != 1.75 {
		t.Fatalf("manual clock at %v, want 1.75", m.Now())
	}
}

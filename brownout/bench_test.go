package brownout

import (
	"context"
	"math"
	"testing"
)

func benchDimmer(b *testing.B) *Dimmer {
	d, err := New(Config{TargetP99: 0.1, TargetWait: 0.05})
	if err != nil {
		b.Fatal(err)
	}
	return d
}

// Observe at a steady 1M requests per second of virtual time: one
// sub-window reset per million observations.
func BenchmarkObserve(b *testing.B) {
	d := benchDimmer(b)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		d.Observe(float64(i)*1e-6, 0.001, 0.001+float64(float64(i&1023)*1e-5))
	}
}

// All goroutines observe the same Period: the contended case.
func BenchmarkObserveParallel(b *testing.B) {
	d := benchDimmer(b)
	d.Observe(0, 0, 0)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			d.Observe(0.5, 0.001, 0.001+float64(float64(i&1023)*1e-5))
			i++
		}
	})
}

// Level when no step is due: one comparison and one atomic load.
func BenchmarkLevel(b *testing.B) {
	d := benchDimmer(b)
	d.Level(0) // first step; the next is due at 1
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		_ = d.Level(0.5)
	}
}

func BenchmarkLevelParallel(b *testing.B) {
	d := benchDimmer(b)
	d.Level(0)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_ = d.Level(0.5)
		}
	})
}

// Level taking a step on every call (the default 11 sub-windows, all full):
// the cost paid once per Period.
func BenchmarkLevelStep(b *testing.B) {
	d := benchDimmer(b)
	for p := range 11 {
		for i := range 1000 {
			d.Observe(float64(p)+float64(i)/1000, 0.001, float64(i)*1e-4)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		d.nextStep.Store(math.Float64bits(math.Inf(-1))) // make a step due
		d.Level(10.5)
	}
	if st := d.Stats(); st.Samples != 11000 {
		b.Fatalf("step saw %d samples, want 11000", st.Samples)
	}
}

func BenchmarkOptionalFrom(b *testing.B) {
	ctx := WithOptional(context.Background(), true)
	b.ReportAllocs()
	for b.Loop() {
		_ = OptionalFrom(ctx)
	}
}

package limit

import (
	"math/rand/v2"
	"testing"
)

func benchUpdate(b *testing.B, alg Algorithm) {
	b.ReportAllocs()
	now := 0.0
	for i := 0; b.Loop(); i++ {
		now += 0.0001
		rtt := 0.040 + 0.001*float64(i%16) // varying, some above the tolerances
		alg.Update(Sample{Now: now, RTT: rtt, InFlight: 100, Dropped: i%97 == 0})
	}
}

func BenchmarkFixedUpdate(b *testing.B) {
	f, _ := NewFixed(100)
	benchUpdate(b, f)
}

func BenchmarkAIMDUpdate(b *testing.B) {
	a, _ := NewAIMD(AIMDConfig{})
	benchUpdate(b, a)
}

func BenchmarkAIMDLearnedUpdate(b *testing.B) {
	a, _ := NewAIMD(AIMDConfig{LearnBaseline: true})
	benchUpdate(b, a)
}

func BenchmarkGradientUpdate(b *testing.B) {
	g, _ := NewGradient(GradientConfig{})
	benchUpdate(b, g)
}

func BenchmarkGradient2Update(b *testing.B) {
	g, _ := NewGradient2(Gradient2Config{})
	benchUpdate(b, g)
}

func BenchmarkVegasUpdate(b *testing.B) {
	v, _ := NewVegas(VegasConfig{})
	benchUpdate(b, v)
}

// BenchmarkRTTWindowTake: the p10 of a full window of 256 noisy RTTs, the
// selection done once per window (per round trip); divide by 256 for its
// share of one Update.
func BenchmarkRTTWindowTake(b *testing.B) {
	src := rand.New(rand.NewPCG(7, 8))
	rtts := make([]float64, 64*rttWindowMax)
	for i := range rtts {
		rtts[i] = 0.040 + src.ExpFloat64()*0.02
	}
	var w rttWindow
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		for _, x := range rtts[(i%64)*rttWindowMax:][:rttWindowMax] {
			w.push(x)
		}
		w.take(0.1)
	}
}

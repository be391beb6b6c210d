package balancer

import (
	"strconv"
	"testing"

	"github.com/spillwayhq/spillway/rng"
)

var benchSizes = []int{10, 100, 1000}

// benchInFlight returns counters with uneven small loads.
func benchInFlight(n int) *InFlight {
	f := NewInFlight(n)
	for i := 0; i < n; i++ {
		for k := 0; k < i%5; k++ {
			f.Inc(i)
		}
	}
	return f
}

func benchIntLoads(n int) Loads {
	l := make(IntLoads, n)
	for i := range l {
		l[i] = i % 5
	}
	return l
}

func runPick(b *testing.B, p Picker, set Loads) {
	b.ReportAllocs()
	sink := 0
	for b.Loop() {
		i, _ := p.Pick(set)
		sink += i
	}
	_ = sink
}

func BenchmarkPick(b *testing.B) {
	for _, n := range benchSizes {
		sz := "n=" + strconv.Itoa(n)
		weights := make([]int, n)
		for i := range weights {
			weights[i] = 1 + i%7
		}
		wrr, err := NewSmoothWRR(weights)
		if err != nil {
			b.Fatal(err)
		}
		b.Run("RoundRobin/"+sz, func(b *testing.B) { runPick(b, &RoundRobin{}, Size(n)) })
		b.Run("SmoothWRR/"+sz, func(b *testing.B) { runPick(b, wrr, Size(n)) })
		b.Run("Random/default/"+sz, func(b *testing.B) { runPick(b, &Random{}, Size(n)) })
		b.Run("Random/mulberry/"+sz, func(b *testing.B) { runPick(b, &Random{Rand: rng.New(1)}, Size(n)) })
		b.Run("LeastOutstanding/inflight/"+sz, func(b *testing.B) { runPick(b, &LeastOutstanding{}, benchInFlight(n)) })
		b.Run("LeastOutstanding/intloads/"+sz, func(b *testing.B) { runPick(b, &LeastOutstanding{}, benchIntLoads(n)) })
		b.Run("P2C/inflight/default/"+sz, func(b *testing.B) { runPick(b, &P2C{}, benchInFlight(n)) })
		b.Run("P2C/inflight/mulberry/"+sz, func(b *testing.B) { runPick(b, &P2C{Rand: rng.New(1)}, benchInFlight(n)) })
		b.Run("P2C/intloads/mulberry/"+sz, func(b *testing.B) { runPick(b, &P2C{Rand: rng.New(1)}, benchIntLoads(n)) })
		b.Run("PowerOfD3/inflight/default/"+sz, func(b *testing.B) { runPick(b, &PowerOfD{D: 3}, benchInFlight(n)) })
		b.Run("PowerOfD3/intloads/mulberry/"+sz, func(b *testing.B) { runPick(b, &PowerOfD{D: 3, Rand: rng.New(1)}, benchIntLoads(n)) })
	}
}

// A request's whole cycle as a proxy runs it: pick, Inc, Dec, from all
// goroutines at once over 1,000 endpoints.
func BenchmarkPickParallel(b *testing.B) {
	const n = 1000
	for _, bc := range []struct {
		name string
		p    Picker
	}{
		{"P2C/inflight/default", &P2C{}},
		{"RoundRobin/inflight", &RoundRobin{}},
	} {
		b.Run(bc.name+"/n=1000", func(b *testing.B) {
			f := benchInFlight(n)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i, _ := bc.p.Pick(f)
					f.Inc(i)
					f.Dec(i)
				}
			})
		})
	}
}

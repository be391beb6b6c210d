package balancer

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spillwayhq/spillway/rng"
)

// benchSet returns a set of n endpoints, weights 1 + i mod 7 when
// unequal, with i mod 5 requests in flight to endpoint i and a latency
// estimate on each.
func benchSet(b *testing.B, n int, unequal bool) *Set {
	b.Helper()
	s, err := NewSet(SetConfig{})
	if err != nil {
		b.Fatal(err)
	}
	eps := make([]Endpoint, n)
	for i := range eps {
		eps[i] = Endpoint{Addr: "10.0." + strconv.Itoa(i/256) + "." + strconv.Itoa(i%256) + ":80"}
		if unequal {
			eps[i].Weight = 1 + i%7
		}
	}
	s.Update(0, eps)
	snap := s.Snapshot()
	for i := 0; i < n; i++ {
		e := snap.Endpoint(i)
		e.Start()
		e.Done(0, 0.001*float64(1+i%3), true)
		for k := 0; k < i%5; k++ {
			e.Start()
		}
	}
	return s
}

type setPickerCase struct {
	name    string
	unequal bool
	p       SetPicker
}

func setPickerCases() []setPickerCase {
	return []setPickerCase{
		{"WeightedRandom/equal", false, &WeightedRandom{}},
		{"WeightedRandom/weighted", true, &WeightedRandom{}},
		{"LeastRequest/equal", false, &LeastRequest{}},
		{"LeastRequest/equal/mulberry", false, &LeastRequest{Rand: rng.New(1)}},
		{"LeastRequest/weighted", true, &LeastRequest{}},
		{"LeastRequest/weighted/d3-bias0.5", true, &LeastRequest{Choices: 3, Bias: 0.5}},
		{"PeakEWMA", false, &PeakEWMA{}},
		{"SmoothWeighted", true, &SmoothWeighted{}},
		{"Loaded/RoundRobin", false, Loaded{&RoundRobin{}}},
		{"Loaded/P2C", false, Loaded{&P2C{}}},
		{"Loaded/LeastOutstanding", false, Loaded{&LeastOutstanding{}}},
	}
}

// A request's whole cycle on one goroutine: Set.Pick (current snapshot,
// pick, Start), then Done with a latency.
func BenchmarkSetPick(b *testing.B) {
	for _, c := range setPickerCases() {
		for _, n := range benchSizes {
			b.Run(c.name+"/n="+strconv.Itoa(n), func(b *testing.B) {
				s := benchSet(b, n, c.unequal)
				b.ReportAllocs()
				now := 1.0
				for b.Loop() {
					now += 1e-6
					e, err := s.Pick(now, c.p)
					if err != nil {
						b.Fatal(err)
					}
					e.Done(now, 0.002, true)
				}
			})
		}
	}
}

// The pick alone on a snapshot, for comparison with BenchmarkPick.
func BenchmarkSetPickOnly(b *testing.B) {
	for _, c := range setPickerCases() {
		b.Run(c.name+"/n=1000", func(b *testing.B) {
			snap := benchSet(b, 1000, c.unequal).Snapshot()
			b.ReportAllocs()
			sink := 0
			for b.Loop() {
				i, _ := c.p.Pick(snap, 1)
				sink += i
			}
			_ = sink
		})
	}
}

// Picks from all goroutines over 1,000 endpoints while another goroutine
// changes the set every millisecond (drain on/off, health down/up: each
// change republishes the snapshot).
func BenchmarkSetPickParallelUpdates(b *testing.B) {
	const n = 1000
	for _, c := range []setPickerCase{
		{"LeastRequest/equal", false, &LeastRequest{}},
		{"LeastRequest/weighted", true, &LeastRequest{}},
		{"PeakEWMA", false, &PeakEWMA{}},
		{"WeightedRandom/weighted", true, &WeightedRandom{}},
	} {
		b.Run(c.name+"/n=1000", func(b *testing.B) {
			s := benchSet(b, n, c.unequal)
			addrs := addrs(s.Snapshot())
			stop := make(chan struct{})
			done := make(chan struct{})
			var published atomic.Int64
			go func() {
				defer close(done)
				tick := time.NewTicker(time.Millisecond)
				defer tick.Stop()
				for k := 0; ; k++ {
					select {
					case <-stop:
						return
					case <-tick.C:
					}
					a := addrs[k%n]
					now := float64(k)
					if k%2 == 0 {
						s.Drain(now, a, k%4 == 0)
					} else {
						s.SetHealthy(now, a, k%4 == 3)
					}
					published.Add(1)
				}
			}()
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				now := 1.0
				for pb.Next() {
					now += 1e-6
					e, err := s.Pick(now, c.p)
					if err != nil {
						b.Error(err)
						return
					}
					e.Done(now, 0.002, true)
				}
			})
			close(stop)
			<-done
			b.ReportMetric(float64(published.Load()), "updates")
		})
	}
}

// The cost of one state change: a health flip republishes the snapshot.
func BenchmarkSetPublish(b *testing.B) {
	for _, n := range benchSizes {
		b.Run("SetHealthy/n="+strconv.Itoa(n), func(b *testing.B) {
			s := benchSet(b, n, true)
			a := s.Snapshot().Endpoint(0).Addr()
			b.ReportAllocs()
			k := 0
			for b.Loop() {
				k++
				s.SetHealthy(float64(k), a, k%2 == 0)
			}
		})
	}
}

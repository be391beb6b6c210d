package balancergrpc

import (
	"strconv"
	"testing"

	gbal "google.golang.org/grpc/balancer"
)

// BenchmarkPick measures one pick and its Done over n ready connections.
func BenchmarkPick(b *testing.B) {
	for _, n := range []int{10, 1000} {
		for _, d := range []int{2, 3} {
			b.Run("n="+strconv.Itoa(n)+"/d="+strconv.Itoa(d), func(b *testing.B) {
				scs := make([]*fakeSC, n)
				for i := range scs {
					scs[i] = &fakeSC{name: "10.0.0." + strconv.Itoa(i) + ":443"}
				}
				p := build(&pickerBuilder{choices: d}, scs...)
				b.ReportAllocs()
				for b.Loop() {
					r, err := p.Pick(gbal.PickInfo{})
					if err != nil {
						b.Fatal(err)
					}
					r.Done(gbal.DoneInfo{})
				}
			})
		}
	}
}

// BenchmarkPickParallel is BenchmarkPick from every P at once: the
// counters are shared, each on its own cache line.
func BenchmarkPickParallel(b *testing.B) {
	scs := make([]*fakeSC, 10)
	for i := range scs {
		scs[i] = &fakeSC{name: "10.0.0." + strconv.Itoa(i) + ":443"}
	}
	p := build(&pickerBuilder{choices: 2}, scs...)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r, _ := p.Pick(gbal.PickInfo{})
			r.Done(gbal.DoneInfo{})
		}
	})
}

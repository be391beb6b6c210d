package sim

import (
	"math"

	"github.com/spillwayhq/spillway/balancer"
	"github.com/spillwayhq/spillway/rng"
)

const (
	binsMaxN     = 10_000_000 // bins in one experiment (memory: 8 bytes each)
	binsMaxTotal = 30_000_000 // sum of all n (time: each ball is placed three times; ~15 s)
	binsMaxItems = 100
)

var ballsIntoBins = Scenario{
	Name:    "balls-into-bins",
	Ref:     "balls_into_bins",
	Summary: "n requests onto n servers by 1, 2 or 3 random choices: the maximum load",
	Bind: func(f *Flags) Runner {
		ns := f.Ints("n", []int{1000, 100000, 1000000}, Positive, binsMaxN,
			"numbers of balls and bins, one experiment each (each from 2 to 10000000, sum at most 3e7, at most 100 items)")
		seed := f.Seed("seed", 2026, "base seed; d choices draw from seed + d")
		return func() (*Report, error) {
			total := 0
			for i, n := range *ns {
				if n < 2 {
					return nil, Badf("n", "item %d (%d) must be at least 2: ln ln n is undefined for n = 1", i+1, n)
				}
				total += n
			}
			switch {
			case len(*ns) > binsMaxItems:
				return nil, Badf("n", "at most %d items, got %d", binsMaxItems, len(*ns))
			case total > binsMaxTotal:
				return nil, Badf("n", "the sum must be at most %d, got %d", binsMaxTotal, total)
			}
			return runBallsIntoBins(*ns, *seed), nil
		}
	},
}

func runBallsIntoBins(ns []int, seed uint32) *Report {
	r := &Report{}
	r.Println("n          max load d=1  d=2  d=3 | ln n/ln ln n  log2(ln n)")
	table := r.Table("max_load", "n", "d1", "d2", "d3", "ln_n_over_ln_ln_n", "log2_ln_n")
	largest := 0
	for _, n := range ns {
		largest = max(largest, n)
	}
	buf := make([]int, largest)
	for _, n := range ns {
		var maxLoad [3]int
		for d := 1; d <= 3; d++ {
			maxLoad[d-1] = binsMaxLoad(buf[:n], d, seed+uint32(d))
		}
		l := rng.Log(float64(n))
		ll := rng.Log(l)
		ratio, log2 := l/ll, ll/math.Ln2
		r.Println(PadEnd(Int(n), 11) + PadStart(Int(maxLoad[0]), 13) + PadStart(Int(maxLoad[1]), 5) +
			PadStart(Int(maxLoad[2]), 5) + " |" + PadStart(Fixed(ratio, 2), 13) + PadStart(Fixed(log2, 2), 12))
		table.Add(n, maxLoad[0], maxLoad[1], maxLoad[2], ratio, log2)
	}
	return r
}

// binsMaxLoad throws len(bins) balls into the bins, each to the least loaded
// of d random bins chosen by the library's PowerOfD picker, and returns the
// fullest bin's count. The bins are cleared first.
func binsMaxLoad(bins []int, d int, seed uint32) int {
	clear(bins)
	p := &balancer.PowerOfD{D: d, Rand: rng.New(seed)}
	var set balancer.Loads = balancer.IntLoads(bins)
	for range bins {
		b, _ := p.Pick(set) // never fails: 1 ≤ d ≤ 3 and the set is not empty
		bins[b]++
	}
	return binsMax(bins)
}

func binsMax(xs []int) int {
	m := 0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

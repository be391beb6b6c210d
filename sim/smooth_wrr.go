package sim

import (
	"errors"
	"strconv"
	"strings"

	"github.com/spillwayhq/spillway/balancer"
)

const (
	wrrLetters    = "abcdefghijklmnopqrstuvwxyz" // server names; one per weight
	wrrMaxWeight  = 1000
	wrrMaxPicks   = 10000
	wrrTracePicks = 7 // the reference traces the first 7 picks
)

var smoothWRR = Scenario{
	Name:    "smooth-wrr",
	Ref:     "smooth_wrr",
	Summary: "Nginx's smooth weighted round robin next to naive WRR: pick trace and longest run",
	Bind: func(f *Flags) Runner {
		weights := f.Ints("weights", []int{5, 1, 1}, NonNegative, wrrMaxWeight,
			"server weights, servers named a, b, c, … (at most 26 servers, each weight at most 1000, one positive at least)")
		picks := f.Int("picks", 14, Positive, wrrMaxPicks, "picks to make and print (at most 10000)")
		return func() (*Report, error) { return runSmoothWRR(*weights, *picks) }
	},
}

func runSmoothWRR(weights []int, picks int) (*Report, error) {
	if len(weights) > len(wrrLetters) {
		return nil, Badf("weights", "at most %d servers (a to z), got %d", len(wrrLetters), len(weights))
	}
	r := &Report{}
	trace := r.Table("trace", "pick", "before", "server", "after")
	s, err := wrrSmooth(weights, picks, func(k, winner int, before, after []int64) {
		r.Println("pick " + Int(k+1) + ": [" + wrrJoin(before) + "] -> " + wrrLetters[winner:winner+1] +
			" -> [" + wrrJoin(after) + "]")
		trace.Add(k+1, before, wrrLetters[winner:winner+1], after)
	})
	if err != nil {
		var ce *balancer.ConfigError
		if errors.As(err, &ce) {
			return nil, Badf("weights", "%s", ce.Reason)
		}
		return nil, Badf("weights", "%v", err)
	}
	nv := wrrNaive(weights, picks)
	label := wrrRatio(weights)
	seqs := r.Table("sequences", "method", "weights", "picks", "longest_run")
	for _, row := range []struct {
		method, prefix string
		seq            []int
	}{{"smooth", "smooth ", s}, {"naive", "naive  ", nv}} {
		names := wrrNames(row.seq)
		run := wrrLongestRun(row.seq)
		r.Println(row.prefix + label + "  " + names + "   longest run " + Int(run))
		seqs.Add(row.method, label, names, run)
	}
	first := wrrNames(s[:min(wrrTracePicks, len(s))])
	match := first == "a a b a c a a"
	r.Println("first 7 equal a a b a c a a? " + strconv.FormatBool(match))
	r.Table("seed_vector", "first_7", "equal_a_a_b_a_c_a_a").Add(first, match)

	big := []int{20, 20, 1}
	s2, _ := wrrSmooth(big, 41, nil)
	n2 := wrrNaive(big, 41)
	var counts [3]int
	for _, e := range s2 {
		counts[e]++
	}
	r.Println("weights 20:20:1 over 41 picks: longest run smooth " + Int(wrrLongestRun(s2)) + ", naive " +
		Int(wrrLongestRun(n2)) + "; smooth counts a/b/c = " + Int(counts[0]) + "/" + Int(counts[1]) + "/" + Int(counts[2]))
	r.Table("weights_20_20_1", "longest_run_smooth", "longest_run_naive", "count_a", "count_b", "count_c").
		Add(wrrLongestRun(s2), wrrLongestRun(n2), counts[0], counts[1], counts[2])
	return r, nil
}

// wrrSmooth makes picks with the library's SmoothWRR and calls show (when
// not nil) for each of the first wrrTracePicks with the current values before
// and after the winner paid back the total.
func wrrSmooth(weights []int, picks int, show func(k, winner int, before, after []int64)) ([]int, error) {
	p, err := balancer.NewSmoothWRR(weights)
	if err != nil {
		return nil, err
	}
	set := balancer.Size(p.Len())
	out := make([]int, picks)
	var after []int64
	for k := range out {
		if out[k], err = p.Pick(set); err != nil {
			return nil, err
		}
		if show != nil && k < wrrTracePicks {
			after = p.Current(after)
			before := append([]int64(nil), after...)
			before[out[k]] += p.Total()
			show(k, out[k], before, append([]int64(nil), after...))
		}
	}
	return out, nil
}

// wrrNaive is weighted round robin without smoothing: weight picks in a row
// for each server, in list order, repeated.
func wrrNaive(weights []int, picks int) []int {
	var cycle []int
	for i, w := range weights {
		for range w {
			cycle = append(cycle, i)
		}
	}
	out := make([]int, picks)
	for k := range out {
		out[k] = cycle[k%len(cycle)]
	}
	return out
}

// wrrLongestRun is the most consecutive picks of one server (1 for no picks,
// as in the reference).
func wrrLongestRun(s []int) int {
	best, run := 1, 1
	for i := 1; i < len(s); i++ {
		if s[i] == s[i-1] {
			run++
		} else {
			run = 1
		}
		best = max(best, run)
	}
	return best
}

func wrrNames(s []int) string {
	parts := make([]string, len(s))
	for i, e := range s {
		parts[i] = wrrLetters[e : e+1]
	}
	return strings.Join(parts, " ")
}

func wrrJoin(v []int64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = strconv.FormatInt(x, 10)
	}
	return strings.Join(parts, ",")
}

func wrrRatio(weights []int) string {
	parts := make([]string, len(weights))
	for i, w := range weights {
		parts[i] = Int(w)
	}
	return strings.Join(parts, ":")
}

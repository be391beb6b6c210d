package balancer

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func letters(picks []int) string {
	var b strings.Builder
	for i, p := range picks {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteByte(byte('a' + p))
	}
	return b.String()
}

func mustWRR(t testing.TB, weights ...int) *SmoothWRR {
	t.Helper()
	p, err := NewSmoothWRR(weights)
	if err != nil {
		t.Fatalf("NewSmoothWRR(%v): %v", weights, err)
	}
	return p
}

func wrrPicks(t testing.TB, p *SmoothWRR, k int) []int {
	t.Helper()
	out := make([]int, k)
	for i := range out {
		var err error
		if out[i], err = p.Pick(Size(p.Len())); err != nil {
			t.Fatalf("pick %d: %v", i, err)
		}
	}
	return out
}

// The seed's vector (reference/smooth_wrr.out): 5:1:1 gives a a b a c a a,
// and the current values after each pick are the ones the reference prints.
func TestSmoothWRRSeedVector(t *testing.T) {
	p := mustWRR(t, 5, 1, 1)
	steps := []struct {
		pick  int
		after []int64
	}{
		{0, []int64{-2, 1, 1}},
		{0, []int64{-4, 2, 2}},
		{1, []int64{1, -4, 3}},
		{0, []int64{-1, -3, 4}},
		{2, []int64{4, -2, -2}},
		{0, []int64{2, -1, -1}},
		{0, []int64{0, 0, 0}},
	}
	var cur []int64
	for k, s := range steps {
		got, err := p.Pick(Size(3))
		if err != nil {
			t.Fatal(err)
		}
		cur = p.Current(cur)
		if got != s.pick || !slices.Equal(cur, s.after) {
			t.Errorf("pick %d: got %c %v, want %c %v", k+1, 'a'+got, cur, 'a'+s.pick, s.after)
		}
	}
	if got := letters(wrrPicks(t, p, 7)); got != "a a b a c a a" {
		t.Errorf("second period = %s, want a a b a c a a", got)
	}
}

func longestRun(picks []int) int {
	best, run := 0, 0
	for i := range picks {
		if i > 0 && picks[i] == picks[i-1] {
			run++
		} else {
			run = 1
		}
		best = max(best, run)
	}
	return best
}

func TestSmoothWRR20To20To1(t *testing.T) {
	picks := wrrPicks(t, mustWRR(t, 20, 20, 1), 41)
	if got := longestRun(picks); got != 1 {
		t.Errorf("longest run = %d, want 1: %s", got, letters(picks))
	}
	counts := [3]int{}
	for _, p := range picks {
		counts[p]++
	}
	if counts != [3]int{20, 20, 1} {
		t.Errorf("counts = %v, want [20 20 1]", counts)
	}
}

// Property: for random weight sets, every window of total-weight consecutive
// picks (not only the aligned ones) holds each endpoint exactly weight times,
// and the current values stay in (−total, n·total) and sum to 0.
func TestSmoothWRRWindowProperty(t *testing.T) {
	src := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 300; trial++ {
		n := 1 + src.IntN(8)
		weights := make([]int, n)
		for i := range weights {
			weights[i] = src.IntN(12) // zeros included
		}
		weights[src.IntN(n)]++ // at least one positive
		total := 0
		for _, w := range weights {
			total += w
		}
		p := mustWRR(t, weights...)
		var cur []int64
		picks := make([]int, 3*total)
		for k := range picks {
			picks[k], _ = p.Pick(Size(n))
			cur = p.Current(cur)
			var sum int64
			for _, c := range cur {
				sum += c
				if c <= -int64(total) || c >= int64(n*total) {
					t.Fatalf("weights %v pick %d: current %v out of bounds", weights, k, cur)
				}
			}
			if sum != 0 {
				t.Fatalf("weights %v pick %d: currents %v sum to %d", weights, k, cur, sum)
			}
		}
		for start := 0; start+total <= len(picks); start++ {
			counts := make([]int, n)
			for _, e := range picks[start : start+total] {
				counts[e]++
			}
			if !slices.Equal(counts, weights) {
				t.Fatalf("weights %v: window at %d has counts %v", weights, start, counts)
			}
		}
	}
}

func TestSmoothWRRZeroWeightNeverPicked(t *testing.T) {
	p := mustWRR(t, 0, 3, 0, 1)
	for k, e := range wrrPicks(t, p, 100) {
		if e == 0 || e == 2 {
			t.Fatalf("pick %d chose weight-0 endpoint %d", k, e)
		}
	}
}

func TestNewSmoothWRRErrors(t *testing.T) {
	tests := []struct {
		weights []int
		field   string
	}{
		{nil, "weights"},
		{[]int{}, "weights"},
		{[]int{3, -1, 2}, "weights[1]"},
		{[]int{0, 0}, "weights"},
		{[]int{MaxTotalWeight, 1}, "weights"},
	}
	for _, tc := range tests {
		_, err := NewSmoothWRR(tc.weights)
		var ce *ConfigError
		if !errors.As(err, &ce) || !errors.Is(err, ErrConfig) {
			t.Errorf("%v: err = %v, want a *ConfigError wrapping ErrConfig", tc.weights, err)
			continue
		}
		if ce.Field != tc.field {
			t.Errorf("%v: field = %q, want %q", tc.weights, ce.Field, tc.field)
		}
		if !strings.HasPrefix(err.Error(), "balancer: "+tc.field+": ") {
			t.Errorf("%v: message %q does not name the field", tc.weights, err)
		}
	}
	if _, err := NewSmoothWRR([]int{MaxTotalWeight}); err != nil {
		t.Errorf("total = MaxTotalWeight: %v", err)
	}
}

func TestSmoothWRRSetMismatch(t *testing.T) {
	p := mustWRR(t, 1, 1)
	if _, err := p.Pick(Size(3)); !errors.Is(err, ErrSetMismatch) {
		t.Errorf("err = %v, want ErrSetMismatch", err)
	}
	if cur := p.Current(nil); !slices.Equal(cur, []int64{0, 0}) {
		t.Errorf("a refused pick changed the state: %v", cur)
	}
}

// The weights are copied: changing the caller's slice changes nothing.
func TestSmoothWRRCopiesWeights(t *testing.T) {
	w := []int{5, 1, 1}
	p := mustWRR(t, w...)
	w[0] = 0
	if got := letters(wrrPicks(t, p, 7)); got != "a a b a c a a" {
		t.Errorf("got %s after the caller changed its slice", got)
	}
}

func TestRoundRobinCycles(t *testing.T) {
	var p RoundRobin
	steps := []struct {
		n, want int
	}{
		{3, 0}, {3, 1}, {3, 2}, {3, 0}, {3, 1}, {3, 2},
		{2, 0}, // 7th pick (k = 6) on a set resized to 2: 6 mod 2
		{2, 1},
		{5, 3}, // k = 8
		{1, 0},
	}
	for k, s := range steps {
		got, err := p.Pick(Size(s.n))
		if err != nil || got != s.want {
			t.Errorf("pick %d over %d: got %d, %v; want %d", k, s.n, got, err, s.want)
		}
	}
}

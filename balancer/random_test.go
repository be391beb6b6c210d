package balancer

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/spillwayhq/spillway/rng"
)

var _ Rand = (*rng.Mulberry32)(nil)

// script is a Rand that returns fixed values in order.
type script struct {
	t    *testing.T
	vals []float64
}

func (s *script) Float64() float64 {
	if len(s.vals) == 0 {
		s.t.Fatal("picker drew more values than scripted")
	}
	u := s.vals[0]
	s.vals = s.vals[1:]
	return u
}

func (s *script) done() {
	if len(s.vals) != 0 {
		s.t.Errorf("picker left %d scripted draws unused", len(s.vals))
	}
}

func TestEmptySet(t *testing.T) {
	for name, p := range map[string]Picker{
		"RoundRobin":       &RoundRobin{},
		"Random":           &Random{},
		"LeastOutstanding": &LeastOutstanding{},
		"P2C":              &P2C{},
		"PowerOfD":         &PowerOfD{D: 3},
	} {
		for _, set := range []Loads{Size(0), Size(-2), IntLoads(nil), NewInFlight(0)} {
			if i, err := p.Pick(set); !errors.Is(err, ErrNoEndpoints) || i != -1 {
				t.Errorf("%s over %v: got %d, %v; want -1, ErrNoEndpoints", name, set, i, err)
			}
		}
	}
}

// Random picks floor(u·n); a Rand outside [0, 1) is clamped into range.
func TestRandomSteps(t *testing.T) {
	steps := []struct {
		u    float64
		n    int
		want int
	}{
		{0, 10, 0},
		{0.1, 10, 1},
		{0.999, 10, 9},
		{0.5, 3, 1},
		{0.6667, 3, 2},
		{1, 4, 3},    // faulty Rand: clamped
		{-0.2, 4, 0}, // faulty Rand: clamped
	}
	for _, s := range steps {
		r := &script{t: t, vals: []float64{s.u}}
		if got, _ := (&Random{Rand: r}).Pick(Size(s.n)); got != s.want {
			t.Errorf("u=%v n=%d: got %d, want %d", s.u, s.n, got, s.want)
		}
		r.done()
	}
}

// P2C with scripted draws over loads [5 2 7 2]: a = floor(u1·4),
// b = floor(u2·3), b++ if b ≥ a; b wins only with a strictly smaller load.
func TestP2CSteps(t *testing.T) {
	loads := IntLoads{5, 2, 7, 2}
	steps := []struct {
		u1, u2 float64
		want   int // a, b in the comment
	}{
		{0, 0, 1},       // a=0, b=0→1; 2 < 5
		{0.5, 0.5, 1},   // a=2, b=1;   2 < 7
		{0.99, 0.99, 3}, // a=3, b=2;   7 ≮ 2
		{0.25, 0.7, 1},  // a=1, b=2→3; 2 ≮ 2: tie keeps a
		{0.75, 0, 3},    // a=3, b=0;   5 ≮ 2
		{0.3, 0.34, 1},  // a=1, b=1→2; 7 ≮ 2
		{0.1, 0.9, 3},   // a=0, b=2→3; 2 < 5
	}
	for k, s := range steps {
		r := &script{t: t, vals: []float64{s.u1, s.u2}}
		if got, _ := (&P2C{Rand: r}).Pick(loads); got != s.want {
			t.Errorf("step %d (%v, %v): got %d, want %d", k, s.u1, s.u2, got, s.want)
		}
		r.done()
	}
	// One endpoint: no draws.
	r := &script{t: t}
	if got, err := (&P2C{Rand: r}).Pick(IntLoads{9}); got != 0 || err != nil {
		t.Errorf("single endpoint: got %d, %v", got, err)
	}
}

// PowerOfD with scripted draws over loads [4 1 3 1 0]: best = floor(u·5),
// then each further candidate wins only with a strictly smaller load.
func TestPowerOfDSteps(t *testing.T) {
	loads := IntLoads{4, 1, 3, 1, 0}
	steps := []struct {
		d    int
		us   []float64
		want int
	}{
		{1, []float64{0.5}, 2},                // Random
		{2, []float64{0, 0.5}, 2},             // 4 then 3
		{2, []float64{0.2, 0.6}, 1},           // 1 then 1: earliest kept
		{2, []float64{0.4, 0.4}, 2},           // same endpoint twice (with replacement)
		{3, []float64{0, 0.7, 0.9}, 4},        // 4, 1, 0
		{3, []float64{0.9, 0.1, 0.3}, 4},      // 0 first, nothing smaller
		{0, []float64{0.5, 0.25}, 1},          // D = 0 means 2
		{4, []float64{0.5, 0.1, 0.7, 0.0}, 3}, // loads 3, 4, 1, 4
	}
	for k, s := range steps {
		r := &script{t: t, vals: s.us}
		if got, err := (&PowerOfD{D: s.d, Rand: r}).Pick(loads); got != s.want || err != nil {
			t.Errorf("step %d (d=%d %v): got %d, %v; want %d", k, s.d, s.us, got, err, s.want)
		}
		r.done()
	}
}

func TestPowerOfDValidate(t *testing.T) {
	for _, d := range []int{-1, MaxChoices + 1} {
		p := &PowerOfD{D: d}
		var ce *ConfigError
		if err := p.Validate(); !errors.As(err, &ce) || ce.Field != "PowerOfD.D" || !errors.Is(err, ErrConfig) {
			t.Errorf("D=%d: Validate = %v", d, err)
		}
		if _, err := p.Pick(Size(3)); !errors.Is(err, ErrConfig) {
			t.Errorf("D=%d: Pick err = %v", d, err)
		}
	}
	for _, d := range []int{0, 1, MaxChoices} {
		if err := (&PowerOfD{D: d}).Validate(); err != nil {
			t.Errorf("D=%d: %v", d, err)
		}
	}
}

// LeastOutstanding over [3 1 1 0 0]: the k-th pick starts at k mod 5 and
// keeps the first strictly smaller load met going round.
func TestLeastOutstandingSteps(t *testing.T) {
	var p LeastOutstanding
	loads := IntLoads{3, 1, 1, 0, 0}
	for k, want := range []int{3, 3, 3, 3, 4, 3, 3} {
		if got, _ := p.Pick(loads); got != want {
			t.Errorf("pick %d: got %d, want %d", k, got, want)
		}
	}
}

// Property: LeastOutstanding always returns an endpoint of minimal load,
// and among equal minima the first met from k mod n going round.
func TestLeastOutstandingMinimum(t *testing.T) {
	src := rand.New(rand.NewPCG(3, 4))
	var p LeastOutstanding
	for k := 0; k < 5000; k++ {
		loads := make(IntLoads, 1+src.IntN(12))
		for i := range loads {
			loads[i] = src.IntN(4)
		}
		n := len(loads)
		start := int(uint64(k) % uint64(n)) // p has made k picks so far
		got, _ := p.Pick(loads)
		for off := 0; off < n; off++ {
			i := (start + off) % n
			if loads[i] < loads[got] {
				t.Fatalf("loads %v pick %d: chose %d (load %d) but %d has %d", loads, k, got, loads[got], i, loads[i])
			}
			if loads[i] == loads[got] {
				if i != got {
					t.Fatalf("loads %v pick %d: chose %d, but %d is met first from %d", loads, k, got, i, start)
				}
				break
			}
		}
	}
}

// Properties of P2C over random loads with a seeded Rand:
//   - the endpoint it returns is never the unique most-loaded one (n ≥ 2);
//   - with two endpoints of different load it always returns the lighter;
//   - with all loads equal it returns the first draw, so every endpoint is
//     chosen, each within ±10% of its fair share.
func TestP2CProperties(t *testing.T) {
	src := rand.New(rand.NewPCG(5, 6))
	p := &P2C{Rand: rng.New(99)}
	for trial := 0; trial < 20000; trial++ {
		loads := make(IntLoads, 2+src.IntN(10))
		for i := range loads {
			loads[i] = src.IntN(6)
		}
		top := loads[0]
		for _, l := range loads {
			top = max(top, l)
		}
		atTop := 0
		for _, l := range loads {
			if l == top {
				atTop++
			}
		}
		got, _ := p.Pick(loads)
		if atTop == 1 && loads[got] == top {
			t.Fatalf("loads %v: picked the unique most-loaded endpoint %d", loads, got)
		}
		if len(loads) == 2 && loads[0] != loads[1] && loads[got] != min(loads[0], loads[1]) {
			t.Fatalf("loads %v: picked the heavier of two", loads)
		}
	}
	const n, picks = 10, 100000
	counts := make([]int, n)
	first := &P2C{Rand: rng.New(7)}
	shadow := rng.New(7) // the same stream, read independently
	for k := 0; k < picks; k++ {
		got, _ := first.Pick(Size(n))
		a := int(shadow.Float64() * n)
		shadow.Float64()
		if got != a {
			t.Fatalf("pick %d with equal loads: got %d, first draw was %d", k, got, a)
		}
		counts[got]++
	}
	for i, c := range counts {
		if c < picks/n*9/10 || c > picks/n*11/10 {
			t.Errorf("endpoint %d chosen %d times of %d", i, c, picks)
		}
	}
}

func TestInFlight(t *testing.T) {
	f := NewInFlight(3)
	f.Inc(1)
	f.Inc(1)
	f.Inc(2)
	f.Dec(1)
	if f.Len() != 3 || f.Load(0) != 0 || f.Load(1) != 1 || f.Load(2) != 1 {
		t.Errorf("got len %d loads %d %d %d, want 3: 0 1 1", f.Len(), f.Load(0), f.Load(1), f.Load(2))
	}
	if NewInFlight(-1).Len() != 0 {
		t.Error("NewInFlight(-1) is not empty")
	}
	// P2C over two endpoints follows the counters.
	p := &P2C{}
	for k := 0; k < 100; k++ {
		if got, _ := p.Pick(inFlightWith(t, 4, 1)); got != 1 {
			t.Fatalf("picked %d over in-flight 4, 1", got)
		}
	}
}

func inFlightWith(t *testing.T, counts ...int) *InFlight {
	t.Helper()
	f := NewInFlight(len(counts))
	for i, c := range counts {
		for range c {
			f.Inc(i)
		}
	}
	return f
}

// Many goroutines share each picker and the in-flight counters (run with
// -race). Round robin and smooth WRR hand out exact shares even so; the
// counters return to zero once every request is done.
func TestConcurrentPicks(t *testing.T) {
	const n, goroutines, each = 7, 8, 700  // 8·700 = 5600 = 800·7
	wrr := mustWRR(t, 3, 1, 2, 0, 1, 0, 0) // total 7: 800 rotations
	pickers := map[string]Picker{
		"RoundRobin":       &RoundRobin{},
		"SmoothWRR":        wrr,
		"Random":           &Random{},
		"LeastOutstanding": &LeastOutstanding{},
		"P2C":              &P2C{},
		"PowerOfD":         &PowerOfD{D: 3},
	}
	for name, p := range pickers {
		f := NewInFlight(n)
		counts := make([][n]int, goroutines)
		done := make(chan struct{})
		for g := 0; g < goroutines; g++ {
			go func() {
				defer func() { done <- struct{}{} }()
				for k := 0; k < each; k++ {
					i, err := p.Pick(f)
					if err != nil {
						t.Errorf("%s: %v", name, err)
						return
					}
					f.Inc(i)
					counts[g][i]++
					f.Dec(i)
				}
			}()
		}
		for g := 0; g < goroutines; g++ {
			<-done
		}
		var total [n]int
		for _, c := range counts {
			for i := range c {
				total[i] += c[i]
			}
		}
		for i := 0; i < n; i++ {
			if f.Load(i) != 0 {
				t.Errorf("%s: endpoint %d ends with %d in flight", name, i, f.Load(i))
			}
		}
		switch name {
		case "RoundRobin":
			if total != [n]int{800, 800, 800, 800, 800, 800, 800} {
				t.Errorf("RoundRobin shares %v, want 800 each", total)
			}
		case "SmoothWRR":
			if total != [n]int{2400, 800, 1600, 0, 800, 0, 0} {
				t.Errorf("SmoothWRR shares %v, want 800 × weight", total)
			}
		}
	}
}

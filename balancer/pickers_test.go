package balancer

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/spillwayhq/spillway/rng"
)

// weighted returns a set of endpoints e0, e1, … with the given weights.
func weighted(t *testing.T, weights ...int) *Set {
	t.Helper()
	s := newSet(t, SetConfig{})
	eps := make([]Endpoint, len(weights))
	for i, w := range weights {
		eps[i] = Endpoint{Addr: "e" + string(rune('0'+i)), Weight: w}
	}
	s.Update(0, eps)
	return s
}

// setLoads starts requests so that endpoint i has loads[i] in flight.
func setLoads(snap *Snapshot, loads ...int) {
	for i, l := range loads {
		e := snap.Endpoint(i)
		for e.InFlight() < l {
			e.Start()
		}
		for e.InFlight() > l {
			e.Done(0, 0, true)
		}
	}
}

func TestSetPickersEmpty(t *testing.T) {
	empty := newSet(t, SetConfig{}).Snapshot()
	for _, p := range []SetPicker{&WeightedRandom{}, &LeastRequest{}, &LeastRequest{Choices: 3},
		&PeakEWMA{}, &SmoothWeighted{}, Loaded{&P2C{}}} {
		if i, err := p.Pick(empty, 0); !errors.Is(err, ErrNoEndpoints) || i != -1 {
			t.Errorf("%T: %d, %v; want -1, ErrNoEndpoints", p, i, err)
		}
	}
	one := weighted(t, 3).Snapshot()
	for _, p := range []SetPicker{&WeightedRandom{}, &LeastRequest{}, &LeastRequest{Choices: 3},
		&PeakEWMA{}, &SmoothWeighted{}, Loaded{&P2C{}}} {
		if i, err := p.Pick(one, 0); err != nil || i != 0 {
			t.Errorf("%T on one endpoint: %d, %v", p, i, err)
		}
	}
}

// Over a fine uniform grid of draws u, WeightedRandom's alias table gives
// every endpoint exactly its weight share, up to the grid's resolution (one
// grid step per boundary of the n cells and their n splits).
func TestWeightedRandomExactShares(t *testing.T) {
	for _, ws := range [][]int{{1, 2, 3, 4}, {1, 1, 1, 10}, {7, 1}, {3, 1, 4, 1, 5, 9, 2, 6, 5, 3}, {1000, 1, 999}} {
		snap := weighted(t, ws...).Snapshot()
		n := len(ws)
		const m = 200_000
		counts := make([]int, n)
		for k := 0; k < m; k++ {
			r := &script{t: t, vals: []float64{(float64(k) + 0.5) / m}}
			i, err := (&WeightedRandom{Rand: r}).Pick(snap, 0)
			if err != nil {
				t.Fatal(err)
			}
			counts[i]++
		}
		total := 0
		for _, w := range ws {
			total += w
		}
		for i, w := range ws {
			got, want := float64(counts[i])/m, float64(w)/float64(total)
			if math.Abs(got-want) > 2*float64(n+1)/m {
				t.Errorf("weights %v: endpoint %d share %.5f, want %.5f", ws, i, got, want)
			}
		}
	}
	// Draws outside [0, 1) from a faulty Rand stay in range.
	snap := weighted(t, 1, 2, 3).Snapshot()
	for _, u := range []float64{-1, 1, 7} {
		r := &script{t: t, vals: []float64{u}}
		if i, _ := (&WeightedRandom{Rand: r}).Pick(snap, 0); i < 0 || i > 2 {
			t.Errorf("u=%v: index %d", u, i)
		}
	}
}

// chiSquare returns Σ (observed − expected)² / expected.
func chiSquare(counts []int, shares []float64, total int) float64 {
	x := 0.0
	for i, c := range counts {
		e := shares[i] * float64(total)
		x += (float64(c) - e) * (float64(c) - e) / e
	}
	return x
}

// 100,000 seeded picks follow the weights 1:2:3:4, and a slow-starting
// endpoint gets its ramped share.
func TestWeightedRandomProportions(t *testing.T) {
	const picks = 100_000
	snap := weighted(t, 1, 2, 3, 4).Snapshot()
	p := &WeightedRandom{Rand: rng.New(42)}
	counts := make([]int, 4)
	for k := 0; k < picks; k++ {
		i, _ := p.Pick(snap, 0)
		counts[i]++
	}
	// 16.27 is the 99.9% quantile of χ² with 3 degrees of freedom.
	if x := chiSquare(counts, []float64{0.1, 0.2, 0.3, 0.4}, picks); x > 16.27 {
		t.Errorf("counts %v: χ² = %.1f > 16.27", counts, x)
	}

	s := newSet(t, SetConfig{SlowStart: 10})
	s.Update(0, endpoints("a", "b", "c"))
	s.SetHealthy(1, "c", false)
	s.SetHealthy(2, "c", true)
	snap = s.Current(5) // c at 3/10 of its weight: shares 1 : 1 : 0.3
	counts = make([]int, 3)
	for k := 0; k < picks; k++ {
		i, _ := p.Pick(snap, 5)
		counts[i]++
	}
	if x := chiSquare(counts, []float64{1 / 2.3, 1 / 2.3, 0.3 / 2.3}, picks); x > 13.82 { // χ², 2 df, 99.9%
		t.Errorf("slow start counts %v: χ² = %.1f > 13.82", counts, x)
	}
}

// Envoy's dynamic weight, weight / (active + 1)^bias.
func TestLeastRequestWeight(t *testing.T) {
	for _, c := range []struct {
		w      float64
		active int
		bias   float64
		want   float64
	}{
		{2, 0, 1, 2},
		{2, 3, 1, 0.5},
		{4, 3, 2, 0.25},
		{9, 8, 0.5, 3},
		{1, 0, 0.5, 1},
		{5, 100, 0, 5},
		{3, -4, 1, 3}, // a negative count counts as 0
		{0.3, 2, 1, 0.1},
	} {
		if got := LeastRequestWeight(c.w, c.active, c.bias); !near(got, c.want) {
			t.Errorf("w=%v active=%d bias=%v: %v, want %v", c.w, c.active, c.bias, got, c.want)
		}
	}
}

// uFor returns a draw u for which WeightedRandom picks endpoint i of snap.
func uFor(t *testing.T, snap *Snapshot, i int) float64 {
	t.Helper()
	for k := 0; k < 1000; k++ {
		u := (float64(k) + 0.5) / 1000
		if got, _ := (&WeightedRandom{Rand: &script{t: t, vals: []float64{u}}}).Pick(snap, 0); got == i {
			return u
		}
	}
	t.Fatalf("no draw picks endpoint %d", i)
	return 0
}

// With unequal weights the candidates are weighted draws and the higher
// dynamic weight wins, the first drawn among equals.
func TestLeastRequestSteps(t *testing.T) {
	snap := weighted(t, 4, 1).Snapshot()
	u := []float64{uFor(t, snap, 0), uFor(t, snap, 1)}
	for _, c := range []struct {
		loads []int
		bias  float64
		draws []int // endpoints drawn, in order
		want  int
	}{
		{[]int{3, 0}, 1, []int{0, 1}, 0},   // 4/4 = 1/1: tie, first drawn
		{[]int{3, 0}, 1, []int{1, 0}, 1},   // tie, first drawn
		{[]int{3, 1}, 1, []int{1, 0}, 0},   // 1 > 1/2
		{[]int{4, 0}, 1, []int{0, 1}, 1},   // 4/5 < 1
		{[]int{1, 0}, 2, []int{0, 1}, 0},   // 4/2² = 1/1: tie
		{[]int{2, 0}, 2, []int{0, 1}, 1},   // 4/9 < 1
		{[]int{2, 0}, 0.5, []int{1, 0}, 0}, // 4/√3 > 1
		{[]int{0, 0}, 1, []int{1, 1}, 1},   // both draws e1
	} {
		setLoads(snap, c.loads...)
		r := &script{t: t, vals: []float64{u[c.draws[0]], u[c.draws[1]]}}
		if i, err := (&LeastRequest{Bias: c.bias, Rand: r}).Pick(snap, 0); err != nil || i != c.want {
			t.Errorf("loads %v bias %v draws %v: %d, %v; want %d", c.loads, c.bias, c.draws, i, err, c.want)
		}
		r.done()
	}
	// Choices = 1 is one weighted draw, whatever the loads.
	setLoads(snap, 9, 0)
	r := &script{t: t, vals: []float64{u[0]}}
	if i, _ := (&LeastRequest{Choices: 1, Rand: r}).Pick(snap, 0); i != 0 {
		t.Errorf("Choices 1: %d", i)
	}
	r.done()
	setLoads(snap, 0, 0)
}

// With equal weights LeastRequest draws and decides exactly as P2C (d = 2)
// and PowerOfD (d > 2) do over the same in-flight counts.
func TestLeastRequestEqualWeightsIsP2C(t *testing.T) {
	s := weighted(t, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2)
	snap := s.Snapshot()
	loads := rng.New(9)
	for _, d := range []int{2, 3, 5} {
		lr := &LeastRequest{Choices: d, Bias: 3, Rand: rng.New(5)}
		var ref Picker = &P2C{Rand: rng.New(5)}
		if d > 2 {
			ref = &PowerOfD{D: d, Rand: rng.New(5)}
		}
		for k := 0; k < 2000; k++ {
			l := make([]int, snap.Len())
			for i := range l {
				l[i] = int(loads.Float64() * 4)
			}
			setLoads(snap, l...)
			got, err := lr.Pick(snap, 0)
			want, _ := ref.Pick(snap)
			if err != nil || got != want {
				t.Fatalf("d=%d pick %d loads %v: LeastRequest %d (%v), reference %d", d, k, l, got, err, want)
			}
		}
	}
	setLoads(snap, make([]int, snap.Len())...)
}

// The documented light-load share: weights 2 and 1, nothing in flight, the
// heavier candidate wins, so e0 gets 1 − (1/3)² = 8/9.
func TestLeastRequestIdleShare(t *testing.T) {
	snap := weighted(t, 2, 1).Snapshot()
	p := &LeastRequest{Rand: rng.New(3)}
	const picks = 90_000
	heavy := 0
	for k := 0; k < picks; k++ {
		if i, _ := p.Pick(snap, 0); i == 0 {
			heavy++
		}
	}
	if share := float64(heavy) / picks; math.Abs(share-8.0/9) > 0.006 {
		t.Errorf("heavy share %.4f, want 8/9 ≈ 0.8889", share)
	}
}

func TestLeastRequestValidate(t *testing.T) {
	snap := weighted(t, 1, 2).Snapshot()
	for _, p := range []*LeastRequest{{Choices: -1}, {Choices: MaxChoices + 1}, {Bias: -1}, {Bias: math.NaN()}, {Bias: math.Inf(1)}} {
		var ce *ConfigError
		if err := p.Validate(); !errors.As(err, &ce) || !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: Validate %v", *p, err)
		}
		if _, err := p.Pick(snap, 0); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: Pick %v", *p, err)
		}
	}
	for _, p := range []*LeastRequest{{}, {Choices: MaxChoices, Bias: 7}} {
		if err := p.Validate(); err != nil {
			t.Errorf("%+v: %v", *p, err)
		}
	}
}

// PeakEWMA compares latency × (in flight + 1) ÷ weight; the second drawn
// wins only when strictly cheaper, or equally cheap with fewer in flight.
func TestPeakEWMASteps(t *testing.T) {
	s := newSet(t, SetConfig{LatencyDecay: 1000})
	s.Update(0, []Endpoint{{Addr: "a"}, {Addr: "b"}})
	snap := s.Snapshot()
	a, b := snap.Endpoint(0), snap.Endpoint(1)
	// Draws [0, 0]: a first, then b; draws [0.9, 0]: b first, then a.
	pick := func(first int) int {
		t.Helper()
		r := &script{t: t, vals: []float64{[]float64{0, 0.9}[first], 0}}
		i, err := (&PeakEWMA{Rand: r}).Pick(snap, 0)
		if err != nil {
			t.Fatal(err)
		}
		r.done()
		return i
	}
	if pick(0) != 0 || pick(1) != 1 {
		t.Error("no samples, nothing in flight: the first drawn must win")
	}
	setLoads(snap, 1, 0)
	if pick(0) != 1 {
		t.Error("no samples: fewer in flight must win the tie")
	}
	a.Done(0, 0.125, true) // exact in float32
	a.Start()
	b.Done(0, 0.625, true)
	b.Start()
	setLoads(snap, 3, 0) // costs 0.5 and 0.625
	if pick(0) != 0 || pick(1) != 0 {
		t.Error("a is cheaper")
	}
	setLoads(snap, 4, 0) // 0.625 and 0.625: tie, b has fewer in flight
	if pick(0) != 1 || pick(1) != 1 {
		t.Error("equal cost: fewer in flight must win")
	}
	// One slow response on a: at once the more expensive, even idle.
	setLoads(snap, 0, 0)
	a.Start()
	a.Done(0, 1, true)
	if pick(0) != 1 || pick(1) != 1 {
		t.Error("a must lose at once after a slow response")
	}
	// The weight divides the cost: 1/4 = 0.25 < 0.625.
	s.Update(0, []Endpoint{{Addr: "a", Weight: 4}, {Addr: "b"}})
	snap = s.Snapshot()
	if pick(1) != 0 {
		t.Error("a weight of 4 makes a cheaper")
	}
}

// Costs decay from each endpoint's last sample: an old peak fades.
func TestPeakEWMADecay(t *testing.T) {
	s := newSet(t, SetConfig{LatencyDecay: 10})
	s.Update(0, endpoints("a", "b"))
	snap := s.Snapshot()
	a, b := snap.Endpoint(0), snap.Endpoint(1)
	a.Start()
	a.Done(0, 0.5, true)
	b.Start()
	b.Done(10, 0.3, true)
	pick := func(now float64) int {
		r := &script{t: t, vals: []float64{0.9, 0}} // b first, then a
		i, _ := (&PeakEWMA{Rand: r}).Pick(snap, now)
		r.done()
		return i
	}
	// At 10: a costs 0.5·e⁻¹ ≈ 0.18, b 0.3.
	if pick(10) != 0 {
		t.Error("a's peak from t=0 must have decayed below b's fresh 0.3")
	}
	// At 5 (before b's sample, which then counts as fresh): a costs
	// 0.5·e^−0.5 ≈ 0.303 > 0.3.
	if pick(5) != 1 {
		t.Error("at t=5 b must be cheaper")
	}
	// The same ordering as the decayed estimates.
	for _, now := range []float64{5, 8, 10, 30} {
		want := 1
		if a.Latency(now) < b.Latency(now) {
			want = 0
		}
		if got := pick(now); got != want {
			t.Errorf("t=%v: picked %d; estimates a %v, b %v", now, got, a.Latency(now), b.Latency(now))
		}
	}
}

// A backend ten times slower than the others gets far fewer requests
// under PeakEWMA; it is still probed as its estimate decays. Virtual time,
// a request every 2 ms, each completing after its endpoint's latency.
func TestPeakEWMAAvoidsSlowEndpoint(t *testing.T) {
	latency := []float64{0.01, 0.01, 0.01, 0.1}
	counts := simulate(t, &PeakEWMA{Rand: rng.New(11)}, latency, 20_000, 0.002)
	share := float64(counts[3]) / 20_000
	t.Logf("PeakEWMA picks %v (slow share %.4f)", counts, share)
	if share > 0.05 || counts[3] == 0 {
		t.Errorf("slow endpoint share %.4f: want > 0 and ≤ 0.05 (uniform would be 0.25)", share)
	}
	// The same trace under Random gives the slow endpoint its quarter: the
	// avoidance comes from the picker, not the simulation.
	rc := simulate(t, Loaded{&Random{Rand: rng.New(11)}}, latency, 20_000, 0.002)
	if s := float64(rc[3]) / 20_000; s < 0.2 {
		t.Errorf("Random gave the slow endpoint %.4f", s)
	}
}

// simulate sends n requests, one every gap seconds, through a fresh set of
// len(latency) endpoints and returns the picks per endpoint.
func simulate(t *testing.T, p SetPicker, latency []float64, n int, gap float64) []int {
	t.Helper()
	s := newSet(t, SetConfig{})
	eps := make([]Endpoint, len(latency))
	for i := range eps {
		eps[i] = Endpoint{Addr: string(rune('a' + i))}
	}
	s.Update(0, eps)
	index := map[*EndpointState]int{}
	snap := s.Snapshot()
	for i := range latency {
		index[snap.Endpoint(i)] = i
	}
	type pending struct {
		at float64
		e  *EndpointState
	}
	var queue []pending // sorted by at
	counts := make([]int, len(latency))
	for k := 0; k < n; k++ {
		now := float64(k) * gap
		for len(queue) > 0 && queue[0].at <= now {
			q := queue[0]
			queue = queue[1:]
			q.e.Done(q.at, latency[index[q.e]], true)
		}
		e, err := s.Pick(now, p)
		if err != nil {
			t.Fatal(err)
		}
		i := index[e]
		counts[i]++
		q := pending{now + latency[i], e}
		at, _ := slices.BinarySearchFunc(queue, q, func(a, b pending) int {
			if a.at <= b.at {
				return -1
			}
			return 1
		})
		queue = slices.Insert(queue, at, q)
	}
	return counts
}

// SmoothWeighted gives Nginx's sequence for 5:1:1, keeps its current values
// across slow-start republications and restarts them when the membership
// changes.
func TestSmoothWeighted(t *testing.T) {
	s := newSet(t, SetConfig{SlowStart: 10})
	s.Update(0, []Endpoint{{Addr: "a", Weight: 5}, {Addr: "b"}, {Addr: "c"}})
	p := &SmoothWeighted{}
	seq := func(now float64, k int) string {
		out := make([]byte, k)
		for j := range out {
			i, err := p.Pick(s.Current(now), now)
			if err != nil {
				t.Fatal(err)
			}
			out[j] = s.Current(now).Endpoint(i).Addr()[0]
		}
		return string(out)
	}
	if got := seq(0, 14); got != "aabacaaaabacaa" {
		t.Errorf("5:1:1: %s, want aabacaa twice", got)
	}
	// c goes down and comes back: new memberships, values restart; c ramps
	// from 0.1 (weights 5, 1, 0.1).
	s.SetHealthy(1, "c", false)
	s.SetHealthy(2, "c", true)
	seq(2, 3)
	// A slow-start step (c at 0.3) keeps the membership: one more pick
	// continues from the values left, by Nginx's rule.
	want := slices.Clone(p.cur)
	w := []float64{5, 1, 0.3}
	best := 0
	for i := range want {
		want[i] += w[i]
		if want[i] > want[best] {
			best = i
		}
	}
	want[best] -= 6.3
	if got := seq(5, 1); got != string("abc"[best]) || len(p.cur) != 3 {
		t.Errorf("step pick %s, want %c", got, "abc"[best])
	}
	for i := range want {
		if !near(p.cur[i], want[i]) {
			t.Errorf("current values after a slow-start step: %v, want %v (carried over)", p.cur, want)
			break
		}
	}
	// A long run at full weight follows 5:1:1 from any carried state.
	got := seq(20, 700)
	counts := map[byte]int{}
	for i := range got {
		counts[got[i]]++
	}
	if counts['a'] < 497 || counts['a'] > 503 || counts['b'] < 97 || counts['b'] > 103 {
		t.Errorf("700 picks: %v", counts)
	}
	s.Update(30, endpoints("x"))
	if got := seq(30, 2); got != "xx" || len(p.cur) != 1 {
		t.Errorf("new membership: %s, cur %v", got, p.cur)
	}
}

// Loaded runs a Loads picker over the snapshot's in-flight counts.
func TestLoaded(t *testing.T) {
	snap := weighted(t, 1, 1, 1).Snapshot()
	setLoads(snap, 2, 0, 1)
	for k := 0; k < 3; k++ {
		if i, err := (Loaded{&LeastOutstanding{}}).Pick(snap, 0); err != nil || i != 1 {
			t.Errorf("LeastOutstanding over a snapshot: %d, %v", i, err)
		}
	}
	setLoads(snap, 0, 0, 0)
}

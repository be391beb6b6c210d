package balancer

import (
	"errors"
	"math"
	"reflect"
	"slices"
	"sort"
	"testing"
)

// naiveMaglev is the paper's population loop written out directly, for
// cross-checking: each permutation entry computed as (offset + j·skip) mod M,
// endpoints visited in order of id, an endpoint of weight w taking its t-th
// turn (t = 0, 1, …) in the first round k with k·w ≥ t·W (W the largest
// weight), and the table holding ids.
func naiveMaglev(ids []string, weights []int, m int) []string {
	type ep struct {
		id                 string
		w, turns, next     int
		offset, skip, size uint64
	}
	var eps []ep
	wmax := 0
	for i, id := range ids {
		w := 1
		if weights != nil {
			w = weights[i]
		}
		if w == 0 {
			continue
		}
		wmax = max(wmax, w)
		eps = append(eps, ep{id: id, w: w,
			offset: HashString(id) % uint64(m),
			skip:   xxh64(id, 1)%uint64(m-1) + 1})
	}
	sort.Slice(eps, func(a, b int) bool { return eps[a].id < eps[b].id })
	table := make([]string, m)
	filled := 0
	for round := 1; filled < m; round++ {
		for i := range eps {
			if filled == m {
				break
			}
			e := &eps[i]
			if round*e.w < e.turns*wmax {
				continue
			}
			e.turns++
			for {
				c := (e.offset + uint64(e.next)*e.skip) % uint64(m)
				e.next++
				if table[c] == "" {
					table[c] = e.id
					filled++
					break
				}
			}
		}
	}
	return table
}

func mustMaglev(t testing.TB, ids []string, weights []int, cfg MaglevConfig) *Maglev {
	t.Helper()
	g, err := NewMaglev(ids, weights, cfg)
	if err != nil {
		t.Fatalf("NewMaglev: %v", err)
	}
	return g
}

// entries returns the number of table entries of each endpoint of g.
func entries(g *Maglev) []int {
	c := make([]int, g.Len())
	for _, e := range g.table {
		c[e]++
	}
	return c
}

// TestMaglevGolden compares whole tables with the naive construction, and
// pins a few keys to endpoints (the pinned ids come from naiveMaglev) so
// that a change of hash or population order fails here.
func TestMaglevGolden(t *testing.T) {
	sets := []struct {
		name    string
		ids     []string
		weights []int
		m       int
	}{
		{"equal small", testIDs(5), nil, 13},
		{"equal", testIDs(10), nil, 1009},
		{"weighted", testIDs(7), []int{1, 5, 2, 0, 3, 1, 8}, 1009},
		{"default size", testIDs(4), []int{3, 1, 1, 2}, 65537},
		{"full", testIDs(7), nil, 7},
		{"one", []string{"only:1"}, nil, 2},
	}
	for _, s := range sets {
		t.Run(s.name, func(t *testing.T) {
			g := mustMaglev(t, s.ids, s.weights, MaglevConfig{TableSize: s.m})
			want := naiveMaglev(s.ids, s.weights, s.m)
			if g.Size() != s.m {
				t.Fatalf("Size = %d, want %d", g.Size(), s.m)
			}
			for e := range want {
				if got := g.ID(int(g.table[e])); got != want[e] {
					t.Fatalf("entry %d: %s, naive table: %s", e, got, want[e])
				}
			}
			for _, k := range testKeys(200) {
				if got, want := g.ID(g.Lookup(k)), want[k%uint64(s.m)]; got != want {
					t.Fatalf("Lookup(%#x) = %s, want %s", k, got, want)
				}
			}
		})
	}

	g := mustMaglev(t, []string{"a:80", "b:80", "c:80", "d:80"}, nil, MaglevConfig{})
	pinned := []struct{ key, id string }{
		{"user-1", "c:80"}, {"user-2", "b:80"}, {"user-3", "c:80"}, {"user-4", "a:80"},
		{"user-5", "d:80"}, {"session=abc", "d:80"}, {"/cart", "b:80"},
	}
	naive := naiveMaglev([]string{"a:80", "b:80", "c:80", "d:80"}, nil, DefaultMaglevTableSize)
	for _, p := range pinned {
		h := HashString(p.key)
		if got := g.ID(g.Lookup(h)); got != p.id {
			t.Errorf("key %q → %s, pinned %s", p.key, got, p.id)
		}
		if got := naive[h%DefaultMaglevTableSize]; got != p.id {
			t.Errorf("naive: key %q → %s, pinned %s", p.key, got, p.id)
		}
	}
}

// TestMaglevDeterministic: two builds are identical, and the order of ids
// does not change the endpoint of any entry.
func TestMaglevDeterministic(t *testing.T) {
	ids := testIDs(50)
	weights := make([]int, len(ids))
	for i := range weights {
		weights[i] = 1 + i%4
	}
	a := mustMaglev(t, ids, weights, MaglevConfig{})
	b := mustMaglev(t, ids, weights, MaglevConfig{})
	if !reflect.DeepEqual(a, b) {
		t.Fatal("two builds of the same table differ")
	}
	rids, rweights := slices.Clone(ids), slices.Clone(weights)
	slices.Reverse(rids)
	slices.Reverse(rweights)
	rids = append(rids[17:], rids[:17]...)
	rweights = append(rweights[17:], rweights[:17]...)
	c := mustMaglev(t, rids, rweights, MaglevConfig{})
	for e := range a.table {
		if x, y := a.ID(int(a.table[e])), c.ID(int(c.table[e])); x != y {
			t.Fatalf("entry %d: %s with one order of ids, %s with another", e, x, y)
		}
	}
}

// TestMaglevBalance: with equal weights every endpoint holds ⌊M/N⌋ or
// ⌈M/N⌉ entries (every round gives each endpoint one entry until the table
// is full), so shares are equal within 1/(M/N) — 0.015% at N=10, 0.15% at
// N=100. Over 100,000 keys the max/mean share is then within sampling noise:
// standard deviation √((1−p)/(100,000·p)) for p = 1/N, 0.95% at N=10 and
// 3.1% at N=100; we allow four (measured 1.013 and 1.067).
func TestMaglevBalance(t *testing.T) {
	keys := testKeys(100000)
	for _, n := range []int{10, 100} {
		g := mustMaglev(t, testIDs(n), nil, MaglevConfig{})
		lo, hi := DefaultMaglevTableSize/n, (DefaultMaglevTableSize+n-1)/n
		for i, c := range entries(g) {
			if c < lo || c > hi {
				t.Errorf("N=%d: endpoint %d holds %d entries, want %d or %d", n, i, c, lo, hi)
			}
		}
		p := 1 / float64(n)
		bound := 1 + 4*math.Sqrt((1-p)/(float64(len(keys))*p))
		top := slices.Max(shares(g, keys)) * float64(n)
		t.Logf("N=%d: max/mean share of keys %.3f, bound %.3f", n, top, bound)
		if top > bound {
			t.Errorf("N=%d: max/mean share %.3f exceeds %.3f", n, top, bound)
		}
	}
}

// TestMaglevWeighted: entries follow weights. An endpoint of weight w takes
// a turn in the rounds k with k·w ≥ t·W, t its turns so far: ⌊R·w/W⌋ + 1
// turns in R rounds, the heaviest one every round. Every endpoint's first
// turn comes in round 1 whatever its weight, so each is ahead of its exact
// share by less than one entry, paid for by the others; with the partial
// last round, no endpoint is off M·w/total by more than N entries (N
// endpoints): 0.015% of the table at N=10. Measured: at most 4.1 entries
// off, with ten endpoints.
func TestMaglevWeighted(t *testing.T) {
	for _, weights := range [][]int{
		{1, 2, 3, 4},
		{1, 1, 1, 10},
		{5, 0, 3, 7, 1, 100, 2, 2, 9, 1},
		{1000, 1, 999, 3},
	} {
		ids := testIDs(len(weights))
		g := mustMaglev(t, ids, weights, MaglevConfig{})
		total := 0
		for _, w := range weights {
			total += w
		}
		worst := 0.0
		for i, c := range entries(g) {
			want := float64(g.Size()) * float64(weights[i]) / float64(total)
			worst = max(worst, math.Abs(float64(c)-want))
			if math.Abs(float64(c)-want) > float64(len(weights)) {
				t.Errorf("weights %v: endpoint %d holds %d entries, want %.1f ± %d", weights, i, c, want, len(weights))
			}
		}
		t.Logf("weights %v: entries at most %.1f off the weight's share", weights, worst)
	}
}

// TestMaglevDisruption measures the keys that move when one endpoint is
// added to or removed from N equal ones (100,000 keys, M = 65537). The
// changed endpoint's own share is 1/(N+1) within an entry; sampling 100,000
// keys adds at most 4 standard deviations, under 5% of it. Other keys move
// because the remaining endpoints' turns claim different entries once one
// permutation is added or gone: the paper's "small" extra churn, which
// grows with N/M. Measured here: 0.26% of keys at N=10, 0.57% at N=100
// (with N=1000, below the paper's M ≥ 100·N, it reaches 0.6% against an
// ideal 0.1%). Bound: moved ≤ 1.05/(N+1) + 1%, extra ≤ 1% of keys.
func TestMaglevDisruption(t *testing.T) {
	keys := testKeys(100000)
	for _, n := range []int{10, 100} {
		ids := testIDs(n + 1)
		small := mustMaglev(t, ids[:n], nil, MaglevConfig{})
		big := mustMaglev(t, ids, nil, MaglevConfig{})
		bound := 1.05/float64(n+1) + 0.01

		moved, extra := churn(small, big, keys, "", ids[n])
		t.Logf("N=%d add: moved %.4f = %.3f/(N+1), not to the new endpoint %.4f", n, moved, moved*float64(n+1), extra)
		if moved > bound || extra > 0.01 {
			t.Errorf("N=%d: adding one endpoint moved %.4f of keys (bound %.4f), %.4f not to it (bound 0.01)", n, moved, bound, extra)
		}

		rest := mustMaglev(t, without(ids, 3), nil, MaglevConfig{})
		moved, extra = churn(big, rest, keys, ids[3], "")
		t.Logf("N=%d remove: moved %.4f, not from the removed endpoint %.4f", n, moved, extra)
		if moved > bound || extra > 0.01 {
			t.Errorf("N=%d: removing one endpoint moved %.4f of keys (bound %.4f), %.4f not its own (bound 0.01)", n, moved, bound, extra)
		}
	}
}

func TestMaglevZeroWeightAndEmpty(t *testing.T) {
	g := mustMaglev(t, testIDs(5), []int{1, 0, 1, 0, 1}, MaglevConfig{TableSize: 101})
	for _, e := range g.table {
		if e == 1 || e == 3 || e < 0 {
			t.Fatalf("table holds endpoint %d", e)
		}
	}
	// A table exactly as large as the endpoints of positive weight.
	g = mustMaglev(t, testIDs(5), []int{1, 0, 9, 0, 1}, MaglevConfig{TableSize: 3})
	if got := entries(g); !slices.Equal(got, []int{1, 0, 1, 0, 1}) {
		t.Fatalf("entries = %v, want one for each endpoint of positive weight", got)
	}
	e := mustMaglev(t, nil, nil, MaglevConfig{})
	if e.Lookup(42) != -1 || e.Len() != 0 || e.Size() != 0 {
		t.Fatalf("empty table: Lookup %d, Len %d, Size %d; want -1, 0, 0", e.Lookup(42), e.Len(), e.Size())
	}
}

func TestMaglevConfigErrors(t *testing.T) {
	two := []string{"a", "b"}
	cases := []struct {
		name    string
		ids     []string
		weights []int
		size    int
		field   string
	}{
		{"not prime", two, nil, 65536, "MaglevConfig.TableSize"},
		{"one", two, nil, 1, "MaglevConfig.TableSize"},
		{"negative", two, nil, -7, "MaglevConfig.TableSize"},
		{"too large", two, nil, 5000077, "MaglevConfig.TableSize"}, // prime, above the limit
		{"fewer entries than endpoints", testIDs(8), nil, 7, "MaglevConfig.TableSize"},
		{"duplicate id", []string{"a", "b", "a"}, nil, 0, "ids[2]"},
		{"weights length", two, []int{1, 2, 3}, 0, "weights"},
		{"negative weight", two, []int{-1, 2}, 0, "weights[0]"},
		{"all zero", two, []int{0, 0}, 0, "weights"},
	}
	for _, c := range cases {
		_, err := NewMaglev(c.ids, c.weights, MaglevConfig{TableSize: c.size})
		var ce *ConfigError
		if !errors.Is(err, ErrConfig) || !errors.As(err, &ce) || ce.Field != c.field {
			t.Errorf("%s: err = %v, want a ConfigError on %s", c.name, err, c.field)
		}
	}
	if _, err := NewMaglev(two, nil, MaglevConfig{TableSize: MaxMaglevTableSize}); err != nil {
		t.Errorf("largest table size: %v", err)
	}
}

func TestIsPrime(t *testing.T) {
	var primes []int
	for n := -3; n < 60; n++ {
		if isPrime(n) {
			primes = append(primes, n)
		}
	}
	want := []int{2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59}
	if !slices.Equal(primes, want) {
		t.Fatalf("primes below 60: %v, want %v", primes, want)
	}
	for _, n := range []int{65537, 5000011, 1009} {
		if !isPrime(n) {
			t.Errorf("isPrime(%d) = false", n)
		}
	}
	for _, n := range []int{65535, 5000013, 1001, 7919 * 7919} {
		if isPrime(n) {
			t.Errorf("isPrime(%d) = true", n)
		}
	}
}

func TestMaglevLookupNoAllocs(t *testing.T) {
	g := mustMaglev(t, testIDs(100), nil, MaglevConfig{})
	keys := testKeys(64)
	sink := 0
	if n := testing.AllocsPerRun(100, func() {
		for _, k := range keys {
			sink += g.Lookup(k)
		}
	}); n != 0 {
		t.Fatalf("allocs per Lookup round = %v, want 0", n)
	}
	_ = sink
}

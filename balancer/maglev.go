package balancer

import (
	"cmp"
	"slices"
	"strconv"
)

// Maglev table sizes.
const (
	// DefaultMaglevTableSize is MaglevConfig.TableSize when left 0: Envoy's
	// default, a prime.
	DefaultMaglevTableSize = 65537
	// MaxMaglevTableSize is the largest table size Envoy accepts, a prime.
	MaxMaglevTableSize = 5000011
)

// MaglevConfig sizes a Maglev table. The zero value is Envoy's default.
type MaglevConfig struct {
	// TableSize is the number of table entries, M: a prime, at least the
	// number of endpoints of positive weight, at most MaxMaglevTableSize.
	// Each endpoint gets about M × weight ÷ total weight entries, so a larger
	// table honours weights more closely and moves fewer keys when the set
	// changes; the paper suggests M > 100 × endpoints. 0 means
	// DefaultMaglevTableSize. The table takes 4 × M bytes.
	TableSize int
}

// Maglev is the lookup table of Maglev consistent hashing (Eisenbud et al.,
// "Maglev: A Fast and Reliable Software Network Load Balancer", NSDI 2016,
// section 3.4). Endpoint id has a preference list over the M table entries,
// its permutation: entry (offset + j × skip) mod M for j = 0, 1, …, where
// offset = XXH64(id, seed 0) mod M and skip = XXH64(id, seed 1) mod (M − 1)
// + 1 (M prime, so every permutation visits every entry). The endpoints take
// turns, in order of id, each claiming the next entry of its permutation
// that is still free, until the table is full. A key hash h goes to the
// endpoint of entry h mod M.
//
// Weights, as in Envoy's Maglev: an endpoint of weight w takes a turn in
// round k (k = 1, 2, …) when k × w has reached its own running target, which
// starts at 0 and grows by the largest weight W at every turn taken. An
// endpoint of weight W takes a turn every round, one of weight W/3 every
// third round, so entries come out proportional to weight, and every
// endpoint of positive weight takes a turn in round 1.
//
// Disruption: adding or removing an endpoint moves its share of keys and,
// because the others' turns then claim slightly different entries, a little
// more (the paper measures this extra churn as small and shrinking with M;
// the package tests state the measured bound). Balance: with equal weights
// every endpoint gets ⌊M/N⌋ or ⌈M/N⌉ entries.
//
// Lookup is one modulo and one load, no allocation. A Maglev table is
// immutable once built and safe for concurrent use.
type Maglev struct {
	ids   []string // endpoint ids, in the caller's order
	table []int32  // table[e] is the index in ids of the endpoint of entry e
}

// NewMaglev builds the Maglev table of the endpoints named ids, with the
// given weights (nil means weight 1 for all; otherwise one per id).
// Endpoints are identified by id alone: the table is the same whatever the
// order of ids and on every process; Lookup returns an index into ids. An
// endpoint of weight 0 gets no entries and is never returned. Building takes
// O(M log M) expected time for M entries (the paper's bound) and O(M + n)
// memory.
//
// It returns a *ConfigError when two ids are equal, weights has the wrong
// length, a weight is negative, the weights sum to more than
// MaxTotalWeight, no weight is positive while ids is not empty, the table
// size is not a prime in [2, MaxMaglevTableSize], or the table has fewer
// entries than endpoints of positive weight. An empty ids gives an empty
// table.
func NewMaglev(ids []string, weights []int, cfg MaglevConfig) (*Maglev, error) {
	m := cfg.TableSize
	if m == 0 {
		m = DefaultMaglevTableSize
	}
	if m < 2 || m > MaxMaglevTableSize || !isPrime(m) {
		return nil, &ConfigError{Field: "MaglevConfig.TableSize",
			Reason: "must be a prime in [2, " + strconv.Itoa(MaxMaglevTableSize) + "], got " + strconv.Itoa(cfg.TableSize)}
	}
	w, total, err := hashWeights(ids, weights)
	if err != nil {
		return nil, err
	}
	g := &Maglev{ids: slices.Clone(ids)}
	if total == 0 {
		return g, nil
	}

	// One builder per endpoint of positive weight, in order of id.
	type builder struct {
		index  int32  // index in ids
		weight uint64 // > 0
		target uint64 // turn when round × weight ≥ target
		pos    uint64 // next entry of the permutation to try
		skip   uint64 // in [1, M-1]
	}
	order := make([]int, 0, len(ids))
	for i := range ids {
		if w[i] > 0 {
			order = append(order, i)
		}
	}
	if len(order) > m {
		return nil, &ConfigError{Field: "MaglevConfig.TableSize",
			Reason: "must be at least the number of endpoints of positive weight, " + strconv.Itoa(len(order)) + ", got " + strconv.Itoa(m)}
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(ids[a], ids[b]) })
	mm := uint64(m)
	bs := make([]builder, len(order))
	var wmax uint64
	for k, i := range order {
		bs[k] = builder{
			index:  int32(i),
			weight: w[i],
			pos:    xxh64(ids[i], 0) % mm,
			skip:   xxh64(ids[i], 1)%(mm-1) + 1,
		}
		wmax = max(wmax, w[i])
	}

	table := make([]int32, m)
	for e := range table {
		table[e] = -1
	}
	filled := 0
	// Every round the heaviest endpoint takes a turn, so at most M rounds;
	// round × weight ≤ M × MaxTotalWeight < 2⁵⁴.
	for round := uint64(1); filled < m; round++ {
		for k := range bs {
			b := &bs[k]
			if round*b.weight < b.target {
				continue
			}
			b.target += wmax
			for table[b.pos] >= 0 {
				if b.pos += b.skip; b.pos >= mm {
					b.pos -= mm
				}
			}
			table[b.pos] = b.index
			if b.pos += b.skip; b.pos >= mm {
				b.pos -= mm
			}
			if filled++; filled == m {
				break
			}
		}
	}
	g.table = table
	return g, nil
}

// BuildTable returns NewMaglev(ids, weights, *c) as a *Maglev: a pointer to
// a MaglevConfig is a table builder for endpoint-set snapshots
// (Snapshot.Table), one cached table per snapshot membership. c must not
// change after use.
func (c *MaglevConfig) BuildTable(ids []string, weights []int) (any, error) {
	return NewMaglev(ids, weights, *c)
}

// isPrime reports whether n is prime, by trial division (n ≤ 5000011 here:
// at most about 1,100 divisions).
func isPrime(n int) bool {
	if n < 2 {
		return false
	}
	if n%2 == 0 {
		return n == 2
	}
	for d := 3; d*d <= n; d += 2 {
		if n%d == 0 {
			return false
		}
	}
	return true
}

// Lookup returns the index in ids of the endpoint of key hash h: the
// endpoint of table entry h mod M. It returns -1 when the table is empty (no
// ids). It does not allocate.
func (g *Maglev) Lookup(h uint64) int {
	t := g.table
	if len(t) == 0 {
		return -1
	}
	return int(t[h%uint64(len(t))])
}

// Len returns the number of endpoints (len(ids) at NewMaglev).
func (g *Maglev) Len() int { return len(g.ids) }

// ID returns the id of endpoint i, 0 ≤ i < Len().
func (g *Maglev) ID(i int) string { return g.ids[i] }

// Size returns the number of table entries, M (0 for an empty table).
func (g *Maglev) Size() int { return len(g.table) }

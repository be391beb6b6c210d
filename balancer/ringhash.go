package balancer

import (
	"cmp"
	"math"
	"math/bits"
	"slices"
	"strconv"
)

// Ring size limits, in points (virtual nodes).
const (
	// DefaultRingMinSize is RingConfig.MinSize when left 0: Envoy's
	// minimum_ring_size default.
	DefaultRingMinSize = 1024
	// MaxRingSize is the default and largest RingConfig.MaxSize: Envoy's
	// maximum_ring_size limit of 8M points (96 MiB of ring).
	MaxRingSize = 8 << 20
)

// RingConfig sizes a Ring. The zero value is Envoy's default: at least 1024
// points, at most 8M, sized from the set.
type RingConfig struct {
	// MinSize is the least number of points on the ring (Envoy's
	// minimum_ring_size): the lightest endpoint gets ceil(MinSize ×
	// its weight ÷ total weight) points and every other endpoint as many
	// per unit of weight, rounded up. More points spread keys more evenly and
	// honour weights more closely. 0 means DefaultRingMinSize; must not exceed
	// MaxSize. Ignored when PointsPerWeight is set.
	//
	// Because the points per unit of weight then depend on the whole set, a
	// change of the set can also resize every other endpoint's share of
	// points, which moves some keys between endpoints that stayed; see Ring.
	MinSize int
	// MaxSize caps the number of points (Envoy's maximum_ring_size). With
	// MinSize the sizing is scaled down to fit (the total may then exceed
	// MaxSize by at most one point per endpoint, from rounding up); with
	// PointsPerWeight a set that would need more points is a configuration
	// error. 0 means MaxRingSize, the largest allowed.
	MaxSize int
	// PointsPerWeight, when positive, gives every endpoint exactly
	// weight × PointsPerWeight points, whatever the rest of the set: the
	// classic consistent-hashing ring, where adding an endpoint moves keys
	// only to it and removing one moves only its own keys. 0 means size from
	// MinSize as Envoy does. Must not be negative.
	PointsPerWeight int
}

// Ring is a consistent-hashing ring in the manner of Ketama and Envoy's
// ring_hash load balancer. Each endpoint is hashed onto a circle of 2⁶⁴
// positions at several points — point j of endpoint id sits at
// HashString(id + "_" + j), j = 0, 1, 2, … — with the number of points
// proportional to its weight (see RingConfig). A key hash h belongs to the
// first point at or after h, going round past the top to the first point.
//
// Disruption: the points of an endpoint depend only on its id, so with
// RingConfig.PointsPerWeight removing an endpoint moves exactly the keys it
// owned, to the endpoints that own the next points, and adding one moves to
// it only the keys that fall just before its points (on average its weight's
// share) and nothing else. With the default Envoy sizing a change of the
// set can also change the number of points of the other endpoints (1024/N
// each, rounded up), which moves further keys among them: adding an 11th
// endpoint to 10 moves 16% of keys rather than 9%, while from 100 to 101
// the counts stay at 11 and only the new endpoint's 0.8% move. Prefer
// PointsPerWeight where churn matters more than ring size.
//
// Lookup is a binary search over the sorted points: O(log P) for P points,
// no allocation. A Ring is immutable once built and safe for concurrent use.
// It holds 12 bytes per point: at most 12 × (MaxSize + endpoints) bytes.
type Ring struct {
	ids    []string // endpoint ids, in the caller's order
	hashes []uint64 // sorted point positions
	owners []int32  // owners[k] is the index in ids of the endpoint of point hashes[k]
}

// NewRing builds the ring of the endpoints named ids, with the given
// weights (nil means weight 1 for all; otherwise one per id). Endpoints are
// identified by id alone, so the ring is the same whatever the order of ids
// and on every process; Lookup returns an index into ids. An endpoint of
// weight 0 gets no points and is never returned.
//
// It returns a *ConfigError when two ids are equal, weights has the wrong
// length, a weight is negative, the weights sum to more than
// MaxTotalWeight, no weight is positive while ids is not empty, or cfg is
// out of range. An empty ids gives an empty ring.
func NewRing(ids []string, weights []int, cfg RingConfig) (*Ring, error) {
	minSize, maxSize, err := cfg.sizes()
	if err != nil {
		return nil, err
	}
	w, total, err := hashWeights(ids, weights)
	if err != nil {
		return nil, err
	}
	r := &Ring{ids: slices.Clone(ids)}
	if total == 0 {
		return r, nil
	}
	counts := make([]uint64, len(ids))
	var points uint64
	if cfg.PointsPerWeight > 0 {
		for i, wi := range w {
			counts[i] = wi * uint64(cfg.PointsPerWeight)
			if points += counts[i]; points > uint64(maxSize) {
				return nil, &ConfigError{Field: "RingConfig.PointsPerWeight",
					Reason: "weights × PointsPerWeight exceed MaxSize " + strconv.Itoa(maxSize) + " points"}
			}
		}
	} else {
		points = envoyRingCounts(counts, w, total, uint64(minSize), uint64(maxSize))
	}

	type point struct {
		hash  uint64
		owner int32
	}
	pts := make([]point, 0, points)
	var buf []byte
	for i, id := range ids {
		buf = append(buf[:0], id...)
		buf = append(buf, '_')
		prefix := len(buf)
		for j := uint64(0); j < counts[i]; j++ {
			buf = strconv.AppendUint(buf[:prefix], j, 10)
			pts = append(pts, point{hash: xxh64(buf, 0), owner: int32(i)})
		}
	}
	// Ties (two ids hashing to one position) go to the smaller id, so the
	// order of ids does not matter.
	slices.SortFunc(pts, func(a, b point) int {
		if c := cmp.Compare(a.hash, b.hash); c != 0 {
			return c
		}
		return cmp.Compare(ids[a.owner], ids[b.owner])
	})
	r.hashes = make([]uint64, len(pts))
	r.owners = make([]int32, len(pts))
	for k, p := range pts {
		r.hashes[k] = p.hash
		r.owners[k] = p.owner
	}
	return r, nil
}

// BuildTable returns NewRing(ids, weights, *c) as a *Ring: a pointer to a
// RingConfig is a table builder for endpoint-set snapshots (Snapshot.Table),
// one cached ring per snapshot membership. c must not change after use.
func (c *RingConfig) BuildTable(ids []string, weights []int) (any, error) {
	return NewRing(ids, weights, *c)
}

// sizes validates c and returns its sizes with defaults applied.
func (c RingConfig) sizes() (minSize, maxSize int, err error) {
	minSize, maxSize = c.MinSize, c.MaxSize
	if minSize == 0 {
		minSize = DefaultRingMinSize
	}
	if maxSize == 0 {
		maxSize = MaxRingSize
	}
	switch {
	case c.MinSize < 0:
		return 0, 0, &ConfigError{Field: "RingConfig.MinSize", Reason: "must not be negative, got " + strconv.Itoa(c.MinSize)}
	case c.MaxSize < 0 || c.MaxSize > MaxRingSize:
		return 0, 0, &ConfigError{Field: "RingConfig.MaxSize", Reason: "must be in [0, " + strconv.Itoa(MaxRingSize) + "], got " + strconv.Itoa(c.MaxSize)}
	case c.PointsPerWeight < 0:
		return 0, 0, &ConfigError{Field: "RingConfig.PointsPerWeight", Reason: "must not be negative, got " + strconv.Itoa(c.PointsPerWeight)}
	case c.PointsPerWeight == 0 && minSize > maxSize:
		return 0, 0, &ConfigError{Field: "RingConfig.MinSize", Reason: "must not exceed MaxSize " + strconv.Itoa(maxSize) + ", got " + strconv.Itoa(minSize)}
	}
	return minSize, maxSize, nil
}

// envoyRingCounts fills counts with the points of each endpoint under
// Envoy's sizing and returns their sum. Envoy scales the normalised weights
// w/total by scale = min(ceil(m × minSize) ÷ m, maxSize), m the smallest
// positive normalised weight, and gives each endpoint about w/total × scale
// points. In exact integers, with wmin the smallest positive weight: the
// lightest endpoint gets k = ceil(wmin × minSize ÷ total) points and
// endpoint i gets ceil(wᵢ × k ÷ wmin); when that totals more than maxSize,
// endpoint i gets ceil(wᵢ × maxSize ÷ total). Each count depends on the
// endpoint's own weight and the set's wmin and total, not on the order.
// (Envoy carries fractions from one endpoint to the next instead of rounding
// each up; rounding each keeps the counts order-independent.)
func envoyRingCounts(counts, w []uint64, total, minSize, maxSize uint64) uint64 {
	wmin := uint64(math.MaxUint64)
	for _, wi := range w {
		if wi > 0 && wi < wmin {
			wmin = wi
		}
	}
	k := ceilDiv(wmin*minSize, total) // ≤ minSize: wmin ≤ total
	// The unrounded total is k × total ÷ wmin; compare without dividing.
	capped := k*total > maxSize*wmin // k ≤ 2²³ and total ≤ 2³¹: no overflow
	var points uint64
	for i, wi := range w {
		if capped {
			counts[i] = ceilDiv(wi*maxSize, total)
		} else {
			counts[i] = ceilDiv(wi*k, wmin)
		}
		points += counts[i]
	}
	return points
}

// ceilDiv returns ⌈a ÷ b⌉ for b > 0.
func ceilDiv(a, b uint64) uint64 { return (a + b - 1) / b }

// hashWeights validates ids and weights for NewRing and NewMaglev and
// returns the weights as uint64 (nil weights: all 1) and their sum, which
// is 0 only when ids is empty.
func hashWeights(ids []string, weights []int) ([]uint64, uint64, error) {
	if weights != nil && len(weights) != len(ids) {
		return nil, 0, &ConfigError{Field: "weights",
			Reason: "must have one weight per id: " + strconv.Itoa(len(weights)) + " weights for " + strconv.Itoa(len(ids)) + " ids"}
	}
	seen := make(map[string]int, len(ids))
	for i, id := range ids {
		if j, dup := seen[id]; dup {
			return nil, 0, &ConfigError{Field: "ids[" + strconv.Itoa(i) + "]",
				Reason: "duplicates ids[" + strconv.Itoa(j) + "] " + strconv.Quote(id)}
		}
		seen[id] = i
	}
	w := make([]uint64, len(ids))
	var total uint64
	for i := range w {
		wi := 1
		if weights != nil {
			wi = weights[i]
		}
		if wi < 0 {
			return nil, 0, &ConfigError{Field: "weights[" + strconv.Itoa(i) + "]", Reason: "must not be negative, got " + strconv.Itoa(wi)}
		}
		w[i] = uint64(wi)
		if total += w[i]; total > MaxTotalWeight {
			return nil, 0, &ConfigError{Field: "weights", Reason: "sum must be at most " + strconv.Itoa(MaxTotalWeight)}
		}
	}
	if total == 0 && len(ids) > 0 {
		return nil, 0, &ConfigError{Field: "weights", Reason: "at least one weight must be positive"}
	}
	return w, total, nil
}

// Lookup returns the index in ids of the endpoint that owns key hash h: the
// owner of the first point at or after h, or of the first point when h is
// beyond the last. It returns -1 when the ring is empty (no ids). It does not
// allocate.
func (r *Ring) Lookup(h uint64) int {
	hs := r.hashes
	if len(hs) == 0 {
		return -1
	}
	// Smallest k with hs[k] ≥ h, in [0, len(hs)]: a binary search without
	// data-dependent branches (the comparison is the borrow of a
	// subtraction), so random keys cause no mispredictions. Invariant:
	// hs[j] < h for every j < lo, and the answer is in [lo, lo+n].
	lo, n := 0, len(hs)
	for n > 1 {
		half := n >> 1
		_, less := bits.Sub64(hs[lo+half-1], h, 0) // 1 if hs[lo+half-1] < h
		lo += half & -int(less)
		n -= half
	}
	_, less := bits.Sub64(hs[lo], h, 0)
	lo += int(less)
	if lo == len(hs) {
		lo = 0
	}
	return int(r.owners[lo])
}

// Len returns the number of endpoints (len(ids) at NewRing).
func (r *Ring) Len() int { return len(r.ids) }

// ID returns the id of endpoint i, 0 ≤ i < Len().
func (r *Ring) ID(i int) string { return r.ids[i] }

// Size returns the number of points on the ring.
func (r *Ring) Size() int { return len(r.hashes) }

package balancer

import (
	"sync"
	"sync/atomic"
)

// Snapshot is one immutable view of a Set: the eligible endpoints — after
// health, drain, ejection and panic mode — with their effective weights, as
// of the instant it was published. Index i means the same endpoint for
// every method of one snapshot; indices of different snapshots are
// unrelated. It is a Loads (Len, and Load = requests in flight), so the
// Loads pickers work on it unchanged. Safe for concurrent use; a snapshot
// stays valid (and its endpoints countable) after the Set moves on.
type Snapshot struct {
	eps    []*EndpointState
	state  []State
	base   []int     // Endpoint weight with its default
	weight []float64 // effective weight: base, ramped by slow start
	prob   []float64 // alias table (weightedDraw): chance cell i keeps i
	alias  []int32   // alias table: the other endpoint of cell i
	total  float64
	equal  bool // every effective weight is the same

	panicking                  bool
	members, draining, healthy int
	at, due                    float64
	version                    uint64
	tables                     *tables // shared by snapshots of equal membership
}

// Len returns the number of eligible endpoints; 0 means picks fail with
// ErrNoEndpoints.
func (s *Snapshot) Len() int { return len(s.eps) }

// Load returns the requests in flight to endpoint i.
func (s *Snapshot) Load(i int) int { return int(s.eps[i].inflight.Load()) }

// Endpoint returns endpoint i's shared state: address, description,
// in-flight count and latency estimate.
func (s *Snapshot) Endpoint(i int) *EndpointState { return s.eps[i] }

// State returns endpoint i's state when the snapshot was published:
// Healthy or SlowStarting, or in panic mode also Unhealthy or Ejected.
func (s *Snapshot) State(i int) State { return s.state[i] }

// Weight returns endpoint i's effective weight: its Endpoint weight (1 if
// unset), times its slow-start fraction while it ramps. Always > 0.
func (s *Snapshot) Weight(i int) float64 { return s.weight[i] }

// BaseWeight returns endpoint i's Endpoint weight (1 if unset) as it was
// when the snapshot was published.
func (s *Snapshot) BaseWeight(i int) int { return s.base[i] }

// TotalWeight returns the sum of the effective weights.
func (s *Snapshot) TotalWeight() float64 { return s.total }

// EqualWeights reports whether every eligible endpoint has the same
// effective weight (true for an empty snapshot).
func (s *Snapshot) EqualWeights() bool { return s.equal }

// Panic reports whether the snapshot was built in panic mode: fewer healthy
// endpoints than the threshold share, so unhealthy and ejected endpoints
// are eligible too.
func (s *Snapshot) Panic() bool { return s.panicking }

// Members returns the number of endpoints in the set, whatever their state.
func (s *Snapshot) Members() int { return s.members }

// Draining returns the number of draining endpoints.
func (s *Snapshot) Draining() int { return s.draining }

// Healthy returns the number of endpoints in service (healthy or
// slow-starting) and not draining.
func (s *Snapshot) Healthy() int { return s.healthy }

// At returns the instant the snapshot was published.
func (s *Snapshot) At() float64 { return s.at }

// Due returns the instant from which this snapshot is out of date without
// any call to the Set: the next slow-start step or ramp end, or the first
// ejection deadline; +Inf when nothing is pending. Set.Current republishes
// from then.
func (s *Snapshot) Due() float64 { return s.due }

// Version counts the snapshots the Set has published, this one included.
func (s *Snapshot) Version() uint64 { return s.version }

// weightedDraw returns endpoint i with probability weight[i] / total, for a
// snapshot with at least one endpoint, from one draw u of r: a plain draw
// when the weights are equal, else Walker's alias method — x = u·n falls in
// cell i = floor(x), which yields i when the fraction x − i is below prob[i]
// and alias[i] otherwise. O(1).
func (s *Snapshot) weightedDraw(r Rand) int {
	n := len(s.eps)
	if s.equal {
		return draw(r, n)
	}
	x := float64(r.Float64() * float64(n))
	i := min(max(int(x), 0), n-1)
	if x-float64(i) < s.prob[i] {
		return i
	}
	return int(s.alias[i])
}

// buildAlias returns the alias table of weights w with sum total (Vose's
// construction, O(n)): cell i holds i with chance prob[i] and alias[i]
// otherwise, so that a uniform cell and a uniform fraction yield i with
// probability w[i] / total.
func buildAlias(w []float64, total float64) ([]float64, []int32) {
	n := len(w)
	prob := make([]float64, n)
	alias := make([]int32, n)
	scaled := make([]float64, n)
	small := make([]int32, 0, n)
	large := make([]int32, 0, n)
	for i, x := range w {
		scaled[i] = x * float64(n) / total
		if scaled[i] < 1 {
			small = append(small, int32(i))
		} else {
			large = append(large, int32(i))
		}
	}
	for len(small) > 0 && len(large) > 0 {
		sm := small[len(small)-1]
		small = small[:len(small)-1]
		lg := large[len(large)-1]
		prob[sm], alias[sm] = scaled[sm], lg
		// lg gives 1 − scaled[sm] of its mass to cell sm.
		if scaled[lg] = (scaled[lg] + scaled[sm]) - 1; scaled[lg] < 1 {
			large = large[:len(large)-1]
			small = append(small, lg)
		}
	}
	// Leftovers are 1 up to rounding: they keep their whole cell.
	for _, i := range large {
		prob[i], alias[i] = 1, i
	}
	for _, i := range small {
		prob[i], alias[i] = 1, i
	}
	return prob, alias
}

// TableBuilder builds a lookup table — a ring hash, a Maglev table — over
// the eligible endpoints of a snapshot: ids[i] is endpoint i's address and
// weights[i] its base weight, so the table's answers are snapshot indices.
// The slices belong to the builder. Implementations must be comparable (a
// pointer): a snapshot caches one table per builder.
type TableBuilder interface {
	BuildTable(ids []string, weights []int) (any, error)
}

// Table returns b's table for this snapshot, building it on first use. The
// table (or the build error) is shared by every later snapshot with the same
// endpoints in the same order and the same base weights, so slow-start steps
// and changes elsewhere in the set rebuild nothing. A lookup is one atomic
// load and a scan of at most MaxTables entries, without allocation; a build
// happens once per builder and membership, under a mutex that concurrent
// first users of that membership wait on (list the builder in
// SetConfig.Tables to build at publication instead). Beyond MaxTables
// builders per membership, tables are built on every call and not cached.
func (s *Snapshot) Table(b TableBuilder) (any, error) {
	if l := s.tables.list.Load(); l != nil {
		for i := range *l {
			if e := &(*l)[i]; e.b == b {
				return e.v, e.err
			}
		}
	}
	return s.tables.build(s, b)
}

// tables caches lookup tables for one membership.
type tables struct {
	list atomic.Pointer[[]tableEntry] // immutable slices, replaced on append
	mu   sync.Mutex                   // serialises builds
}

type tableEntry struct {
	b   TableBuilder
	v   any
	err error
}

// build builds and caches b's table over s unless a concurrent caller did.
func (t *tables) build(s *Snapshot, b TableBuilder) (any, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var old []tableEntry
	if l := t.list.Load(); l != nil {
		old = *l
	}
	for i := range old {
		if old[i].b == b {
			return old[i].v, old[i].err
		}
	}
	ids := make([]string, len(s.eps))
	weights := append([]int(nil), s.base...)
	for i, e := range s.eps {
		ids[i] = e.addr
	}
	v, err := b.BuildTable(ids, weights)
	if len(old) < MaxTables {
		l := append(append(make([]tableEntry, 0, len(old)+1), old...), tableEntry{b: b, v: v, err: err})
		t.list.Store(&l)
	}
	return v, err
}

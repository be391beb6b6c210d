package balancer

import (
	"errors"
	"math/rand/v2"
	"sync/atomic"
)

// Picker chooses an endpoint of set for one request and returns its index in
// [0, set.Len()). It returns ErrNoEndpoints when the set is empty. Pick does
// not allocate, block on I/O, or take a lock shared with other pickers.
type Picker interface {
	Pick(set Loads) (int, error)
}

// Compile-time guards.
var (
	_ Picker = (*RoundRobin)(nil)
	_ Picker = (*SmoothWRR)(nil)
	_ Picker = (*Random)(nil)
	_ Picker = (*LeastOutstanding)(nil)
	_ Picker = (*P2C)(nil)
	_ Picker = (*PowerOfD)(nil)

	_ Loads = IntLoads(nil)
	_ Loads = Size(0)
	_ Loads = (*InFlight)(nil)
)

// Loads is a read-only view of an endpoint set: its size, and each endpoint's
// current load — requests in flight, queue length, any count where smaller
// means less busy. Index i is the endpoint's position in the set. A picker
// reads loads one at a time and needs no consistent snapshot of them.
type Loads interface {
	Len() int       // number of endpoints; the set is empty when it is 0 or less
	Load(i int) int // load of endpoint i, 0 ≤ i < Len()
}

// IntLoads is a Loads over a slice of counts, for callers that keep their own
// view, such as the simulator's possibly stale queue lengths. The picker sees
// later changes to the elements. Converting a slice to Loads allocates a copy
// of its header, so convert once and reuse the interface value.
type IntLoads []int

// Len returns len(l).
func (l IntLoads) Len() int { return len(l) }

// Load returns l[i].
func (l IntLoads) Load(i int) int { return l[i] }

// Size is a set of that many endpoints with no load information (every load
// is 0), for pickers that ignore load — RoundRobin, Random, SmoothWRR — when
// the caller has nothing else to pass.
type Size int

// Len returns s.
func (s Size) Len() int { return int(s) }

// Load returns 0.
func (Size) Load(int) int { return 0 }

// InFlight counts the requests in flight to each endpoint of a fixed set: the
// production Loads for the least-loaded pickers. Call Inc(i) when a request
// is sent to endpoint i and Dec(i) exactly once when it completes; the counts
// are not checked, so an unmatched Dec makes a count negative. Each counter
// has a cache line of its own, so goroutines updating different endpoints do
// not contend. Safe for concurrent use. Build a new InFlight for a new set.
type InFlight struct {
	c []paddedCounter // immutable slice; elements updated atomically
}

// paddedCounter fills a 64-byte cache line.
type paddedCounter struct {
	n atomic.Int64
	_ [56]byte
}

// NewInFlight returns zeroed counters for n endpoints (none if n ≤ 0).
func NewInFlight(n int) *InFlight {
	return &InFlight{c: make([]paddedCounter, max(n, 0))}
}

// Len returns the number of endpoints.
func (f *InFlight) Len() int { return len(f.c) }

// Load returns the requests in flight to endpoint i.
func (f *InFlight) Load(i int) int { return int(f.c[i].n.Load()) }

// Inc counts a request sent to endpoint i.
func (f *InFlight) Inc(i int) { f.c[i].n.Add(1) }

// Dec counts the completion of a request to endpoint i.
func (f *InFlight) Dec(i int) { f.c[i].n.Add(-1) }

// Rand is a source of uniform random numbers in [0, 1); *rng.Mulberry32
// satisfies it. A picker whose Rand is nil uses math/rand/v2's global
// generator, which is safe for concurrent use and needs no seeding.
type Rand interface {
	Float64() float64
}

// globalRand is the default Rand.
type globalRand struct{}

func (globalRand) Float64() float64 { return rand.Float64() }

// source returns r, or the default Rand when r is nil.
func source(r Rand) Rand {
	if r == nil {
		return globalRand{}
	}
	return r
}

// draw returns floor(u·n) for the next u from r, for n ≥ 1. A value outside
// [0, 1) from a faulty Rand (or float rounding of u·n up to n) is clamped
// into [0, n), so a pick never indexes out of range.
func draw(r Rand, n int) int {
	i := int(r.Float64() * float64(n))
	if i >= n {
		return n - 1
	}
	if i < 0 {
		return 0
	}
	return i
}

// Errors returned by pickers and constructors. Use errors.Is.
var (
	// ErrNoEndpoints: the set passed to Pick is empty.
	ErrNoEndpoints = errors.New("balancer: no endpoints")
	// ErrSetMismatch: the set passed to SmoothWRR.Pick does not have one
	// endpoint per weight; the weighted picker belongs to another set.
	ErrSetMismatch = errors.New("balancer: endpoint set does not match the picker's weights")
	// ErrConfig: a configuration value is out of range; the error is a
	// *ConfigError naming the field.
	ErrConfig = errors.New("balancer: invalid configuration")
)

// ConfigError reports a bad configuration value. It wraps ErrConfig.
type ConfigError struct {
	Field  string // e.g. "weights[2]" or "PowerOfD.D"
	Reason string // e.g. "must not be negative, got -1"
}

func (e *ConfigError) Error() string { return "balancer: " + e.Field + ": " + e.Reason }

// Unwrap returns ErrConfig.
func (e *ConfigError) Unwrap() error { return ErrConfig }

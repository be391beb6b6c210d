// Package throttle is client-side adaptive throttling, as described in
// "Handling Overload" (Alejandro Forero Cuervo, Site Reliability
// Engineering, O'Reilly 2016, chapter 21): a client that sees its backend
// turn requests away starts turning requests away itself, locally, before
// they cost the backend anything.
//
// Each client keeps, per backend and over a sliding window (two minutes by
// default), two counts:
//
//	requests  attempts the application made, including those the client
//	          then rejected locally
//	accepts   requests the backend accepted (answered, rather than refused
//	          for overload)
//
// and rejects each new request locally with probability
//
//	p = max(0, (requests − K·accepts) / (requests + 1))
//
// While the backend accepts everything, requests ≈ accepts and p = 0. When
// the backend can accept only a rate A of a demand R, the client settles
// where it still sends about K·A: requests ≈ R, accepts ≈ A, so p ≈ 1 −
// K·A/R. K = 2 (the default) lets through twice what the backend accepts:
// enough to notice at once when it recovers, at the price of half the sent
// requests failing while it does not. A smaller K throttles harder (K = 1
// sends no more than was accepted); a larger one is gentler.
//
// Rejected requests are the cheapest kind of failure: they cost no network
// round trip and no backend work, so an overloaded backend spends what it
// has on the requests it can serve. Combine with retry.Budget: a locally
// rejected request should not be retried.
//
// Time is a parameter: Allow, Record and Probability take now, float64
// seconds on the caller's monotonic timeline, and the randomness of Allow is
// the caller's uniform draw u. Nothing here reads a clock or draws a random
// number, so simulations and tests are deterministic.
package throttle

import (
	"errors"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
)

// Defaults used for zero Config fields, and the largest Buckets.
const (
	DefaultK       = 2    // accepts multiplier: let through about twice what the backend accepts
	DefaultWindow  = 120  // seconds: the book's two minutes
	DefaultBuckets = 120  // window slices: one second each with the default window
	MaxBuckets     = 3600 // largest Buckets accepted
)

// ErrConfig is the sentinel every configuration error wraps:
// errors.Is(err, throttle.ErrConfig) tells a bad configuration from other
// errors.
var ErrConfig = errors.New("throttle: invalid configuration")

// ConfigError reports a bad configuration field.
type ConfigError struct {
	Field  string // the field, e.g. "K"
	Reason string // what is wrong with it
}

func (e *ConfigError) Error() string { return "throttle: " + e.Field + ": " + e.Reason }

// Unwrap returns ErrConfig.
func (e *ConfigError) Unwrap() error { return ErrConfig }

func badConfig(field, reason string) error { return &ConfigError{Field: field, Reason: reason} }

func ftoa(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// Config configures a Throttle. The zero value is the book's: K = 2 over
// two minutes, in one-second buckets.
type Config struct {
	// K is the accepts multiplier of the formula: the client lets through
	// about K times what the backend accepts. It must be finite and at least
	// 1; zero means DefaultK.
	K float64
	// Window is the length of the sliding window, in seconds. Zero means
	// DefaultWindow; it must otherwise be finite and positive.
	Window float64
	// Buckets is how many slices the window is counted in, 1 to
	// MaxBuckets: the window slides one slice (Window/Buckets seconds) at a
	// time, so a count leaves it between Window − Window/Buckets and Window
	// seconds after it was made. Zero means DefaultBuckets.
	Buckets int
}

// Validate reports the first invalid field as a *ConfigError wrapping
// ErrConfig.
func (c Config) Validate() error {
	if c.K != 0 && !(c.K >= 1 && !math.IsInf(c.K, 0)) {
		return badConfig("K", "must be a finite number >= 1 (0 means "+ftoa(DefaultK)+"), got "+ftoa(c.K))
	}
	if c.Window != 0 && !(c.Window > 0 && !math.IsInf(c.Window, 0)) {
		return badConfig("Window", "must be a positive finite number of seconds (0 means "+ftoa(DefaultWindow)+"), got "+ftoa(c.Window))
	}
	if c.Buckets < 0 || c.Buckets > MaxBuckets {
		return badConfig("Buckets", "must be within [1, "+strconv.Itoa(MaxBuckets)+"] (0 means "+strconv.Itoa(DefaultBuckets)+"), got "+strconv.Itoa(c.Buckets))
	}
	return nil
}

// bucket holds the counts of one slice of the window.
type bucket struct {
	requests, accepts atomic.Int64
	// folded is what the counts were when the slice closed and was added
	// to the closed totals (guarded by Throttle.mu); it is what leaves the
	// totals when the slice leaves the window.
	foldedRequests, foldedAccepts int64
}

// Slices are numbered e = ⌊now / (Window/Buckets)⌋, clamped to ±maxEpoch,
// and the newest one is packed with its bucket index in one int64:
// e<<idxBits | e mod Buckets.
const (
	maxEpoch = 1 << 50
	idxBits  = 12 // MaxBuckets < 1<<idxBits
	idxMask  = 1<<idxBits - 1
	notYet   = math.MinInt64 // the packed state before the first call
)

// Throttle is the adaptive throttle of one client for one backend (keep one
// per backend: a backend's overload must not throttle requests to the
// others).
//
// For each request: draw u uniform in [0, 1) and call Allow(now, u); if it
// returns false, fail the request locally at once (without retrying it).
// Otherwise send it, and when the answer arrives call Record(now, accepted),
// accepted being false when the backend refused the request for overload
// (HTTP 429 or 503, gRPC RESOURCE_EXHAUSTED or UNAVAILABLE, a timeout) and
// true for any other answer, errors of the request itself included.
//
// A Throttle is safe for concurrent use and does not allocate. Its state is
// a ring of Buckets counters, the newest counting the current slice, and the
// totals of the closed slices still in the window. Allow and Record are
// lock-free within a slice: one atomic add each, and a few loads. The first
// call of a new slice takes a mutex to close the previous slice and drop the
// slices that left the window (O(1) per slice moved, O(Buckets) at most).
// The counts are exact when calls do not overlap; a call that overlaps the
// closing of its slice may go uncounted, or read counts that are off by one
// slice, so p is then approximate, never unbounded.
type Throttle struct {
	// immutable after New
	k     float64
	width float64 // seconds per slice
	n     int64   // len(buckets)

	state          atomic.Int64 // newest slice and its bucket index, packed; notYet before the first call
	closedRequests atomic.Int64 // sum of foldedRequests over the closed slices in the window
	closedAccepts  atomic.Int64 // sum of foldedAccepts over the closed slices in the window
	buckets        []bucket     // slice e counts in buckets[e mod n]

	mu sync.Mutex // serializes moving to a new slice
}

// New returns a Throttle with empty counts (p = 0), or a *ConfigError
// naming the bad field.
func New(c Config) (*Throttle, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.K == 0 {
		c.K = DefaultK
	}
	if c.Window == 0 {
		c.Window = DefaultWindow
	}
	if c.Buckets == 0 {
		c.Buckets = DefaultBuckets
	}
	t := &Throttle{k: c.K, width: c.Window / float64(c.Buckets), n: int64(c.Buckets), buckets: make([]bucket, c.Buckets)}
	t.state.Store(notYet)
	return t, nil
}

// Allow counts a request the application wants to send at now (seconds)
// and reports whether to send it: it returns false, rejecting the request
// locally, when u < p, p being the rejection probability of the counts
// before this request (as Probability returns). u is the caller's uniform
// draw in [0, 1) (math/rand/v2's Float64 in production, a fixed sequence in
// tests): u ≥ 1 or NaN always allows, u < 0 rejects whenever p > 0. The
// request is counted in requests either way.
func (t *Throttle) Allow(now, u float64) bool {
	b := &t.buckets[t.advance(now)]
	p := t.probability(t.closedRequests.Load()+b.requests.Load(), t.closedAccepts.Load()+b.accepts.Load())
	b.requests.Add(1)
	return !(p > 0 && u < p)
}

// Record reports the answer to a request Allow let through, at now
// (seconds): accepted counts it in accepts. A refused request (accepted
// false) changes no count: it was counted as a request by Allow. Call it at
// most once per sent request, and not for requests rejected locally.
func (t *Throttle) Record(now float64, accepted bool) {
	i := t.advance(now)
	if accepted {
		t.buckets[i].accepts.Add(1)
	}
}

// Probability returns the probability with which Allow would reject a
// request at now (seconds), for metrics: max(0, (requests − K·accepts) /
// (requests + 1)) over the window ending at now, in [0, 1).
func (t *Throttle) Probability(now float64) float64 {
	return t.probability(t.Counts(now))
}

// Counts returns the requests and accepts counted in the window ending at
// now (seconds), for metrics and tests.
func (t *Throttle) Counts(now float64) (requests, accepts int64) {
	b := &t.buckets[t.advance(now)]
	return t.closedRequests.Load() + b.requests.Load(), t.closedAccepts.Load() + b.accepts.Load()
}

// probability computes p from window counts.
func (t *Throttle) probability(requests, accepts int64) float64 {
	r := float64(requests)
	p := (r - float64(t.k*float64(accepts))) / (r + 1)
	if p < 0 { // p is finite: r ≥ 0, so r + 1 ≥ 1
		return 0
	}
	return p
}

// advance moves the window, if needed, so that its newest slice contains
// now, and returns the index of the newest bucket. A now before the newest
// slice (time going backwards) or NaN counts in the newest slice.
func (t *Throttle) advance(now float64) int {
	s := t.state.Load()
	e := math.Floor(now / t.width)
	if e != e { // NaN
		if s != notYet {
			return int(s & idxMask)
		}
		e = 0
	}
	epoch := int64(max(-maxEpoch, min(e, maxEpoch))) // e is not NaN: builtin min and max suffice
	if s != notYet && epoch <= s>>idxBits {
		return int(s & idxMask)
	}
	return t.moveTo(epoch)
}

// moveTo makes epoch the newest slice, unless a later one already is, and
// returns the index of the newest bucket.
func (t *Throttle) moveTo(epoch int64) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.state.Load()
	if s == notYet {
		t.state.Store(pack(epoch, t.n))
		return int(mod(epoch, t.n))
	}
	cur := s >> idxBits
	if epoch <= cur { // another call moved first
		return int(s & idxMask)
	}
	if epoch-cur >= t.n { // every slice left the window
		for i := range t.buckets {
			b := &t.buckets[i]
			b.requests.Store(0)
			b.accepts.Store(0)
			b.foldedRequests, b.foldedAccepts = 0, 0
		}
		t.closedRequests.Store(0)
		t.closedAccepts.Store(0)
	} else {
		// Close the newest slice: its counts join the closed totals.
		b := &t.buckets[s&idxMask]
		b.foldedRequests, b.foldedAccepts = b.requests.Load(), b.accepts.Load()
		t.closedRequests.Add(b.foldedRequests)
		t.closedAccepts.Add(b.foldedAccepts)
		// Slices cur−n+1 … epoch−n leave the window; their buckets serve
		// slices cur+1 … epoch, empty (the last one is the new newest).
		for x := cur + 1; x <= epoch; x++ {
			b := &t.buckets[mod(x, t.n)]
			t.closedRequests.Add(-b.foldedRequests)
			t.closedAccepts.Add(-b.foldedAccepts)
			b.requests.Store(0)
			b.accepts.Store(0)
			b.foldedRequests, b.foldedAccepts = 0, 0
		}
	}
	s = pack(epoch, t.n)
	t.state.Store(s)
	return int(s & idxMask)
}

// pack returns the packed state of slice epoch.
func pack(epoch, n int64) int64 { return epoch<<idxBits | mod(epoch, n) }

// mod returns x mod n in [0, n) for n > 0, also for negative x.
func mod(x, n int64) int64 {
	m := x % n
	if m < 0 {
		m += n
	}
	return m
}

package retry

import (
	"fmt"
	"math"
	"sort"
	"sync"
)

// Defaults and bounds of HedgeConfig.
const (
	DefaultHedgeQuantile = 0.95 // hedge after the p95 of recent latencies
	DefaultMaxHedges     = 1    // hedges per call
	MaxMaxHedges         = 10   // largest MaxHedges accepted
	DefaultHedgeSamples  = 128  // latencies kept
	MinHedgeSamples      = 20   // latencies needed before a tracked delay is finite; also the smallest Samples
	MaxHedgeSamples      = 1024 // largest Samples accepted
	DefaultHedgeMaxAge   = 60   // seconds a latency stays in the tracker
)

// HedgeConfig configures a Hedger. The zero value hedges once per call,
// after the p95 of the latencies recorded in the last minute, with no
// budget.
type HedgeConfig struct {
	// Delay is a fixed hedging delay, in seconds. Zero means the tracked
	// Quantile of recent latencies; negative, NaN or infinite is invalid.
	Delay float64
	// Quantile is the latency quantile, in (0, 1), after which a call is
	// hedged when Delay is 0: 0.95 hedges the slowest 5% or so of calls.
	// Zero means DefaultHedgeQuantile.
	Quantile float64
	// MaxHedges is the largest number of hedges per call (extra attempts
	// sent while the first is still out), in [1, MaxMaxHedges]. Zero means
	// DefaultMaxHedges.
	MaxHedges int
	// Samples is how many recent latencies the tracker keeps, in
	// [MinHedgeSamples, MaxHedgeSamples]. Zero means DefaultHedgeSamples.
	Samples int
	// MaxAge is how long a latency counts, in seconds: older ones are
	// dropped, so that the quantile follows a service that changed speed
	// even when calls are rare. Zero means DefaultHedgeMaxAge; negative, NaN
	// or infinite is invalid.
	MaxAge float64
	// Budget, when not nil, pays for every hedge as for a retry (TryHedge
	// calls Budget.TryRetry): hedges and retries to one dependency share one
	// Budget, so together they stay below its ratio of new requests. Nil
	// means hedges are limited by MaxHedges only.
	Budget *Budget
}

// Validate reports the first invalid field, wrapped around ErrConfig and
// naming it ("HedgeConfig.Quantile", …).
func (c HedgeConfig) Validate() error {
	switch {
	case math.IsNaN(c.Delay) || math.IsInf(c.Delay, 0) || c.Delay < 0:
		return fmt.Errorf("%w: HedgeConfig.Delay = %v seconds, want a finite number >= 0 (0 means the tracked quantile)", ErrConfig, c.Delay)
	case math.IsNaN(c.Quantile) || c.Quantile < 0 || c.Quantile >= 1:
		return fmt.Errorf("%w: HedgeConfig.Quantile = %v, want a number in (0, 1) (0 means %v)", ErrConfig, c.Quantile, DefaultHedgeQuantile)
	case c.MaxHedges < 0 || c.MaxHedges > MaxMaxHedges:
		return fmt.Errorf("%w: HedgeConfig.MaxHedges = %d, want 1 to %d (0 means %d)", ErrConfig, c.MaxHedges, MaxMaxHedges, DefaultMaxHedges)
	case c.Samples != 0 && (c.Samples < MinHedgeSamples || c.Samples > MaxHedgeSamples):
		return fmt.Errorf("%w: HedgeConfig.Samples = %d, want %d to %d (0 means %d)", ErrConfig, c.Samples, MinHedgeSamples, MaxHedgeSamples, DefaultHedgeSamples)
	case math.IsNaN(c.MaxAge) || math.IsInf(c.MaxAge, 0) || c.MaxAge < 0:
		return fmt.Errorf("%w: HedgeConfig.MaxAge = %v seconds, want a finite number >= 0 (0 means %v)", ErrConfig, c.MaxAge, DefaultHedgeMaxAge)
	}
	return nil
}

// Hedger decides when a call that has not answered yet gets a hedge: a
// second attempt, raced against the first, the first good answer winning
// and the other attempt cancelled. Hedging trims the latency tail that a
// slow replica, a GC pause or a lost packet adds, at the cost of extra load;
// that load is bounded three ways: hedges start only after Delay (by default
// the p95, so about 5% of calls are hedged), at most MaxHedges per call, and
// each one is paid from the retry Budget (TryHedge), so that a slow
// dependency does not receive a storm of duplicates.
//
// The adapter's loop for one call: send the first attempt; while it has no
// answer, after Delay(now) seconds (re-read for each hedge; +Inf means do
// not hedge), if fewer than MaxHedges hedges went out and TryHedge(now),
// send a hedge (to another endpoint when there is a balancer); take the
// first successful answer and Record its attempt's latency. Only idempotent
// requests may be hedged (see Idempotent).
//
// A Hedger is safe for concurrent use: one mutex guards the latency tracker
// (a ring of the last Samples latencies and the same values kept sorted,
// allocated once by NewHedger; Record costs O(Samples) memory moves, Delay
// a lookup). Its methods do not allocate.
type Hedger struct {
	// immutable after NewHedger
	fixed     float64 // HedgeConfig.Delay; 0 = tracked
	q         float64
	maxHedges int
	maxAge    float64
	budget    *Budget

	mu     sync.Mutex
	times  []float64 // ring, guarded by mu: when each latency was recorded
	lats   []float64 // ring, guarded by mu: the latencies, same slots
	head   int       // guarded by mu: slot of the oldest latency
	n      int       // guarded by mu: latencies held
	sorted []float64 // guarded by mu: the n latencies held, ascending
}

// NewHedger returns a Hedger with no latencies recorded, or an error naming
// the bad field.
func NewHedger(c HedgeConfig) (*Hedger, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.Quantile == 0 {
		c.Quantile = DefaultHedgeQuantile
	}
	if c.MaxHedges == 0 {
		c.MaxHedges = DefaultMaxHedges
	}
	if c.Samples == 0 {
		c.Samples = DefaultHedgeSamples
	}
	if c.MaxAge == 0 {
		c.MaxAge = DefaultHedgeMaxAge
	}
	h := &Hedger{fixed: c.Delay, q: c.Quantile, maxHedges: c.MaxHedges, maxAge: c.MaxAge, budget: c.Budget}
	if h.fixed == 0 {
		h.times = make([]float64, c.Samples)
		h.lats = make([]float64, c.Samples)
		h.sorted = make([]float64, 0, c.Samples)
	}
	return h, nil
}

// MaxHedges returns the largest number of hedges per call.
func (h *Hedger) MaxHedges() int { return h.maxHedges }

// TryHedge reports whether a hedge at now (seconds) is affordable, and if
// so pays for it: Budget.TryRetry(now), or true without a Budget. Ask it
// just before sending each hedge, after the delay has passed, so that calls
// that answer in time cost nothing.
func (h *Hedger) TryHedge(now float64) bool {
	return h.budget == nil || h.budget.TryRetry(now)
}

// Record adds the latency, in seconds, of a successful attempt that ended at
// now (seconds). Latencies that are negative, NaN or infinite, and a now
// that is not finite, are ignored; so is every latency when the
// configuration has a fixed Delay. When the tracker is full the oldest
// latency makes room.
func (h *Hedger) Record(now, latency float64) {
	if h.fixed != 0 || !(latency >= 0) || math.IsInf(latency, 0) || math.IsNaN(now) || math.IsInf(now, 0) {
		return
	}
	h.mu.Lock()
	h.expire(now)
	if h.n == len(h.lats) {
		h.dropOldest()
	}
	slot := (h.head + h.n) % len(h.lats)
	h.times[slot], h.lats[slot] = now, latency
	h.n++
	i := sort.SearchFloat64s(h.sorted, latency)
	h.sorted = h.sorted[:h.n]
	copy(h.sorted[i+1:], h.sorted[i:h.n-1])
	h.sorted[i] = latency
	h.mu.Unlock()
}

// Delay returns how many seconds after an attempt was sent a hedge may
// follow it: the configured Delay, or else the Quantile of the latencies
// recorded in the last MaxAge seconds before now, by nearest rank (the
// ⌈Quantile·n⌉-th smallest of n). While fewer than MinHedgeSamples such
// latencies are known it returns +Inf: too little is known to tell a slow
// attempt from a normal one, so do not hedge.
func (h *Hedger) Delay(now float64) float64 {
	if h.fixed != 0 {
		return h.fixed
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.expire(now)
	if h.n < MinHedgeSamples {
		return math.Inf(1)
	}
	k := int(math.Ceil(h.q*float64(h.n))) - 1
	return h.sorted[min(max(k, 0), h.n-1)]
}

// expire drops the latencies recorded more than maxAge seconds before now;
// h.mu must be held. Latencies recorded after now (time going backwards)
// stay, and a NaN now drops nothing.
func (h *Hedger) expire(now float64) {
	for h.n > 0 && now-h.times[h.head] > h.maxAge {
		h.dropOldest()
	}
}

// dropOldest removes the oldest latency; h.mu must be held and h.n > 0.
func (h *Hedger) dropOldest() {
	old := h.lats[h.head]
	h.head = (h.head + 1) % len(h.lats)
	h.n--
	i := sort.SearchFloat64s(h.sorted, old) // h.sorted[i] == old
	copy(h.sorted[i:], h.sorted[i+1:])
	h.sorted = h.sorted[:h.n]
}

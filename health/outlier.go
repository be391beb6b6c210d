package health

import (
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
)

// Defaults of OutlierConfig, Envoy's outlier_detection defaults.
const (
	DefaultConsecutive5xx            = 5
	DefaultConsecutiveGatewayFailure = 5
	DefaultBaseEjectionTime          = 30.0  // seconds
	DefaultMaxEjectionTime           = 300.0 // seconds (or BaseEjectionTime if longer)
	DefaultMaxEjectionPercent        = 10
	DefaultOutlierInterval           = 10.0 // seconds
)

// Result is the outcome of one request to an endpoint, as passive health
// checking sees it.
type Result uint8

const (
	// Success is an answer that says nothing bad about the endpoint: any
	// status below 500 (a 4xx is the client's fault).
	Success Result = iota
	// ServerError is a 5xx answer other than a gateway failure. It counts
	// towards Consecutive5xx and breaks a run of gateway failures.
	ServerError
	// GatewayFailure is a 502, 503 or 504 answer, or no answer at all:
	// connection refused or reset, timeout. It counts towards both
	// ConsecutiveGatewayFailure and Consecutive5xx. A request the caller
	// itself cancelled is no evidence either way: do not record it.
	GatewayFailure
)

// HTTPResult classifies an HTTP status code.
func HTTPResult(status int) Result {
	switch {
	case status == 502 || status == 503 || status == 504:
		return GatewayFailure
	case status >= 500 && status <= 599:
		return ServerError
	}
	return Success
}

// Reason says why an endpoint was ejected.
type Reason uint8

const (
	NotEjected                Reason = iota // no ejection
	Consecutive5xx                          // Consecutive5xx server errors in a row
	ConsecutiveGatewayFailure               // ConsecutiveGatewayFailure gateway failures in a row
	NumReasons                              // the number of Reasons, NotEjected included
)

// String returns the reason's metric label: "none", "consecutive_5xx" or
// "consecutive_gateway_failure".
func (r Reason) String() string {
	switch r {
	case Consecutive5xx:
		return "consecutive_5xx"
	case ConsecutiveGatewayFailure:
		return "consecutive_gateway_failure"
	}
	return "none"
}

// Ejection is the Detector's decision on one result.
type Ejection struct {
	// Reason is NotEjected, or why the endpoint is ejected now.
	Reason Reason
	// Until is when the ejection ends, in seconds on the caller's
	// timeline: now + min(BaseEjectionTime × Multiplier, MaxEjectionTime).
	Until float64
	// Multiplier is the endpoint's ejection count, this one included,
	// less one for every Interval it has since spent in service.
	Multiplier int
}

// Ejected reports whether e ejects the endpoint.
func (e Ejection) Ejected() bool { return e.Reason != NotEjected }

// OutlierConfig is a passive health-check (outlier detection) setting,
// after Envoy's outlier_detection. The zero value is usable: every zero
// field takes its default. Durations are float64 seconds.
type OutlierConfig struct {
	// Consecutive5xx is the number of 5xx answers (gateway failures
	// included) in a row that eject an endpoint. 0 means
	// DefaultConsecutive5xx; negative disables this detection.
	Consecutive5xx int
	// ConsecutiveGatewayFailure is the number of gateway failures (502,
	// 503, 504, connect errors, timeouts) in a row that eject an endpoint.
	// 0 means DefaultConsecutiveGatewayFailure; negative disables it.
	// (Envoy counts these by default but does not enforce them; here they
	// are enforced.)
	ConsecutiveGatewayFailure int
	// BaseEjectionTime is how long a first ejection lasts; the n-th lasts
	// n times as long, up to MaxEjectionTime. 0 means
	// DefaultBaseEjectionTime.
	BaseEjectionTime float64
	// MaxEjectionTime caps one ejection. 0 means DefaultMaxEjectionTime,
	// or BaseEjectionTime if that is longer; otherwise it must be at least
	// BaseEjectionTime. The multiplier stops growing once it reaches the
	// cap, so an endpoint that recovers is forgiven in bounded time.
	MaxEjectionTime float64
	// MaxEjectionPercent caps the ejected share of the endpoints (those
	// given to SetHosts), 1–100: an ejection is allowed while
	// (ejected+1) ≤ MaxEjectionPercent% of the endpoints. As in Envoy, one
	// endpoint may always be ejected when none is, however small the
	// percentage or the set (10% of 5 endpoints still ejects one). 0 means
	// DefaultMaxEjectionPercent. Refused ejections are counted.
	MaxEjectionPercent int
	// Interval is the period over which an endpoint back in service earns
	// one step of its multiplier back (Envoy's sweep interval): after k
	// intervals without an ejection, a k-step smaller multiplier. 0 means
	// DefaultOutlierInterval.
	Interval float64
}

// Validate reports the first bad field as a *ConfigError wrapping
// ErrConfig, or nil.
func (c OutlierConfig) Validate() error {
	if err := checkSeconds("BaseEjectionTime", c.BaseEjectionTime); err != nil {
		return err
	}
	if err := checkSeconds("MaxEjectionTime", c.MaxEjectionTime); err != nil {
		return err
	}
	if err := checkSeconds("Interval", c.Interval); err != nil {
		return err
	}
	base := c.BaseEjectionTime
	if base == 0 {
		base = DefaultBaseEjectionTime
	}
	if c.MaxEjectionTime != 0 && c.MaxEjectionTime < base {
		return badConfig("MaxEjectionTime", "must be at least BaseEjectionTime ("+ftoa(base)+"), got "+ftoa(c.MaxEjectionTime))
	}
	if c.MaxEjectionPercent < 0 || c.MaxEjectionPercent > 100 {
		return badConfig("MaxEjectionPercent", "must be within 1–100 (0: default), got "+strconv.Itoa(c.MaxEjectionPercent))
	}
	return nil
}

// normalized applies the defaults; c must be valid. Disabled thresholds
// become 0.
func (c OutlierConfig) normalized() OutlierConfig {
	switch {
	case c.Consecutive5xx == 0:
		c.Consecutive5xx = DefaultConsecutive5xx
	case c.Consecutive5xx < 0:
		c.Consecutive5xx = 0
	}
	switch {
	case c.ConsecutiveGatewayFailure == 0:
		c.ConsecutiveGatewayFailure = DefaultConsecutiveGatewayFailure
	case c.ConsecutiveGatewayFailure < 0:
		c.ConsecutiveGatewayFailure = 0
	}
	if c.BaseEjectionTime == 0 {
		c.BaseEjectionTime = DefaultBaseEjectionTime
	}
	if c.MaxEjectionTime == 0 {
		c.MaxEjectionTime = max(DefaultMaxEjectionTime, c.BaseEjectionTime)
	}
	if c.MaxEjectionPercent == 0 {
		c.MaxEjectionPercent = DefaultMaxEjectionPercent
	}
	if c.Interval == 0 {
		c.Interval = DefaultOutlierInterval
	}
	return c
}

// Detector is passive health checking: it watches the results of real
// requests per endpoint and ejects an endpoint after too many failures in
// a row, for a time that grows with repeated ejections, never ejecting
// more than a set share of the endpoints. It is pure policy: time is a
// parameter, nothing runs in the background; the caller applies the
// decisions (Record's ejections, Tick's returns) to its endpoint set.
//
// Record is the hot path: lock-free and allocation-free (two atomic
// counters per endpoint, one map read of an immutable snapshot); the lock
// is taken only when a run of failures reaches a threshold. A Detector is
// safe for concurrent use. Memory is bounded by the endpoints given to
// SetHosts; results for other addresses are ignored.
type Detector struct {
	cfg     OutlierConfig // normalized
	maxMult int           // multiplier at which the ejection time reaches MaxEjectionTime
	hosts   atomic.Pointer[map[string]*outlierHost]

	mu       sync.Mutex
	ejected  int     // guarded by mu: endpoints ejected now
	next     float64 // guarded by mu: no Tick work before this instant
	counts   [NumReasons]uint64
	refused  uint64 // ejections refused by the percentage cap
	returned uint64
}

// outlierHost is the state of one endpoint.
type outlierHost struct {
	c5xx, cgw atomic.Int32 // failures in a row
	ejected   atomic.Bool

	removed bool    // guarded by Detector.mu
	mult    int     // guarded by Detector.mu
	until   float64 // guarded by Detector.mu: end of the ejection
	decayAt float64 // guarded by Detector.mu: when mult next drops by one
}

// NewDetector returns a Detector with no endpoints, or a *ConfigError if
// cfg is invalid.
func NewDetector(cfg OutlierConfig) (*Detector, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	n := cfg.normalized()
	d := &Detector{cfg: n, maxMult: int(math.Ceil(n.MaxEjectionTime / n.BaseEjectionTime)), next: math.Inf(1)}
	m := map[string]*outlierHost{}
	d.hosts.Store(&m)
	return d, nil
}

// SetHosts replaces the set of endpoints watched. Endpoints that remain
// keep their counters, ejection and multiplier; removed ones are
// forgotten (an ejected one no longer counts against the cap); new ones
// start clean. The empty string is ignored.
func (d *Detector) SetHosts(addrs []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	old := *d.hosts.Load()
	m := make(map[string]*outlierHost, len(addrs))
	for _, a := range addrs {
		if a == "" {
			continue
		}
		if h, ok := old[a]; ok {
			m[a] = h
		} else if _, dup := m[a]; !dup {
			m[a] = &outlierHost{}
		}
	}
	for a, h := range old {
		if _, ok := m[a]; !ok {
			h.removed = true
			if h.ejected.Load() {
				d.ejected--
			}
		}
	}
	d.hosts.Store(&m)
}

// Record feeds the result of one request to addr that ended at now and
// returns the decision: an Ejection whose Reason is not NotEjected means
// eject addr until Ejection.Until. Results for an ejected endpoint (from
// requests sent before its ejection) and for unknown addresses are
// ignored. An ejection refused by MaxEjectionPercent resets the run, so
// another full run is needed to try again.
func (d *Detector) Record(now float64, addr string, r Result) Ejection {
	h := (*d.hosts.Load())[addr]
	if h == nil || h.ejected.Load() {
		return Ejection{}
	}
	switch r {
	case Success:
		if h.c5xx.Load() != 0 {
			h.c5xx.Store(0)
		}
		if h.cgw.Load() != 0 {
			h.cgw.Store(0)
		}
	case ServerError:
		if h.cgw.Load() != 0 {
			h.cgw.Store(0)
		}
		if reached(&h.c5xx, d.cfg.Consecutive5xx) {
			return d.eject(now, h, Consecutive5xx)
		}
	case GatewayFailure:
		if reached(&h.cgw, d.cfg.ConsecutiveGatewayFailure) {
			return d.eject(now, h, ConsecutiveGatewayFailure)
		}
		if reached(&h.c5xx, d.cfg.Consecutive5xx) {
			return d.eject(now, h, Consecutive5xx)
		}
	}
	return Ejection{}
}

// reached counts one more failure in *c and reports whether this caller
// completed a run of threshold (0: disabled), resetting the run; of
// callers racing past the threshold, one wins.
func reached(c *atomic.Int32, threshold int) bool {
	if threshold <= 0 {
		return false
	}
	n := c.Add(1)
	return int(n) >= threshold && c.CompareAndSwap(n, 0)
}

// eject ejects h if the cap allows.
func (d *Detector) eject(now float64, h *outlierHost, why Reason) Ejection {
	d.mu.Lock()
	defer d.mu.Unlock()
	if h.removed || h.ejected.Load() {
		return Ejection{}
	}
	n := len(*d.hosts.Load())
	if d.ejected > 0 && 100*(d.ejected+1) > d.cfg.MaxEjectionPercent*n {
		d.refused++
		return Ejection{}
	}
	h.mult = min(h.mult+1, d.maxMult)
	length := float64(d.cfg.BaseEjectionTime * float64(h.mult))
	h.until = now + min(length, d.cfg.MaxEjectionTime)
	h.ejected.Store(true)
	d.ejected++
	d.counts[why]++
	d.next = min(d.next, h.until)
	return Ejection{Reason: why, Until: h.until, Multiplier: h.mult}
}

// Tick returns to service every ejected endpoint whose ejection has ended
// by now, and returns their addresses (sorted; nil if none), for the
// caller to put back in its endpoint set. It also steps down the
// multiplier of endpoints in service (see OutlierConfig.Interval). Call it
// periodically (every second, say): an endpoint returns at the first Tick
// at or after its Until. Tick is O(endpoints) when something is due and
// O(1) otherwise; it allocates only when it returns endpoints.
func (d *Detector) Tick(now float64) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if now < d.next {
		return nil
	}
	next := math.Inf(1)
	var back []string
	for a, h := range *d.hosts.Load() {
		if h.ejected.Load() {
			if now < h.until {
				next = min(next, h.until)
				continue
			}
			h.c5xx.Store(0)
			h.cgw.Store(0)
			h.ejected.Store(false)
			h.decayAt = now + d.cfg.Interval
			d.ejected--
			d.returned++
			back = append(back, a)
		} else if h.mult > 0 && now >= h.decayAt {
			h.mult--
			h.decayAt = now + d.cfg.Interval
		}
		if h.mult > 0 {
			next = min(next, h.decayAt)
		}
	}
	d.next = next
	slices.Sort(back)
	return back
}

// Return ends addr's ejection at now (an active check passed, say) and
// reports whether it was ejected. Its multiplier is kept.
func (d *Detector) Return(now float64, addr string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	h := (*d.hosts.Load())[addr]
	if h == nil || !h.ejected.Load() {
		return false
	}
	h.c5xx.Store(0)
	h.cgw.Store(0)
	h.ejected.Store(false)
	h.decayAt = now + d.cfg.Interval
	d.ejected--
	d.returned++
	d.next = min(d.next, h.decayAt)
	return true
}

// Ejected returns when addr's ejection ends and whether it is ejected now.
func (d *Detector) Ejected(addr string) (until float64, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	h := (*d.hosts.Load())[addr]
	if h == nil || !h.ejected.Load() {
		return 0, false
	}
	return h.until, true
}

// OutlierStats are a Detector's state and counters.
type OutlierStats struct {
	Hosts      int                // endpoints watched
	Ejected    int                // endpoints ejected now
	Ejections  [NumReasons]uint64 // ejections by Reason (index NotEjected stays 0)
	Refused    uint64             // ejections refused by MaxEjectionPercent
	Returned   uint64             // ejections ended (Tick or Return)
	Multiplier map[string]int     // non-zero multipliers by address
}

// Stats returns the Detector's state and counters. It allocates (the
// Multiplier map); it is meant for metrics and tests, not the hot path.
func (d *Detector) Stats() OutlierStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	m := *d.hosts.Load()
	s := OutlierStats{Hosts: len(m), Ejected: d.ejected, Ejections: d.counts, Refused: d.refused, Returned: d.returned}
	for a, h := range m {
		if h.mult > 0 {
			if s.Multiplier == nil {
				s.Multiplier = map[string]int{}
			}
			s.Multiplier[a] = h.mult
		}
	}
	return s
}

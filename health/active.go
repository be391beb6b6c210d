package health

import (
	"math"
	"strconv"
)

// Defaults of ActiveConfig, HAProxy's and seed 001's ("inter 2s fall 3
// rise 2", timeout 1 s).
const (
	DefaultInterval = 2.0 // seconds between the starts of two checks of one target
	DefaultTimeout  = 1.0 // seconds a check may take (capped at Interval when defaulted)
	DefaultJitter   = 0.1 // each wait is Interval × (1 ± 0.1)
	DefaultFall     = 3   // failed checks in a row that mark a target unhealthy
	DefaultRise     = 2   // passed checks in a row that mark it healthy again
)

// ActiveConfig is an active health-check setting. The zero value is usable:
// every zero field takes its default. Durations are float64 seconds.
type ActiveConfig struct {
	// Interval is the time from the start of one check of a target to the
	// start of the next, before jitter (HAProxy "inter", Envoy "interval").
	// 0 means DefaultInterval. Checks of one target never overlap: if a
	// check lasts longer than the wait, the next starts when it ends.
	Interval float64
	// Jitter spreads checks so that targets, and balancers, do not check in
	// step: each wait is Interval × (1 + Jitter×(2u−1)) for u uniform in
	// [0, 1), and a target's first check comes u × Jitter × Interval after
	// it is added. 0 means DefaultJitter; a negative value means no jitter
	// (every target is checked at once when added, then every Interval).
	// Must be below 1.
	Jitter float64
	// Timeout bounds one check: a check that has not passed by then
	// failed. 0 means DefaultTimeout, or Interval if that is shorter.
	Timeout float64
	// Fall is the number of failed checks in a row that mark a healthy
	// target unhealthy (HAProxy "fall", Envoy "unhealthy_threshold").
	// 0 means DefaultFall.
	Fall int
	// Rise is the number of passed checks in a row that mark an unhealthy
	// target healthy (HAProxy "rise", Envoy "healthy_threshold").
	// 0 means DefaultRise.
	Rise int
	// InitiallyHealthy is the state of a target before its first check.
	// The default, false, keeps a new target out of traffic until it has
	// answered once (Envoy's behaviour; HAProxy's init-state "down"); true
	// puts it in traffic at once (HAProxy's default init-state "up").
	// Either way the first check decides alone: one pass marks an
	// initially unhealthy target healthy, one failure marks an initially
	// healthy one unhealthy. Rise and Fall apply from then on.
	InitiallyHealthy bool
}

// Validate reports the first bad field as a *ConfigError wrapping
// ErrConfig, or nil.
func (c ActiveConfig) Validate() error {
	if err := checkSeconds("Interval", c.Interval); err != nil {
		return err
	}
	if err := checkSeconds("Timeout", c.Timeout); err != nil {
		return err
	}
	if math.IsNaN(c.Jitter) || c.Jitter >= 1 {
		return badConfig("Jitter", "must be below 1 (negative for none), got "+ftoa(c.Jitter))
	}
	if err := checkCount("Fall", c.Fall); err != nil {
		return err
	}
	return checkCount("Rise", c.Rise)
}

// normalized returns c with every default applied. c must be valid.
func (c ActiveConfig) normalized() ActiveConfig {
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	if c.Jitter == 0 {
		c.Jitter = DefaultJitter // a negative Jitter stays: none (normalized is idempotent)
	}
	if c.Timeout == 0 {
		c.Timeout = min(DefaultTimeout, c.Interval)
	}
	if c.Fall == 0 {
		c.Fall = DefaultFall
	}
	if c.Rise == 0 {
		c.Rise = DefaultRise
	}
	return c
}

// Timing returns the setting as seed 001's timing model, defaults applied,
// whose methods give the detection and recovery times without jitter.
func (c ActiveConfig) Timing() CheckTiming {
	n := c.normalized()
	return CheckTiming{Interval: n.Interval, Timeout: n.Timeout, Fall: n.Fall, Rise: n.Rise}
}

// Wait returns the seconds from the start of one check of a target to the
// start of the next, for u uniform in [0, 1): Interval × (1 + Jitter×(2u−1)),
// defaults applied. A u outside [0, 1) is clamped.
func (c ActiveConfig) Wait(u float64) float64 {
	n := c.normalized()
	u = clampUnit(u)
	return n.Interval * (1 + float64(max(n.Jitter, 0)*(float64(2*u)-1)))
}

// FirstWait returns the seconds from a target being added to its first
// check, for u uniform in [0, 1): u × Jitter × Interval, defaults applied
// (0 without jitter). A u outside [0, 1) is clamped.
func (c ActiveConfig) FirstWait(u float64) float64 {
	n := c.normalized()
	return clampUnit(u) * max(n.Jitter, 0) * n.Interval
}

func clampUnit(u float64) float64 {
	switch {
	case u > 0 && u < 1:
		return u
	case u >= 1:
		return math.Nextafter(1, 0)
	}
	return 0 // negative or NaN
}

// Tracker is the fall/rise state machine of one target, fed with check
// results and the time they arrived: a pure policy with no clock and no
// goroutine, driven by the Checker, by the simulator and by tests alike.
// The zero value is not usable; make one with NewTracker. A Tracker is not
// safe for concurrent use (the Checker guards each with its lock).
type Tracker struct {
	fall, rise     int
	healthy, seen  bool // current state; a result was recorded
	okRun, failRun int  // passes / failures in a row (one of them is 0)
	since, last    float64
	checks, failed uint64
	transitions    uint64
	toHealthy      uint64
}

// NewTracker returns the Tracker of a target added at now, in state
// cfg.InitiallyHealthy, or a *ConfigError if cfg is invalid.
func NewTracker(now float64, cfg ActiveConfig) (*Tracker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	t := newTracker(now, cfg.normalized())
	return &t, nil
}

// newTracker: n is normalized.
func newTracker(now float64, n ActiveConfig) Tracker {
	return Tracker{fall: n.Fall, rise: n.Rise, healthy: n.InitiallyHealthy, since: now, last: now}
}

// Record feeds the result of one check that ended at now (ok: passed) and
// reports whether the target changed state: Fall failures in a row turn a
// healthy target unhealthy, Rise passes in a row turn an unhealthy one
// healthy, and the very first result decides alone (see
// ActiveConfig.InitiallyHealthy). Results need not come in time order;
// now is only recorded (Since, Last).
func (t *Tracker) Record(now float64, ok bool) (changed bool) {
	first := !t.seen
	t.seen = true
	t.checks++
	t.last = now
	if ok {
		t.okRun++
		t.failRun = 0
	} else {
		t.failed++
		t.failRun++
		t.okRun = 0
	}
	switch {
	case t.healthy && !ok && (first || t.failRun >= t.fall):
		t.healthy = false
	case !t.healthy && ok && (first || t.okRun >= t.rise):
		t.healthy = true
		t.toHealthy++
	default:
		return false
	}
	t.transitions++
	t.since = now
	return true
}

// Healthy reports the current state.
func (t *Tracker) Healthy() bool { return t.healthy }

// Run returns the number of results in a row equal to the last one
// (passes if the last check passed, failures otherwise); 0 before the
// first check.
func (t *Tracker) Run() int { return max(t.okRun, t.failRun) }

// TrackerStats are a Tracker's state and counters.
type TrackerStats struct {
	Healthy     bool    // current state
	Checked     bool    // at least one result was recorded
	Run         int     // results in a row equal to the last one
	Since       float64 // when the state last changed (or the Tracker was made)
	Last        float64 // when the last result was recorded (or the Tracker was made)
	Checks      uint64  // results recorded
	Failures    uint64  // failed results recorded
	Transitions uint64  // state changes, both ways
	ToHealthy   uint64  // state changes to healthy (Transitions − ToHealthy went down)
}

// Stats returns the Tracker's state and counters.
func (t *Tracker) Stats() TrackerStats {
	return TrackerStats{Healthy: t.healthy, Checked: t.seen, Run: t.Run(), Since: t.since, Last: t.last,
		Checks: t.checks, Failures: t.failed, Transitions: t.transitions, ToHealthy: t.toHealthy}
}

// reason explains the transition Record just reported; err is the failed
// check's error (nil on a pass).
func (t *Tracker) reason(err error) string {
	if t.checks == 1 {
		if err != nil {
			return "first check failed: " + err.Error()
		}
		return "first check passed"
	}
	if err != nil {
		return strconv.Itoa(t.failRun) + " checks failed in a row, last: " + err.Error()
	}
	return strconv.Itoa(t.okRun) + " checks passed in a row"
}

package brownout

import (
	"context"
	"errors"
	"math"
	"runtime"
	"strconv"
	"sync/atomic"
)

// Defaults applied by New to zero-valued Config fields.
const (
	defaultPeriod     = 1.0  // seconds between control steps
	defaultWindowN    = 10   // Window = defaultWindowN × Period
	defaultHysteresis = 0.2  // rise only below 80% of each target
	defaultDecrease   = 0.8  // θ ← θ × 0.8 per Period over target
	defaultIncrease   = 0.05 // θ ← θ + 0.05 per Period well under target
	defaultMinSamples = 20   // fewer observations in the window: hold
)

// offBelow is the level under which a decrease goes straight to Config.Min.
// A multiplicative decrease alone never reaches 0; with this floor, Min = 0
// switches optional work off completely (with the default Decrease of 0.8,
// after 31 consecutive steps over target from θ = 1).
const offBelow = 1.0 / 1024

// Config configures a Dimmer. Durations are float64 seconds; the zero value
// of every field except the targets means its default. At least one of
// TargetWait and TargetP99 must be set.
type Config struct {
	// TargetWait is the mean queue wait, in seconds, above which the dimmer
	// lowers. 0 means the queue wait is ignored.
	TargetWait float64
	// TargetP99 is the 99th percentile latency, in seconds, above which the
	// dimmer lowers. 0 means latency is ignored.
	TargetP99 float64
	// Period is the time, in seconds, between control steps: the level
	// changes at most once per Period. It is also the length of one
	// sub-window of observations. 0 means 1 s.
	Period float64
	// Window is how many seconds of observations the signals cover. It is
	// rounded up to whole Periods, and the Period in progress is added, so a
	// step sees between Window and Window+Period seconds of observations.
	// It must be at least Period and at most 1000 Periods. 0 means
	// 10 × Period.
	Window float64
	// Hysteresis, in (0, 1), is the band below each target in which the
	// level holds: the level rises only when every set signal is below
	// (1 − Hysteresis) × its target. 0 means 0.2.
	Hysteresis float64
	// Decrease, in (0, 1), is the factor applied to the level at each step
	// where a set signal is above its target: θ ← max(Min, θ × Decrease),
	// and Min when θ × Decrease < 1/1024 (so that Min = 0 does switch
	// optional work off: after 31 steps from 1 with Decrease 0.8).
	// 0 means 0.8.
	Decrease float64
	// Increase, in (0, 1], is the amount added to the level at each step
	// where every set signal is below (1 − Hysteresis) × its target:
	// θ ← min(1, θ + Increase). 0 means 0.05.
	Increase float64
	// Min, in [0, 1), is the lowest level. 0 (the default) lets the dimmer
	// switch optional work off entirely.
	Min float64
	// MinSamples is the fewest observations the window must hold for a step
	// to change the level; with fewer the level holds, so the dimmer does
	// not react to noise or to an idle server. It must not be negative;
	// 0 means 20.
	MinSamples int
}

// ErrConfig is the sentinel every configuration error wraps:
// errors.Is(err, brownout.ErrConfig) tells a bad configuration from other
// errors.
var ErrConfig = errors.New("brownout: invalid configuration")

// ConfigError reports a bad configuration field.
type ConfigError struct {
	Field  string // the field, e.g. "Hysteresis"
	Reason string // what is wrong with it
}

func (e *ConfigError) Error() string { return "brownout: " + e.Field + ": " + e.Reason }

// Unwrap returns ErrConfig.
func (e *ConfigError) Unwrap() error { return ErrConfig }

func badConfig(field, reason string) error { return &ConfigError{Field: field, Reason: reason} }

func ftoa(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// checkSeconds: finite and not negative.
func checkSeconds(field string, v float64) error {
	if !finite(v) || v < 0 {
		return badConfig(field, "must be a finite number of seconds ≥ 0, got "+ftoa(v))
	}
	return nil
}

// checkOpenUnit: in (0, 1), or (0, 1] when closedHi.
func checkOpenUnit(field string, v float64, closedHi bool) error {
	if v > 0 && (v < 1 || closedHi && v == 1) {
		return nil
	}
	if closedHi {
		return badConfig(field, "must be in (0, 1], got "+ftoa(v))
	}
	return badConfig(field, "must be in (0, 1), got "+ftoa(v))
}

// wholePeriods returns ceil(window/period), at least 1, forgiving a ratio a
// rounding error above an integer (Window 0.3, Period 0.1).
func wholePeriods(window, period float64) int64 {
	r := math.Ceil(window/period - 1e-9)
	if !(r >= 1) {
		return 1
	}
	if r > 2*maxSubs {
		return 2 * maxSubs // any value over the limit will do for the check
	}
	return int64(r)
}

// withDefaults validates c and fills in its zero-valued fields.
func (c Config) withDefaults() (Config, error) {
	if err := checkSeconds("TargetWait", c.TargetWait); err != nil {
		return c, err
	}
	if err := checkSeconds("TargetP99", c.TargetP99); err != nil {
		return c, err
	}
	if c.TargetWait == 0 && c.TargetP99 == 0 {
		return c, badConfig("TargetWait, TargetP99", "at least one must be set")
	}
	if err := checkSeconds("Period", c.Period); err != nil {
		return c, err
	}
	if c.Period == 0 {
		c.Period = defaultPeriod
	}
	if err := checkSeconds("Window", c.Window); err != nil {
		return c, err
	}
	if c.Window == 0 {
		c.Window = defaultWindowN * c.Period
	}
	if c.Window < c.Period {
		return c, badConfig("Window", "must be at least Period ("+ftoa(c.Period)+" s), got "+ftoa(c.Window))
	}
	if wholePeriods(c.Window, c.Period) > maxSubs {
		return c, badConfig("Window", "must be at most "+strconv.Itoa(maxSubs)+" Periods, got "+ftoa(c.Window))
	}
	if c.Hysteresis == 0 {
		c.Hysteresis = defaultHysteresis
	}
	if err := checkOpenUnit("Hysteresis", c.Hysteresis, false); err != nil {
		return c, err
	}
	if c.Decrease == 0 {
		c.Decrease = defaultDecrease
	}
	if err := checkOpenUnit("Decrease", c.Decrease, false); err != nil {
		return c, err
	}
	if c.Increase == 0 {
		c.Increase = defaultIncrease
	}
	if err := checkOpenUnit("Increase", c.Increase, true); err != nil {
		return c, err
	}
	if !(c.Min >= 0 && c.Min < 1) {
		return c, badConfig("Min", "must be in [0, 1), got "+ftoa(c.Min))
	}
	if c.MinSamples < 0 {
		return c, badConfig("MinSamples", "must not be negative, got "+strconv.Itoa(c.MinSamples))
	}
	if c.MinSamples == 0 {
		c.MinSamples = defaultMinSamples
	}
	return c, nil
}

// Dimmer sets the share θ ∈ [Min, 1] of requests that run their optional
// work, from the queue wait and the latency of finished requests.
//
// Finished requests are reported with Observe. Every Period, the first call
// to Level (or Optional) takes a control step over the observations of the
// last Window: θ falls by the factor Decrease while the mean queue wait or
// the p99 latency is above its target, rises by Increase while both are
// below (1 − Hysteresis) × their targets, and holds in between or when the
// window holds fewer than MinSamples observations. The level starts at 1.
//
// A Dimmer is safe for concurrent use by any number of goroutines. Observe,
// Level and Optional never block and do not allocate. Observe is lock-free:
// a few atomic additions into a fixed histogram. Level reads one atomic
// word unless a step is due; then one caller takes the step (a try-lock)
// while the others read the current level.
//
// Memory is fixed at New: one sub-window per Period of the window plus one,
// each of about 1.8 KB (218 histogram counters, a wait sum and a period
// number): 11 sub-windows, about 19 KB, with the defaults; at most 1001,
// about 1.8 MB.
type Dimmer struct {
	cfg      Config
	riseWait float64 // (1 − Hysteresis) × TargetWait
	riseP99  float64 // (1 − Hysteresis) × TargetP99
	k        int64   // whole Periods in Window; a step reads periods cur−k … cur

	level    atomic.Uint64 // θ, float64 bits
	nextStep atomic.Uint64 // earliest now of the next step, float64 bits
	stepping atomic.Bool   // try-lock held by the goroutine taking a step

	// Signals of the last step, published under a sequence counter (odd
	// while being written) so Stats reads a consistent set.
	seq     atomic.Uint64
	p99     atomic.Uint64 // float64 bits
	wait    atomic.Uint64 // float64 bits
	samples atomic.Uint64

	subs ring
}

// New returns a Dimmer at level 1, or a *ConfigError wrapping ErrConfig
// that names the first bad field of cfg.
func New(cfg Config) (*Dimmer, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	k := wholePeriods(c.Window, c.Period)
	d := &Dimmer{
		cfg:      c,
		riseWait: (1 - c.Hysteresis) * c.TargetWait,
		riseP99:  (1 - c.Hysteresis) * c.TargetP99,
		k:        k,
		subs:     newRing(int(k) + 1),
	}
	d.level.Store(math.Float64bits(1))
	d.nextStep.Store(math.Float64bits(math.Inf(-1)))
	return d, nil
}

// periodOf returns floor(now/Period), and false when now is not finite or
// so far from 0 that the period number would not fit.
func (d *Dimmer) periodOf(now float64) (int64, bool) {
	p := math.Floor(now / d.cfg.Period)
	if !(math.Abs(p) < maxPeriodNo) { // also false for NaN
		return 0, false
	}
	return int64(p), true
}

// Observe records one finished request at now: wait is the time, in
// seconds, it spent queued before being served, and latency its total
// response time in seconds (pass 0 for a signal you do not measure). An
// observation whose now, wait or latency is NaN, infinite or negative
// (now may be negative, but must be finite) is ignored. Values at or above
// 2^27 µs (about 134 s) count as 134 s.
//
// Observe is safe for concurrent use, lock-free and does not allocate. When
// it is the first observation of a Period in its sub-window it zeroes that
// sub-window first (218 atomic stores); observations racing with that reset
// may be lost (see the package documentation), and so is an observation
// that arrives after its sub-window was reused for a later Period (its now
// about a Window older than the latest observations).
func (d *Dimmer) Observe(now, wait, latency float64) {
	if !(wait >= 0 && latency >= 0) || math.IsInf(wait, 1) || math.IsInf(latency, 1) {
		return // NaN fails both comparisons
	}
	p, ok := d.periodOf(now)
	if !ok {
		return
	}
	if wait > maxSeconds {
		wait = maxSeconds
	}
	d.subs.add(p, bucketOf(latency), uint64(wait*nanosPerSec))
}

// Level returns the level θ ∈ [Min, 1] at now: the share of requests that
// should run their optional work. When at least a Period has passed since
// the last control step (or no step was taken yet), it first takes a step;
// if another goroutine is taking one, it returns the current level without
// waiting. An idle dimmer takes one step when called again, not one per
// missed Period. A NaN now takes no step.
//
// Level is safe for concurrent use and does not allocate.
func (d *Dimmer) Level(now float64) float64 {
	if now >= math.Float64frombits(d.nextStep.Load()) && d.stepping.CompareAndSwap(false, true) {
		// Re-check: another goroutine may have stepped between the load and
		// the lock.
		if now >= math.Float64frombits(d.nextStep.Load()) {
			d.step(now)
		}
		d.stepping.Store(false)
	}
	return math.Float64frombits(d.level.Load())
}

// Optional reports whether a request with a uniform random draw u ∈ [0, 1)
// should run its optional work at now: u < Level(now). Drawing u per
// request (math/rand/v2's Float64 in production, a seeded source in
// simulations) gives a share of about Level(now) of the requests.
//
// Optional is safe for concurrent use and does not allocate.
func (d *Dimmer) Optional(now, u float64) bool {
	return u < d.Level(now)
}

// step takes one control step at now. Only the try-lock holder calls it.
func (d *Dimmer) step(now float64) {
	cur, ok := d.periodOf(now)
	if !ok {
		return
	}
	d.nextStep.Store(math.Float64bits(now + d.cfg.Period))

	var h histogram
	n, waitNs := d.subs.collect(&h, cur-d.k, cur)
	var p99, wait float64
	if n > 0 {
		p99 = h.quantile(n, 99, 100)
		wait = float64(waitNs) / float64(n) / nanosPerSec
	}

	d.seq.Add(1)
	d.p99.Store(math.Float64bits(p99))
	d.wait.Store(math.Float64bits(wait))
	d.samples.Store(n)
	d.seq.Add(1)

	if n < uint64(d.cfg.MinSamples) {
		return
	}
	c := &d.cfg
	over := (c.TargetP99 > 0 && p99 > c.TargetP99) || (c.TargetWait > 0 && wait > c.TargetWait)
	under := (c.TargetP99 == 0 || p99 < d.riseP99) && (c.TargetWait == 0 || wait < d.riseWait)
	theta := math.Float64frombits(d.level.Load())
	switch {
	case over:
		theta *= c.Decrease
		if theta < offBelow || theta < c.Min {
			theta = c.Min
		}
	case under:
		theta += c.Increase
		if theta > 1 {
			theta = 1
		}
	default:
		return
	}
	d.level.Store(math.Float64bits(theta))
}

// Stats is a snapshot of a Dimmer for metrics and tests.
type Stats struct {
	// Level is the current level θ.
	Level float64
	// P99 is the estimated 99th percentile latency, in seconds, of the
	// window at the last step (nearest rank, within 6.25% of the true
	// value between 1 µs and 134 s); 0 before the first step or when the
	// window was empty.
	P99 float64
	// Wait is the mean queue wait, in seconds, of the window at the last
	// step; 0 before the first step or when the window was empty.
	Wait float64
	// Samples is the number of observations in the window at the last step.
	Samples int
}

// Stats returns the current level and the signals of the last control step.
// It takes no step. It is safe for concurrent use and does not allocate;
// it may retry (yielding) while a step is publishing its signals.
func (d *Dimmer) Stats() Stats {
	for {
		s1 := d.seq.Load()
		if s1&1 == 0 {
			st := Stats{
				P99:     math.Float64frombits(d.p99.Load()),
				Wait:    math.Float64frombits(d.wait.Load()),
				Samples: int(d.samples.Load()),
			}
			if d.seq.Load() == s1 {
				st.Level = math.Float64frombits(d.level.Load())
				return st
			}
		}
		runtime.Gosched()
	}
}

// ctxKey is the context key of the optional-work decision.
type ctxKey struct{}

// WithOptional returns a copy of ctx carrying the decision on: whether the
// request may run its optional work. Middleware calls it once per request
// with d.Optional(now, u).
func WithOptional(ctx context.Context, on bool) context.Context {
	return context.WithValue(ctx, ctxKey{}, on)
}

// OptionalFrom reports whether the request in ctx may run its optional
// work: the decision WithOptional stored, or true when ctx carries none (no
// dimmer installed means full service). It does not allocate.
func OptionalFrom(ctx context.Context) bool {
	if on, ok := ctx.Value(ctxKey{}).(bool); ok {
		return on
	}
	return true
}

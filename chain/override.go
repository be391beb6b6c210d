package chain

import (
	"math"
	"math/rand/v2"
	"sync/atomic"
)

// Operator overrides, set through the admin API without a reload. They
// live in the Guard or Chain they change, so a reload that builds new
// ones drops them, and one that carries them (an unchanged definition)
// keeps them.
type overrides struct {
	forced atomic.Int32 // a forceNone, forceOpen or forceClosed breaker
	bypass atomic.Bool  // skip the stages the override belongs to
	// A forced brownout level (float64 bits), when brownoutOn.
	brownout   atomic.Uint64
	brownoutOn atomic.Bool
}

const (
	forceNone int32 = iota
	forceOpen
	forceClosed
)

// ForceBreaker forces the guard's breaker: "open" (every attempt gets the
// fallback), "closed" (every attempt goes through) or "" (the breaker
// decides again). It reports false for any other value.
func (g *Guard) ForceBreaker(state string) bool {
	switch state {
	case "":
		g.override.forced.Store(forceNone)
	case "open":
		g.override.forced.Store(forceOpen)
	case "closed":
		g.override.forced.Store(forceClosed)
	default:
		return false
	}
	return true
}

// ForcedBreaker returns the forced state: "open", "closed" or "".
func (g *Guard) ForcedBreaker() string {
	switch g.override.forced.Load() {
	case forceOpen:
		return "open"
	case forceClosed:
		return "closed"
	}
	return ""
}

// Bypass turns the route's own policies (deadline, rate limits, bulkhead,
// retries) off or on; admission and the breaker belong to the cluster.
func (c *Chain) Bypass(on bool) { c.override.bypass.Store(on) }

// Bypassed reports whether the route's policies are bypassed.
func (c *Chain) Bypassed() bool { return c.override.bypass.Load() }

// KeepAdmission gives g, a new guard of the cluster whose admission did
// not change, old's Gate (its limiter's state and pinned limit) and old's
// admission overrides (bypass, a forced brownout level). Call it before
// g is used; old's other overrides are not g's.
func (g *Guard) KeepAdmission(old *Guard) {
	g.Gate = old.Gate
	g.override.bypass.Store(old.override.bypass.Load())
	g.override.brownout.Store(old.override.brownout.Load())
	g.override.brownoutOn.Store(old.override.brownoutOn.Load())
}

// BypassAdmission turns the cluster's admission off or on.
func (g *Guard) BypassAdmission(on bool) { g.override.bypass.Store(on) }

// AdmissionBypassed reports whether the cluster's admission is bypassed.
func (g *Guard) AdmissionBypassed() bool { return g.override.bypass.Load() }

// PinLimit pins the cluster's admission limit to n (≥ 1) at now, in place
// of the adaptive algorithm's (which keeps learning); n = 0 unpins it. It
// reports false when the guard has no admission or n is negative.
func (g *Guard) PinLimit(now float64, n int) bool {
	if g.Gate == nil || n < 0 {
		return false
	}
	if n == 0 {
		g.Gate.Limiter().Unpin(now)
	} else {
		g.Gate.Limiter().Pin(now, n)
	}
	return true
}

// PinnedLimit returns the pinned admission limit, 0 when none.
func (g *Guard) PinnedLimit() int {
	if g.Gate == nil {
		return 0
	}
	return g.Gate.Limiter().Pinned()
}

// ForceBrownout sets the share of the cluster's requests that run their
// optional work to level, in [0, 1], in place of the dimmer's; a negative
// level releases it. It reports false when the cluster's admission has no
// dimmer or level is above 1 or NaN.
func (g *Guard) ForceBrownout(level float64) bool {
	if g.Gate == nil || g.Gate.Dimmer() == nil || !(level <= 1) {
		return false
	}
	if level < 0 {
		g.override.brownoutOn.Store(false)
	} else {
		g.override.brownout.Store(math.Float64bits(level))
		g.override.brownoutOn.Store(true)
	}
	return true
}

// ForcedBrownout returns the forced brownout level; ok false when none.
func (g *Guard) ForcedBrownout() (level float64, ok bool) {
	if !g.override.brownoutOn.Load() {
		return 0, false
	}
	return math.Float64frombits(g.override.brownout.Load()), true
}

// optional draws the brownout decision of a request admitted at now: the
// forced level's, else the Gate's dimmer's.
func (g *Guard) optional(now float64) bool {
	if g.override.brownoutOn.Load() {
		return rand.Float64() < math.Float64frombits(g.override.brownout.Load())
	}
	return g.Gate.Optional(now)
}

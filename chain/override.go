package chain

import "sync/atomic"

// Operator overrides, set through the admin API without a reload. They
// live in the Guard or Chain they change, so a reload that builds new
// ones drops them (the admin API says so when it sets one).
type overrides struct {
	forced atomic.Int32 // a forceNone, forceOpen or forceClosed breaker
	bypass atomic.Bool  // skip the stages the override belongs to
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

// BypassAdmission turns the cluster's admission off or on.
func (g *Guard) BypassAdmission(on bool) { g.override.bypass.Store(on) }

// AdmissionBypassed reports whether the cluster's admission is bypassed.
func (g *Guard) AdmissionBypassed() bool { return g.override.bypass.Load() }

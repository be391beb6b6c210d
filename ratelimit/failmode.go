package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/spillwayhq/spillway/breaker"
)

// FailMode is what a rule does when its store cannot decide (seed 002,
// "store failure"): serve (open) or refuse (closed).
type FailMode uint8

// The fail modes.
const (
	// FailOpen serves requests while the store is down: protection is
	// paused, except for an optional loose local limit (GuardConfig.Floor).
	// The usual choice for ordinary APIs.
	FailOpen FailMode = iota
	// FailClosed refuses requests while the store is down (the HTTP layer
	// answers 503). For limits that must hold: OTP, payments, login.
	FailClosed
)

// String returns "open" or "closed", the names in rules files.
func (m FailMode) String() string {
	switch m {
	case FailOpen:
		return "open"
	case FailClosed:
		return "closed"
	}
	return fmt.Sprintf("FailMode(%d)", uint8(m))
}

// ParseFailMode returns the fail mode named "open" or "closed"
// (case-insensitive; "" is "open").
func ParseFailMode(s string) (FailMode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "open":
		return FailOpen, nil
	case "closed":
		return FailClosed, nil
	}
	return 0, fmt.Errorf("ratelimit: unknown fail mode %q (want open or closed)", s)
}

// DefaultGuardRecovery is the breaker's Recovery used when
// GuardConfig.Breaker.Recovery is zero: one trial call to a dead store per
// second, so a store that comes back is used again within a second.
const DefaultGuardRecovery = 1.0

// ErrStoreOpen is returned (in FailClosed mode) when the breaker stopped
// calling the store. It wraps ErrStoreUnavailable and breaker.ErrOpen.
var ErrStoreOpen = fmt.Errorf("%w: %w", ErrStoreUnavailable, breaker.ErrOpen)

// GuardConfig configures a Guarded store. The zero value fails open
// without a floor, and opens its breaker after 3 consecutive failures for
// DefaultGuardRecovery seconds.
type GuardConfig struct {
	// Mode is what a request gets when the store cannot decide.
	Mode FailMode
	// Floor, if not nil, decides in the store's place in FailOpen mode: a
	// loose local limiter (typically an in-memory store with a higher
	// limit) so that a dead store does not remove all protection. It is
	// asked only while the store fails, so its state starts fresh at each
	// outage. An error from Floor allows the request. Unused in FailClosed
	// mode.
	Floor Keyed
	// Breaker configures the circuit breaker around the store (package
	// breaker: consecutive failures open it; after Recovery seconds one
	// trial call is let through). A zero Recovery means
	// DefaultGuardRecovery rather than the breaker's own default.
	Breaker breaker.Config
}

// GuardStats are a Guarded store's counters since NewGuarded.
type GuardStats struct {
	Calls    uint64 // calls made to the store
	Failures uint64 // calls that failed (not counting the caller's own ctx ending)
	Skipped  uint64 // requests decided without calling the store (breaker open)
	Degraded uint64 // requests decided by the fail mode (failed or skipped)
}

// Guarded wraps a Keyed store (typically a Redis store) with a fail mode
// and a circuit breaker. It implements Keyed and is safe for concurrent use
// (the breaker takes one short mutex per request; the counters are atomic).
//
// Decision table, for a request at now:
//
//	breaker       store call                FailOpen                          FailClosed
//	closed/trial  answers d                 d, nil                            d, nil
//	closed/trial  fails (timeout, refused)  Floor's decision, nil             not allowed, the store's error
//	              → counts a failure        (no Floor, or it fails: allowed,  (wrapping ErrStoreUnavailable)
//	                                        Remaining and Reset 0)
//	open          not made (costs nothing)  as for a failure                  not allowed, ErrStoreOpen
//	any           the caller's ctx ended    zero Decision, the store's error (the breaker ignores the call)
//
// In FailClosed mode the refusal's RetryAfter is the breaker's Recovery, a
// hint for the 503's Retry-After. Threshold consecutive failures open the
// breaker at the failing request's now; from then on requests cost no call
// and no timeout, until Recovery seconds later one request becomes a trial:
// its success closes the breaker (the store is used again), its failure
// opens it for another Recovery. The breaker's times are the now arguments,
// on the caller's timeline (the store's own clock plays no part), and a
// call's outcome is reported at the now it started with.
type Guarded struct {
	primary  Keyed            // immutable
	floor    Keyed            // immutable; nil for none
	mode     FailMode         // immutable
	recovery float64          // immutable, seconds
	br       *breaker.Breaker // safe for concurrent use

	calls, failures, skipped, degraded atomic.Uint64
}

var _ Keyed = (*Guarded)(nil)

// NewGuarded returns primary wrapped with cfg's fail mode and breaker, or
// an error naming the bad field.
func NewGuarded(primary Keyed, cfg GuardConfig) (*Guarded, error) {
	if primary == nil {
		return nil, errors.New("ratelimit: NewGuarded: primary is nil")
	}
	if cfg.Mode > FailClosed {
		return nil, fmt.Errorf("ratelimit: GuardConfig.Mode %d is unknown", uint8(cfg.Mode))
	}
	if cfg.Breaker.Recovery == 0 {
		cfg.Breaker.Recovery = DefaultGuardRecovery
	}
	br, err := breaker.New(cfg.Breaker)
	if err != nil {
		return nil, fmt.Errorf("ratelimit: GuardConfig.Breaker: %w", err)
	}
	return &Guarded{primary: primary, floor: cfg.Floor, mode: cfg.Mode, recovery: cfg.Breaker.Recovery, br: br}, nil
}

// AllowN decides a request through the store, or by the fail mode when the
// store fails or the breaker is open; see the decision table on Guarded.
func (g *Guarded) AllowN(ctx context.Context, key string, now float64, cost int) (Decision, error) {
	t := g.Begin(now)
	if !t.Call() {
		return t.End(ctx, key, cost, Decision{}, nil)
	}
	d, err := g.primary.AllowN(ctx, key, now, cost)
	return t.End(ctx, key, cost, d, err)
}

// fail applies the fail mode.
func (g *Guarded) fail(ctx context.Context, key string, now float64, cost int, err error) (Decision, error) {
	g.degraded.Add(1)
	if g.mode == FailClosed {
		return Decision{RetryAfter: g.recovery}, err
	}
	if g.floor != nil {
		if d, ferr := g.floor.AllowN(ctx, key, now, cost); ferr == nil {
			return d, nil
		}
	}
	return Decision{Allowed: true}, nil
}

// Stats returns the counters.
func (g *Guarded) Stats() GuardStats {
	return GuardStats{Calls: g.calls.Load(), Failures: g.failures.Load(),
		Skipped: g.skipped.Load(), Degraded: g.degraded.Load()}
}

// Breaker returns a snapshot of the breaker, for metrics.
func (g *Guarded) Breaker() breaker.Snapshot { return g.br.Snapshot() }

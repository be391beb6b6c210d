package shed

import (
	"math"
	"strconv"
	"sync/atomic"
)

// Class is a request's criticality: how much it matters that it is served
// under overload. Smaller is more important; classes are compared as numbers.
// The class should travel with the request to downstream services (in a
// header), or a payment becomes "unknown" downstream and is shed first.
type Class uint8

// The three classes most services need (seed 000: A = payments/checkout,
// B = normal browsing, C = prefetch/analytics). A ClassLimiter may be
// configured with up to MaxClasses classes; these are only names for the
// first three.
const (
	Critical  Class = 0 // losing it costs money or trust: checkout, login, payment
	Default   Class = 1 // ordinary interactive traffic
	Sheddable Class = 2 // work nobody waits for: prefetch, analytics, batch
)

// MaxClasses is the largest number of classes a ClassLimiter supports.
const MaxClasses = 8

// String returns "critical", "default", "sheddable", or "class N" for others.
func (c Class) String() string {
	switch c {
	case Critical:
		return "critical"
	case Default:
		return "default"
	case Sheddable:
		return "sheddable"
	}
	return "class " + strconv.Itoa(int(c))
}

// NoLimit as a class limit means requests of that class are never refused.
const NoLimit = -1

// ClassConfig configures a ClassLimiter.
type ClassConfig struct {
	// Limits holds one limit per class, most important first: a request of
	// class c is admitted while the requests in flight, over all classes,
	// are fewer than Limits[c]. len(Limits) is the number of classes, 1 to
	// MaxClasses. A limit is NoLimit (never refuse) or ≥ 0 (0 refuses the
	// class always). Limits must not increase from one class to the next,
	// so a less important class is always refused first.
	//
	// Examples: {NoLimit} is an unbounded server; {50} or {50, 50} a bounded
	// one that fails fast at 50; {50, 20} reserves the last 30 places for
	// Critical.
	Limits []int
}

// validate checks cfg and returns the limits as stored (NoLimit as MaxInt64).
func (cfg ClassConfig) validate() ([MaxClasses]int64, error) {
	var out [MaxClasses]int64
	n := len(cfg.Limits)
	if n == 0 {
		return out, badConfig("Limits", "need a limit for at least one class")
	}
	if n > MaxClasses {
		return out, badConfig("Limits", "at most "+strconv.Itoa(MaxClasses)+" classes, got "+strconv.Itoa(n))
	}
	for c, lim := range cfg.Limits {
		field := "Limits[" + strconv.Itoa(c) + "]"
		switch {
		case lim == NoLimit:
			out[c] = math.MaxInt64
		case lim < 0:
			return out, badConfig(field, "must be NoLimit (-1) or at least 0, got "+strconv.Itoa(lim))
		default:
			out[c] = int64(lim)
		}
		if c > 0 && out[c] > out[c-1] {
			return out, badConfig(field, "must not exceed the limit of the more important class before it")
		}
	}
	return out, nil
}

// ClassLimiter admits requests while the number in flight is below the limit
// of their class. It is the enforcer only: the limits are set at construction
// and may be changed at any time with SetLimits (by an operator, or by an
// adaptive algorithm that computes them).
//
// A ClassLimiter is safe for concurrent use by any number of goroutines. It
// takes no lock: the count in flight is one atomic integer, changed by
// compare-and-swap, so it never exceeds the largest limit even when many
// goroutines admit at once. Create it with NewClassLimiter.
type ClassLimiter struct {
	inFlight atomic.Int64
	_        [56]byte // keep the hot counter on its own cache line

	limits  [MaxClasses]atomic.Int64 // NoLimit stored as MaxInt64; written by SetLimits
	classes int                      // immutable
}

// NewClassLimiter returns a limiter with the given limits, or a
// *ConfigError naming the bad field.
func NewClassLimiter(cfg ClassConfig) (*ClassLimiter, error) {
	lims, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	l := &ClassLimiter{classes: len(cfg.Limits)}
	for c := range lims {
		l.limits[c].Store(lims[c])
	}
	return l, nil
}

// Classes returns the number of configured classes.
func (l *ClassLimiter) Classes() int { return l.classes }

// class maps c onto a configured class: a class beyond the configured ones
// counts as the least important configured class.
func (l *ClassLimiter) class(c Class) Class {
	if int(c) >= l.classes {
		return Class(l.classes - 1)
	}
	return c
}

// Admit admits a request of class c if fewer than its class's limit are in
// flight, and returns its Token; the caller must Release the token when the
// request is finished, whatever the outcome. When the request is refused, ok
// is false and the zero Token is returned (releasing it does nothing).
// A class beyond the configured ones is treated as the last configured class.
// Admit does not allocate. It is AdmitN(c, 1).
func (l *ClassLimiter) Admit(c Class) (tok Token, ok bool) {
	return l.AdmitN(c, 1)
}

// AdmitN admits a request of class c that costs n places (n < 1 counts as
// 1): it is admitted when the count in flight plus n stays within its
// class's limit, or when nothing at all is in flight, so a request costing
// more than the whole limit still runs, alone, when the server is idle
// rather than never. Its Token gives all n places back on Release.
// AdmitN does not allocate.
func (l *ClassLimiter) AdmitN(c Class, n int) (tok Token, ok bool) {
	c = l.class(c)
	cost := int64(1)
	if n > 1 {
		cost = int64(n)
	}
	limit := l.limits[c].Load()
	for {
		cur := l.inFlight.Load()
		if cur >= limit || (cur > limit-cost && cur != 0) {
			return Token{}, false
		}
		if l.inFlight.CompareAndSwap(cur, cur+cost) {
			return Token{l: l, class: c, cost: cost}, true
		}
	}
}

// InFlight returns the number of admitted requests not yet released.
func (l *ClassLimiter) InFlight() int { return int(l.inFlight.Load()) }

// Limit returns the current limit of class c (NoLimit if it has none).
// A class beyond the configured ones reports the last class's limit.
func (l *ClassLimiter) Limit(c Class) int {
	v := l.limits[l.class(c)].Load()
	if v == math.MaxInt64 {
		return NoLimit
	}
	return int(v)
}

// SetLimits replaces the limits, which must name the same number of classes
// and obey the same rules as ClassConfig.Limits. Requests already in flight
// are not affected; if the new limit is below the count in flight, the class
// is refused until enough have been released. An Admit running at the same
// time may see some classes' old limits and others' new ones.
func (l *ClassLimiter) SetLimits(limits []int) error {
	lims, err := ClassConfig{Limits: limits}.validate()
	if err != nil {
		return err
	}
	if len(limits) != l.classes {
		return badConfig("Limits", "want "+strconv.Itoa(l.classes)+" classes as at construction, got "+strconv.Itoa(len(limits)))
	}
	for c := 0; c < l.classes; c++ {
		l.limits[c].Store(lims[c])
	}
	return nil
}

// Token is an admitted request's place in a ClassLimiter. Release gives the
// place back; it is idempotent — the second and later calls do nothing, even
// when made concurrently — so a timeout path and a completion path may both
// release the same token.
//
// A Token must not be copied after admission (go vet reports copies): a copy
// would be a second handle that could release the place again. Keep it in a
// variable or struct field and pass a *Token around.
type Token struct {
	l        *ClassLimiter
	class    Class
	cost     int64 // places held, ≥ 1
	released atomic.Bool
}

// Release returns the token's place to its limiter, once. Releasing the zero
// Token (a refused admission) does nothing.
func (t *Token) Release() {
	if t.l == nil || !t.released.CompareAndSwap(false, true) {
		return
	}
	t.l.inFlight.Add(-t.cost)
}

// Admitted reports whether the token holds (or held) a place: false for the
// zero Token returned with a refusal.
func (t *Token) Admitted() bool { return t.l != nil }

// Class returns the class the request was admitted as (after mapping an
// unconfigured class onto the last configured one).
func (t *Token) Class() Class { return t.class }

// Cost returns the number of places the token holds: 1 from Admit, n from
// AdmitN, 0 for the zero Token.
func (t *Token) Cost() int { return int(t.cost) }

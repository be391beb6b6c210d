package redisstore

import (
	"context"
	"math"

	"github.com/spillwayhq/spillway/ratelimit"
)

// published is one published configuration: each class's scale and script
// parameters (nil: the class is closed). Immutable; swapped whole through
// Store.pub, so a decision reads its parameters with one atomic load.
type published struct {
	n     int // classes
	scale [ratelimit.MaxLoadClasses]float64
	par   [ratelimit.MaxLoadClasses]*params
}

// params returns class's parameters (nil: closed), class clamped to the
// configured classes.
func (p *published) params(class int) *params {
	return p.par[min(max(class, 0), p.n-1)]
}

// fullScales is every class at scale 1: the rule itself.
func (s *Store) fullScales() (scales [ratelimit.MaxLoadClasses]float64) {
	for i := range s.curves {
		scales[i] = 1
	}
	return scales
}

// publish builds and publishes the configuration for scales (one per
// class; classes with equal scales share their parameters).
func (s *Store) publish(scales [ratelimit.MaxLoadClasses]float64) {
	p := &published{n: len(s.curves), scale: scales}
	for i := range p.n {
		switch f := scales[i]; {
		case f >= 1:
			p.par[i] = s.base
		case i > 0 && f == scales[i-1]:
			p.par[i] = p.par[i-1]
		default:
			p.par[i] = newParams(s.spec, s.ticks, f)
		}
	}
	s.pub.Store(p)
}

// setScales publishes scales unless they are already in force.
func (s *Store) setScales(scales [ratelimit.MaxLoadClasses]float64) {
	s.pubMu.Lock()
	defer s.pubMu.Unlock()
	if s.pub.Load().scale == scales {
		return
	}
	s.publish(scales)
}

// SetScale scales every class's limit by f (clamped to [0, 1]; NaN means
// 1), with ratelimit.Memory.SetScale's formulas (ratelimit.ScaledSpec): a
// bucket algorithm enforces Rate·f per Per with Burst max(1, ⌊Burst·f⌋), a
// window algorithm ⌊Rate·f⌋ per window; a scale at which nothing can pass
// closes the class (see AllowClassN).
//
// Each configuration is immutable and published through an atomic pointer,
// so decisions never wait for SetScale; a decision already queued keeps
// the parameters it was queued with. The scaled parameters travel with
// each script call; the keys' states in Redis carry over and are read
// under them: a GCRA key's TAT is compared with the scaled τ, a token
// bucket holding more than the scaled Burst is cut to it at its next
// refill, a window's count is compared with the scaled limit (Remaining
// can then be negative, as in memory). A scale change takes effect at once
// and refills no one.
//
// TTL: every write sets the key's TTL from the parameters it was decided
// with: the key lives until its state is that of a missing key under them
// and, for the token bucket (whose scaled Burst is smaller), under the
// rule's own limit too. GCRA, the leaky queue and the windows store
// instants, which no scale changes: their keys expire exactly when they
// become redundant. A leaky meter's key (or, when its scaled Burst
// max(1, ⌊Burst·f⌋) is raised to 1, a token bucket's) can expire and then
// restart empty (full) under a later, smaller scale at which its stored
// state, drained (refilled) lazily at the slower rate, would still have
// held something: as in ratelimit.Memory, which drops a key that is full
// under the rule and the scales in force when it looks.
func (s *Store) SetScale(f float64) {
	f = ratelimit.ClampScale(f)
	var scales [ratelimit.MaxLoadClasses]float64
	for i := range s.curves {
		scales[i] = f
	}
	s.setScales(scales)
}

// SetHealth scales each class by its curve at health h
// (ratelimit.ClassCurve.Scale): lower classes first, if their curves say
// so. Config.Health calls it when polled.
func (s *Store) SetHealth(h float64) {
	var scales [ratelimit.MaxLoadClasses]float64
	for i, c := range s.curves {
		scales[i] = c.Scale(h)
	}
	s.setScales(scales)
}

// Scale returns the scale in force for class (clamped to the configured
// classes as in AllowClassN).
func (s *Store) Scale(class int) float64 {
	p := s.pub.Load()
	return p.scale[min(max(class, 0), p.n-1)]
}

// poll calls Health when HealthInterval has passed since the last call (now
// is AllowN's; NaN and negative count as 0). Of the goroutines deciding at
// the same time, the one that advances the next poll instant
// (compare-and-swap) calls it; the others go on with the published
// configuration.
func (s *Store) poll(now float64) {
	if !(now >= 0) {
		now = 0
	}
	next := s.nextPoll.Load()
	if now < math.Float64frombits(next) {
		return
	}
	if !s.nextPoll.CompareAndSwap(next, math.Float64bits(now+s.interval)) {
		return
	}
	s.SetHealth(s.health())
}

// closedDecision is the answer of a closed class: a query is allowed,
// anything else refused until a period has passed (when the health
// recovers is not known).
func (s *Store) closedDecision(cost int) ratelimit.Decision {
	if cost <= 0 {
		return ratelimit.Decision{Allowed: true}
	}
	return ratelimit.Decision{RetryAfter: s.spec.Per}
}

// ForClass returns a Keyed that decides in class c (see AllowClassN), for
// callers that pick a store per request class.
func (s *Store) ForClass(c int) ratelimit.Keyed { return storeClass{s, c} }

type storeClass struct {
	s *Store
	c int
}

func (k storeClass) AllowN(ctx context.Context, key string, now float64, cost int) (ratelimit.Decision, error) {
	return k.s.AllowClassN(ctx, key, k.c, now, cost)
}

package ratelimit

import (
	"fmt"
	"math"
	"slices"
)

// MaxLoadClasses is the most load classes a Memory has (as shed.MaxClasses).
const MaxLoadClasses = 8

// ClassCurve maps the backend's health h (1 healthy, 0 failing) to the share
// of the rule's rate that one class of requests gets:
//
//	scale(h) = 1                          if h ≥ High
//	           0                          if h ≤ Low (and h < High)
//	           (h − Low) / (High − Low)   otherwise
//
// {Low: 0, High: 1} is proportional (scale = h); {Low: 0, High: 0} keeps
// the full rate whatever the health (critical traffic); {Low: s, High: 1} is
// clamp((h − s)/(1 − s)): the class loses its share first and has nothing
// left at health s. A NaN health counts as 1 (an unusable signal sheds
// nothing); health outside [0, 1] is clamped by the formula.
type ClassCurve struct {
	Low  float64 // health at or below which the class gets nothing; 0 ≤ Low ≤ High
	High float64 // health from which the class gets its full rate; High ≤ 1
}

// Scale returns the class's share of the rate at health h.
func (c ClassCurve) Scale(h float64) float64 {
	switch {
	case math.IsNaN(h) || h >= c.High:
		return 1
	case h <= c.Low:
		return 0
	}
	return (h - c.Low) / (c.High - c.Low)
}

// validateCurves checks the classes' curves: each within [0, 1], and a less
// important class (larger index) never above a more important one: Low and
// High do not decrease from one class to the next.
func validateCurves(cs []ClassCurve) error {
	if len(cs) > MaxLoadClasses {
		return fmt.Errorf("%w: Classes holds %d curves, at most %d", ErrInvalidKeyedConfig, len(cs), MaxLoadClasses)
	}
	for i, c := range cs {
		if !(0 <= c.Low && c.Low <= c.High && c.High <= 1) {
			return fmt.Errorf("%w: Classes[%d] must have 0 ≤ Low ≤ High ≤ 1, got %+v", ErrInvalidKeyedConfig, i, c)
		}
		if i > 0 && (c.Low < cs[i-1].Low || c.High < cs[i-1].High) {
			return fmt.Errorf("%w: Classes[%d] %+v must not be above Classes[%d] %+v (Low and High must not decrease)",
				ErrInvalidKeyedConfig, i, c, i-1, cs[i-1])
		}
	}
	return nil
}

// clampScale maps f to [0, 1], NaN to 1.
func clampScale(f float64) float64 {
	switch {
	case math.IsNaN(f) || f > 1:
		return 1
	case f < 0:
		return 0
	}
	return f
}

// scaledSpec returns base (with defaults) scaled by f, or false when
// nothing can pass at that scale.
func scaledSpec(base Spec, f float64) (Spec, bool) {
	if f >= 1 {
		return base, true
	}
	if !(f > 0) {
		return Spec{}, false
	}
	s := base
	if base.Algorithm.Bucket() {
		s.Rate = float64(base.Rate * f)
		s.Burst = int(max(1, math.Floor(float64(base.Burst)*f)))
	} else if s.Rate = math.Floor(base.Rate * f); s.Rate < 1 {
		return Spec{}, false
	}
	if s.Validate() != nil { // a rate so small that 1/Rate overflows
		return Spec{}, false
	}
	return s, true
}

// SetScale scales every class's rate by f (clamped to [0, 1]; NaN means 1):
// all tenants proportionally (seed 002, "Adaptive limits": every tenant gets
// its contract limit while the backend is healthy; under stress all limits
// shrink in proportion, or the less critical classes first, see SetHealth).
// A class at scale f enforces
//
//	bucket algorithms:  Rate·f per Per, Burst max(1, ⌊Burst·f⌋)
//	window algorithms:  ⌊Rate·f⌋ per window of Per seconds
//
// A scale of 1 is the rule itself. A scale at which nothing can pass (0, or
// a window limit ⌊Rate·f⌋ < 1) closes the class: its requests are refused
// with RetryAfter = Per (the rule's period; when the health recovers is not
// known) and queries (cost 0) are allowed.
//
// Each published configuration is immutable: SetScale and SetHealth build a
// new one and swap an atomic pointer (unless the scales are already those),
// so decisions never wait for them. The keys' states carry over and are
// read under the new configuration (a GCRA key's TAT stays where it is and
// is compared with the scaled τ; a token bucket holding more than the scaled
// Burst is cut to it at its next refill), so a scale change takes effect at
// once and never refills anyone.
func (m *Memory) SetScale(f float64) {
	f = clampScale(f)
	scales := make([]float64, len(m.curves))
	for i := range scales {
		scales[i] = f
	}
	m.setScales(scales)
}

// SetHealth scales each class by its ClassCurve at health h: lower classes
// first, if their curves say so. MemoryConfig.Health calls it when polled.
func (m *Memory) SetHealth(h float64) {
	scales := make([]float64, len(m.curves))
	for i, c := range m.curves {
		scales[i] = c.Scale(h)
	}
	m.setScales(scales)
}

// Scale returns the scale in force for class (clamped to the configured
// classes as in AllowClassN).
func (m *Memory) Scale(class int) float64 {
	s := m.impl.scales()
	return s[min(max(class, 0), len(s)-1)]
}

func (m *Memory) setScales(scales []float64) {
	m.pubMu.Lock()
	defer m.pubMu.Unlock()
	if slices.Equal(scales, m.impl.scales()) {
		return
	}
	m.impl.publish(scales)
}

// poll calls Health when HealthInterval has passed since the last call. Of
// goroutines deciding at the same time, the one that advances the next poll
// instant (compare-and-swap) calls it; the others go on with the published
// configuration.
func (m *Memory) poll(ns int64) {
	next := m.nextPoll.Load()
	if ns < next {
		return
	}
	if !m.nextPoll.CompareAndSwap(next, laterBy(ns, m.interval)) {
		return
	}
	m.SetHealth(m.health())
}

package ratelimit

import "fmt"

// The pieces of load-aware limits (see ClassCurve and Memory.SetScale) that
// other stores reuse, so that every store scales a rule with the same
// formulas: package ratelimit/redisstore sends the scaled limit to its
// scripts.

// ClampScale returns the scale a store applies for f: f clamped to [0, 1],
// NaN read as 1 (an unusable signal sheds nothing). Memory.SetScale clamps
// its argument with it.
func ClampScale(f float64) float64 { return clampScale(f) }

// ScaledSpec returns the limit that s enforces at scale f (clamped by
// ClampScale), with s's defaults filled in, as Memory.SetScale documents:
//
//	bucket algorithms:  Rate·f per Per, Burst max(1, ⌊Burst·f⌋)
//	window algorithms:  ⌊Rate·f⌋ per window of Per seconds
//
// At scale 1 it is s itself. ok is false when nothing can pass at that
// scale (0, a window limit ⌊Rate·f⌋ below 1, or a rate so small that its
// emission interval overflows): the class is closed, and a store refuses
// its requests with RetryAfter = s.Per. It is also false for an invalid s.
func ScaledSpec(s Spec, f float64) (scaled Spec, ok bool) {
	if s.Validate() != nil {
		return Spec{}, false
	}
	return scaledSpec(s.withDefaults(), clampScale(f))
}

// ValidateClasses checks load classes' curves as NewMemory checks
// MemoryConfig.Classes: at most MaxLoadClasses, each with
// 0 ≤ Low ≤ High ≤ 1, and Low and High not decreasing from one class to
// the next (a less important class never gets more than a more important
// one). The error wraps ErrInvalidKeyedConfig and names the class.
func ValidateClasses(cs []ClassCurve) error { return validateCurves(cs) }

// ScaledDecider returns the configuration that a store enforces for the rule
// s at scale f (ScaledSpec's limit), made from base, the rule's own
// configuration (what NewGCRA, NewTokenBucket, ... return for s), so that
// it reads and writes base's states: a key's state carries over between
// scales as Memory.SetScale documents. For the bucket algorithms that is
// base.WithLimit (states are in the units of the rule's rate); a
// configuration built separately for the scaled limit would misread them.
// At scale 1 it is base itself; ok is false when the class is closed at f
// (see ScaledSpec) or base is not one of this package's algorithms.
func ScaledDecider[S any](base Decider[S], s Spec, f float64) (d Decider[S], ok bool) {
	sc, ok := ScaledSpec(s, f)
	if !ok {
		return nil, false
	}
	if clampScale(f) >= 1 {
		return base, true
	}
	d, err := deriveDecider(base, sc)
	return d, err == nil
}

// deriveDecider returns the configuration for the scaled Spec sc that reads
// and writes base's states.
func deriveDecider[S any](base Decider[S], sc Spec) (Decider[S], error) {
	var d any
	var err error
	switch b := any(base).(type) {
	case *GCRA:
		d, err = b.WithLimit(sc.Limit())
	case *TokenBucket:
		d, err = b.WithLimit(sc.Limit())
	case *LeakyMeter:
		d, err = b.WithLimit(sc.Limit())
	case *LeakyQueue:
		d, err = b.WithLimit(sc.Limit())
	case *FixedWindow:
		d, err = NewFixedWindow(sc.Quota())
	case *SlidingLog:
		d, err = NewSlidingLog(sc.Quota())
	case *SlidingCounter:
		d, err = NewSlidingCounter(sc.Quota())
	default:
		return nil, fmt.Errorf("%w: %T is not an algorithm of package ratelimit", ErrInvalidLimit, base)
	}
	if err != nil {
		return nil, err
	}
	return d.(Decider[S]), nil
}

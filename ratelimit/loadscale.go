package ratelimit

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

package limit

import (
	"errors"
	"math"
	"strconv"
)

// Sample is one finished request, reported to an Algorithm.
type Sample struct {
	// Now is when the request finished, in seconds on a monotonic timeline.
	Now float64
	// RTT is how long the request took, in seconds. Now−RTT is when it
	// started. A sample with an RTT that is not a positive finite number is
	// ignored (Update returns the current limit unchanged).
	RTT float64
	// InFlight is the number of requests in flight when this one started
	// (or finished; the enforcer chooses and keeps to it). Algorithms that
	// skip growth while the limit is not used (Gradient2, Vegas) read it.
	InFlight int
	// Dropped marks a request that failed by overload: a timeout, a
	// rejection downstream, or an error the caller counts as overload. Every
	// adaptive algorithm here shrinks its limit on a dropped sample.
	Dropped bool
}

// Algorithm computes a concurrency limit from samples. It does not enforce
// the limit: an enforcer counts requests in flight and compares with Limit.
// Implementations are not safe for concurrent use; the enforcer serializes
// calls (one mutex around Update is enough).
type Algorithm interface {
	// Update feeds one sample and returns the new limit.
	Update(s Sample) int
	// Limit returns the current limit (at least 1).
	Limit() int
}

var (
	_ Algorithm = (*Fixed)(nil)
	_ Algorithm = (*AIMD)(nil)
	_ Algorithm = (*Gradient)(nil)
	_ Algorithm = (*Gradient2)(nil)
	_ Algorithm = (*Vegas)(nil)
)

// ErrConfig is the sentinel every configuration error wraps:
// errors.Is(err, limit.ErrConfig) tells a bad configuration from other errors.
var ErrConfig = errors.New("limit: invalid configuration")

// ConfigError reports a bad configuration field.
type ConfigError struct {
	Field  string // the field, e.g. "MaxLimit"
	Reason string // what is wrong with it
}

func (e *ConfigError) Error() string { return "limit: " + e.Field + ": " + e.Reason }

// Unwrap returns ErrConfig.
func (e *ConfigError) Unwrap() error { return ErrConfig }

func badConfig(field, reason string) error { return &ConfigError{Field: field, Reason: reason} }

func ftoa(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// checkPositive: finite and > 0.
func checkPositive(field string, v float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
		return badConfig(field, "must be a positive finite number, got "+ftoa(v))
	}
	return nil
}

// checkFraction: in (0, 1], or (0, 1) unless closedHi.
func checkFraction(field string, v float64, closedHi bool) error {
	ok := v > 0 && (v < 1 || (closedHi && v == 1))
	if !ok || math.IsNaN(v) {
		if closedHi {
			return badConfig(field, "must be in (0, 1], got "+ftoa(v))
		}
		return badConfig(field, "must be in (0, 1), got "+ftoa(v))
	}
	return nil
}

// checkBounds validates Min/Max/Initial limits after defaults.
func checkBounds(minL, maxL, initial int) error {
	if minL < 1 {
		return badConfig("MinLimit", "must be at least 1, got "+strconv.Itoa(minL))
	}
	if maxL < minL {
		return badConfig("MaxLimit", "must be at least MinLimit ("+strconv.Itoa(minL)+"), got "+strconv.Itoa(maxL))
	}
	if initial < minL || initial > maxL {
		return badConfig("InitialLimit", "must be within [MinLimit, MaxLimit], got "+strconv.Itoa(initial))
	}
	return nil
}

// validRTT reports whether s carries a usable RTT.
func validRTT(s Sample) bool {
	return s.RTT > 0 && !math.IsInf(s.RTT, 0) // NaN fails s.RTT > 0
}

// backOff is the limit after a dropped sample s: limit × backoff, at least
// min, but only once per round trip (the gate lets through one cut per
// round trip, as TCP does; otherwise the limit is unchanged).
func backOff(limit float64, s Sample, gate *backoffGate, backoff float64, min int) float64 {
	if !gate.allow(s) {
		return limit
	}
	return max(float64(min), limit*backoff)
}

// smoothTowards moves limit towards target by smoothing ÷ limit of the way,
// within [lo, hi]. The step is per round trip, not per sample: the
// roughly limit samples of one round trip together move it by about
// smoothing, where a per-sample step would swing from max to min within one
// round trip on a busy server. perSample takes the per-sample step instead,
// smoothing of the way (Netflix's formula: limit×(1−α) + target×α).
func smoothTowards(limit, target, smoothing float64, perSample bool, lo, hi int) float64 {
	a := smoothing
	if !perSample {
		a = smoothing / max(1, limit)
	}
	return clamp(float64(limit*(1-a))+float64(target*a), float64(lo), float64(hi))
}

// clamp bounds v to [lo, hi].
func clamp(v, lo, hi float64) float64 {
	if v < lo {
		return lo
	}
	if v > hi {
		return hi
	}
	return v
}

// Fixed is a constant limit: the baseline to compare adaptive algorithms
// with, and the right choice when a load test has measured the capacity and
// the hardware does not change.
type Fixed struct {
	n int
}

// NewFixed returns a Fixed limit of n; n must be at least 1.
func NewFixed(n int) (*Fixed, error) {
	if n < 1 {
		return nil, badConfig("n", "must be at least 1, got "+strconv.Itoa(n))
	}
	return &Fixed{n: n}, nil
}

// Update ignores the sample and returns the constant limit.
func (f *Fixed) Update(Sample) int { return f.n }

// Limit returns the constant limit.
func (f *Fixed) Limit() int { return f.n }

// backoffGate allows at most one multiplicative decrease per round trip: a
// sample whose request started before the last decrease (Now−RTT < last)
// reports congestion that decrease already answered, as TCP reduces its
// window once per loss event. Without it a burst of slow samples from
// requests admitted before the cut collapses the limit to the minimum.
type backoffGate struct {
	last  float64 // when the last decrease happened
	armed bool    // a decrease has happened
}

// allow reports whether s may trigger a decrease, and records it if so.
func (b *backoffGate) allow(s Sample) bool {
	if b.armed && s.Now-s.RTT < b.last {
		return false
	}
	b.last, b.armed = s.Now, true
	return true
}

package breaker

import (
	"errors"
	"fmt"
	"math"
)

// ErrConfig is the sentinel every configuration error wraps:
// errors.Is(err, breaker.ErrConfig) tells a bad configuration from other
// errors.
var ErrConfig = errors.New("breaker: invalid configuration")

// ConfigError reports a bad Config field. It wraps ErrConfig.
type ConfigError struct {
	Field  string // the Config field, e.g. "FailureRate"
	Reason string // what is wrong with it, with the value given
}

// Error returns "breaker: Config.Field: reason".
func (e *ConfigError) Error() string { return "breaker: Config." + e.Field + ": " + e.Reason }

// Unwrap returns ErrConfig.
func (e *ConfigError) Unwrap() error { return ErrConfig }

func badConfig(field, format string, args ...any) error {
	return &ConfigError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// WindowKind says what the breaker counts in CLOSED to decide to open.
type WindowKind uint8

// The window kinds.
const (
	// Consecutive counts consecutive failures; a success resets the count
	// and Config.Threshold failures in a row open the breaker. The default,
	// and the seed's breaker.
	Consecutive WindowKind = iota
	// CountWindow keeps the outcomes of the last Config.WindowCalls
	// reported calls and opens on their failure rate or slow-call rate.
	CountWindow
	// TimeWindow keeps the outcomes of the calls reported in the last
	// Config.WindowSeconds seconds, in buckets of Config.BucketSeconds, and
	// opens on their failure rate or slow-call rate. The buckets are
	// aligned to the caller's timeline, not to when the breaker closed:
	// bucket k holds the calls reported at now in [k × BucketSeconds,
	// (k+1) × BucketSeconds), and the window is the newest bucket and the
	// WindowSeconds/BucketSeconds − 1 before it. A call is counted in the
	// bucket of its report, whenever it started. (gobreaker's rolling
	// window starts its buckets when the breaker enters CLOSED.)
	TimeWindow
)

// String returns "consecutive", "count" or "time".
func (k WindowKind) String() string {
	switch k {
	case Consecutive:
		return "consecutive"
	case CountWindow:
		return "count"
	case TimeWindow:
		return "time"
	}
	return fmt.Sprintf("WindowKind(%d)", uint8(k))
}

// Defaults used for zero Config fields. The first three are the seed
// reference's breaker.
const (
	DefaultThreshold     = 3   // consecutive failures (Consecutive)
	DefaultRecovery      = 5   // seconds OPEN before a trial
	DefaultTrials        = 1   // trial calls per HALF_OPEN round
	DefaultWindowCalls   = 100 // calls (CountWindow)
	DefaultWindowSeconds = 60  // seconds (TimeWindow)
	DefaultBucketSeconds = 1   // seconds (TimeWindow)
	DefaultMinCalls      = 10  // calls in the window before a rate decides (at most WindowCalls)
	DefaultFailureRate   = 0.5 // share of failed calls that opens
	DefaultSlowCallRate  = 1.0 // share of slow calls that opens, when SlowCall is set
)

// Bounds on the memory a window may take, fixed at New.
const (
	// MaxWindowCalls bounds Config.WindowCalls: a count window keeps one
	// byte per call, so at most 1 MiB.
	MaxWindowCalls = 1 << 20
	// MaxBuckets bounds WindowSeconds/BucketSeconds: a time window keeps
	// 32 bytes per bucket, so at most 256 KiB.
	MaxBuckets = 1 << 13
)

// Config configures a Breaker. The zero value is the seed's breaker:
// 3 consecutive failures open it for 5 seconds, then one trial call. Every
// field added since keeps that behaviour at its zero value. Durations are
// float64 seconds.
type Config struct {
	// Window is what CLOSED counts: Consecutive (the zero value),
	// CountWindow or TimeWindow. The rate fields below (WindowCalls,
	// WindowSeconds, BucketSeconds, MinCalls, FailureRate, SlowCall,
	// SlowCallRate) apply to the two windows only and must stay zero with
	// Consecutive; Threshold applies to Consecutive only.
	Window WindowKind

	// Threshold is the number of consecutive failures that opens the
	// breaker (Consecutive only). Zero means DefaultThreshold; negative is
	// invalid.
	Threshold int
	// Recovery is how long the breaker stays OPEN before a trial, in
	// seconds, the first time it opens after being CLOSED; also how long a
	// trial may stay unreported before its slot is presumed lost. Zero
	// means DefaultRecovery; negative, NaN or infinite is invalid.
	Recovery float64
	// RecoveryMultiplier makes the open time grow: each time a HALF_OPEN
	// round fails and the breaker opens again, its open time is multiplied
	// by RecoveryMultiplier, up to MaxRecovery; when the breaker closes the
	// open time goes back to Recovery. Zero means 1 (a constant open time);
	// below 1, NaN or infinite is invalid.
	RecoveryMultiplier float64
	// MaxRecovery caps the growing open time, in seconds. It must be set,
	// and at least Recovery, when RecoveryMultiplier > 1; zero otherwise
	// means no cap (none is needed). Negative, NaN or infinite is invalid.
	MaxRecovery float64
	// Trials is the number of trial calls let through per HALF_OPEN round
	// (a cancelled trial gives its slot back). With Consecutive the first
	// trial to report decides. With a window, the breaker waits until all
	// Trials have reported, then closes if their failure rate is below
	// FailureRate (and their slow-call rate below SlowCallRate) and opens
	// again otherwise (resilience4j's permittedNumberOfCallsInHalfOpenState).
	// TrialsInARow changes both rules. Zero means DefaultTrials; negative is
	// invalid.
	Trials int
	// TrialsInARow makes every trial count: the breaker closes when Trials
	// trials of a round have succeeded, and the first trial to fail (or,
	// with SlowCall, to be slow) opens it again at once, without waiting
	// for the others. This is gobreaker's half-open rule (MaxRequests is
	// Trials) and failsafe-go's WithSuccessThreshold. With Trials 1 it is
	// the same as the default rule, whatever the window.
	TrialsInARow bool

	// WindowCalls is the number of most recent calls a CountWindow keeps.
	// Zero means DefaultWindowCalls; negative or above MaxWindowCalls is
	// invalid.
	WindowCalls int
	// WindowSeconds is the span a TimeWindow keeps, in seconds: calls
	// reported in the current bucket and the WindowSeconds/BucketSeconds − 1
	// buckets before it. Zero means DefaultWindowSeconds; it must be a
	// whole number (at most MaxBuckets) of buckets.
	WindowSeconds float64
	// BucketSeconds is the width of a TimeWindow's buckets: old calls leave
	// the window a bucket at a time. Buckets are aligned to multiples of
	// BucketSeconds on the caller's timeline (see TimeWindow), so the
	// window spans between WindowSeconds − BucketSeconds and WindowSeconds.
	// Zero means DefaultBucketSeconds; negative, NaN, infinite or wider
	// than WindowSeconds is invalid.
	BucketSeconds float64
	// MinCalls is how many calls the window must hold before a rate can
	// open the breaker. Zero means DefaultMinCalls, or WindowCalls if that
	// is smaller; negative, or above WindowCalls with a CountWindow (it
	// could never be reached), is invalid.
	MinCalls int
	// FailureRate opens the breaker when failed calls / calls in the window
	// reaches it (≥). In (0, 1]; zero means DefaultFailureRate.
	FailureRate float64
	// SlowCall is the duration, in seconds, from Allow to Done at or above
	// which a call is slow, whether it succeeded or failed. Zero means that
	// no call is slow; negative, NaN or infinite is invalid.
	SlowCall float64
	// SlowCallRate opens the breaker when slow calls / calls in the window
	// reaches it (≥). In (0, 1]; zero means DefaultSlowCallRate when
	// SlowCall is set; it must be zero when SlowCall is not.
	SlowCallRate float64

	// OnStateChange, if not nil, is called after every state change, outside
	// the breaker's lock, on the goroutine whose Allow or Done caused it. It
	// may call the breaker. Calls from different goroutines may run
	// concurrently and arrive out of order; order them by Generation.
	OnStateChange func(Transition)
}

// seconds validates a duration field: finite and not negative.
func seconds(field string, s float64) error {
	if math.IsNaN(s) || math.IsInf(s, 0) || s < 0 {
		return badConfig(field, "%v seconds, want a finite number >= 0", s)
	}
	return nil
}

// rate validates a rate field: 0 (the default) or in (0, 1].
func rate(field string, r float64) error {
	if !(r >= 0 && r <= 1) {
		return badConfig(field, "%v, want a share in (0, 1] (0 means the default)", r)
	}
	return nil
}

// Validate reports the first invalid field as a *ConfigError wrapping
// ErrConfig, or nil.
func (c Config) Validate() error {
	_, err := c.resolve()
	return err
}

// resolve validates c and returns it with the defaults filled in.
func (c Config) resolve() (Config, error) {
	if c.Window > TimeWindow {
		return c, badConfig("Window", "%v is unknown", c.Window)
	}
	windowed := c.Window != Consecutive
	switch {
	case c.Threshold < 0:
		return c, badConfig("Threshold", "%d, want >= 0 (0 means %d)", c.Threshold, DefaultThreshold)
	case windowed && c.Threshold != 0:
		return c, badConfig("Threshold", "%d is for Window Consecutive; with %v windows use FailureRate", c.Threshold, c.Window)
	case c.Trials < 0:
		return c, badConfig("Trials", "%d, want >= 0 (0 means %d)", c.Trials, DefaultTrials)
	}
	if err := seconds("Recovery", c.Recovery); err != nil {
		return c, err
	}
	if c.Threshold == 0 {
		c.Threshold = DefaultThreshold
	}
	if c.Recovery == 0 {
		c.Recovery = DefaultRecovery
	}
	if c.Trials == 0 {
		c.Trials = DefaultTrials
	}

	// Growing open time.
	m := c.RecoveryMultiplier
	if math.IsNaN(m) || math.IsInf(m, 0) || (m != 0 && m < 1) {
		return c, badConfig("RecoveryMultiplier", "%v, want a finite number >= 1 (0 means 1)", m)
	}
	if err := seconds("MaxRecovery", c.MaxRecovery); err != nil {
		return c, err
	}
	if m == 0 {
		c.RecoveryMultiplier = 1
	}
	switch {
	case c.RecoveryMultiplier > 1 && c.MaxRecovery == 0:
		return c, badConfig("MaxRecovery", "must be set when RecoveryMultiplier (%v) > 1, or the open time grows without bound", c.RecoveryMultiplier)
	case c.MaxRecovery != 0 && c.MaxRecovery < c.Recovery:
		return c, badConfig("MaxRecovery", "%v seconds, below Recovery (%v seconds)", c.MaxRecovery, c.Recovery)
	}

	// Rate windows.
	if !windowed {
		for _, f := range []struct {
			name string
			set  bool
		}{
			{"WindowCalls", c.WindowCalls != 0}, {"WindowSeconds", c.WindowSeconds != 0},
			{"BucketSeconds", c.BucketSeconds != 0}, {"MinCalls", c.MinCalls != 0},
			{"FailureRate", c.FailureRate != 0}, {"SlowCall", c.SlowCall != 0},
			{"SlowCallRate", c.SlowCallRate != 0},
		} {
			if f.set {
				return c, badConfig(f.name, "applies to Window CountWindow or TimeWindow only, not Consecutive")
			}
		}
		return c, nil
	}
	if c.Window != CountWindow && c.WindowCalls != 0 {
		return c, badConfig("WindowCalls", "applies to Window CountWindow only")
	}
	if c.Window != TimeWindow && (c.WindowSeconds != 0 || c.BucketSeconds != 0) {
		field := "WindowSeconds"
		if c.WindowSeconds == 0 {
			field = "BucketSeconds"
		}
		return c, badConfig(field, "applies to Window TimeWindow only")
	}
	if c.Window == CountWindow {
		if c.WindowCalls < 0 || c.WindowCalls > MaxWindowCalls {
			return c, badConfig("WindowCalls", "%d, want 0 to %d (0 means %d)", c.WindowCalls, MaxWindowCalls, DefaultWindowCalls)
		}
		if c.WindowCalls == 0 {
			c.WindowCalls = DefaultWindowCalls
		}
	} else {
		if err := seconds("WindowSeconds", c.WindowSeconds); err != nil {
			return c, err
		}
		if err := seconds("BucketSeconds", c.BucketSeconds); err != nil {
			return c, err
		}
		if c.WindowSeconds == 0 {
			c.WindowSeconds = DefaultWindowSeconds
		}
		if c.BucketSeconds == 0 {
			c.BucketSeconds = DefaultBucketSeconds
		}
		if _, err := c.buckets(); err != nil {
			return c, err
		}
	}
	switch {
	case c.MinCalls < 0:
		return c, badConfig("MinCalls", "%d, want >= 0 (0 means %d)", c.MinCalls, DefaultMinCalls)
	case c.Window == CountWindow && c.MinCalls > c.WindowCalls:
		return c, badConfig("MinCalls", "%d, above WindowCalls (%d): the window could never hold that many", c.MinCalls, c.WindowCalls)
	case c.MinCalls == 0:
		c.MinCalls = DefaultMinCalls
		if c.Window == CountWindow && c.WindowCalls < c.MinCalls {
			c.MinCalls = c.WindowCalls
		}
	}
	if err := rate("FailureRate", c.FailureRate); err != nil {
		return c, err
	}
	if c.FailureRate == 0 {
		c.FailureRate = DefaultFailureRate
	}
	if err := seconds("SlowCall", c.SlowCall); err != nil {
		return c, err
	}
	if err := rate("SlowCallRate", c.SlowCallRate); err != nil {
		return c, err
	}
	switch {
	case c.SlowCall == 0 && c.SlowCallRate != 0:
		return c, badConfig("SlowCallRate", "%v, but SlowCall is not set: no call is slow", c.SlowCallRate)
	case c.SlowCall != 0 && c.SlowCallRate == 0:
		c.SlowCallRate = DefaultSlowCallRate
	}
	return c, nil
}

// buckets returns the number of buckets of a TimeWindow whose fields are
// filled in.
func (c Config) buckets() (int, error) {
	if c.BucketSeconds > c.WindowSeconds {
		return 0, badConfig("BucketSeconds", "%v seconds, wider than WindowSeconds (%v seconds)", c.BucketSeconds, c.WindowSeconds)
	}
	n := c.WindowSeconds / c.BucketSeconds
	r := math.Round(n)
	switch {
	case math.Abs(n-r) > 1e-9*r:
		return 0, badConfig("BucketSeconds", "WindowSeconds (%v) is not a whole number of buckets of %v seconds", c.WindowSeconds, c.BucketSeconds)
	case r > MaxBuckets:
		return 0, badConfig("BucketSeconds", "WindowSeconds/BucketSeconds = %v buckets, more than %d", r, MaxBuckets)
	}
	return int(r), nil
}

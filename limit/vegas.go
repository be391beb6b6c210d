package limit

import "math"

// VegasConfig configures a Vegas limit. The zero value gives the defaults
// documented on each field.
//
// The five rules of the update (see Vegas.Update) can each be replaced by
// a function of the limit, as the builder of Netflix's VegasLimit allows
// (alphaFunction, betaFunction, thresholdFunction, increaseFunction,
// decreaseFunction). A function gets the current limit as a float64
// (Netflix passes (int) limit to the first three: floor it to match) and
// must be cheap, not allocate, and return a finite number. With a
// function set, the number it replaces (Alpha, Beta) must be zero.
type VegasConfig struct {
	// InitialLimit is the starting limit. 0 means 20.
	InitialLimit int
	// MinLimit is the lowest limit. 0 means 1.
	MinLimit int
	// MaxLimit is the highest limit. 0 means 1000.
	MaxLimit int
	// Alpha, Beta: the queue estimate is kept between Alpha×t and Beta×t
	// requests, with t = max(1, log10(limit)). 0 means 3 and 6. Alpha <
	// Beta.
	Alpha, Beta float64
	// AlphaFunc, BetaFunc, if not nil, give the bounds of the queue
	// estimate instead of Alpha×t and Beta×t (Netflix: alpha(3) is a
	// constant function; its default is 3 × ⌊log10⌋ of the limit, at least
	// 3). Queue estimates up to ThresholdFunc's (or t) grow the limit by
	// BetaFunc's (or Beta×t).
	AlphaFunc, BetaFunc func(limit float64) float64
	// ThresholdFunc, if not nil, gives the queue estimate at or below which
	// the limit grows aggressively, instead of t.
	ThresholdFunc func(limit float64) float64
	// IncreaseFunc, if not nil, gives the new limit when the queue estimate
	// is above the threshold and below alpha, instead of limit + t.
	IncreaseFunc func(limit float64) float64
	// DecreaseFunc, if not nil, gives the new limit when the queue estimate
	// is above beta, instead of limit − t. Dropped samples still use
	// Backoff (Netflix's VegasLimit applies its decrease function to drops
	// too, smoothed and on every drop).
	DecreaseFunc func(limit float64) float64
	// Smoothing α in (0, 1] towards the new limit, per round trip (α ÷ limit
	// per sample; see SmoothPerSample). 0 means 1.
	Smoothing float64
	// SmoothPerSample applies Smoothing to every sample, as Netflix's
	// VegasLimit does, instead of spreading it over a round trip (see
	// GradientConfig.SmoothPerSample). With it and the default Smoothing of
	// 1, each sample sets the limit to the new limit.
	SmoothPerSample bool
	// Backoff is the multiplicative decrease on a dropped sample, in (0, 1),
	// at most once per round trip (TCP Vegas falls back to Reno's decrease on
	// a loss). 0 means 0.9.
	Backoff float64
	// Probe configures the no-load RTT measurement and the quantile that
	// RTT_noload and RTT_actual are (Probe.Quantile < 0: the minimum and
	// each sample's RTT).
	Probe ProbeConfig
}

func (cfg *VegasConfig) defaults() {
	if cfg.InitialLimit == 0 {
		cfg.InitialLimit = 20
	}
	if cfg.MinLimit == 0 {
		cfg.MinLimit = 1
	}
	if cfg.MaxLimit == 0 {
		cfg.MaxLimit = 1000
	}
	if cfg.Alpha == 0 && cfg.AlphaFunc == nil {
		cfg.Alpha = 3
	}
	if cfg.Beta == 0 && cfg.BetaFunc == nil {
		cfg.Beta = 6
	}
	if cfg.Smoothing == 0 {
		cfg.Smoothing = 1
	}
	if cfg.Backoff == 0 {
		cfg.Backoff = 0.9
	}
	cfg.Probe.defaults()
}

func (cfg VegasConfig) validate() error {
	if err := checkBounds(cfg.MinLimit, cfg.MaxLimit, cfg.InitialLimit); err != nil {
		return err
	}
	if err := cfg.validateBounds(); err != nil {
		return err
	}
	if err := checkFraction("Smoothing", cfg.Smoothing, true); err != nil {
		return err
	}
	if err := checkFraction("Backoff", cfg.Backoff, false); err != nil {
		return err
	}
	return cfg.Probe.validate()
}

// validateBounds checks Alpha and Beta against AlphaFunc and BetaFunc.
func (cfg VegasConfig) validateBounds() error {
	switch {
	case cfg.AlphaFunc != nil && cfg.Alpha != 0:
		return badConfig("Alpha", "must be 0 when AlphaFunc is set, got "+ftoa(cfg.Alpha))
	case cfg.BetaFunc != nil && cfg.Beta != 0:
		return badConfig("Beta", "must be 0 when BetaFunc is set, got "+ftoa(cfg.Beta))
	}
	if cfg.AlphaFunc == nil {
		if err := checkPositive("Alpha", cfg.Alpha); err != nil {
			return err
		}
	}
	if cfg.BetaFunc == nil {
		if err := checkPositive("Beta", cfg.Beta); err != nil {
			return err
		}
	}
	if cfg.AlphaFunc == nil && cfg.BetaFunc == nil && cfg.Beta <= cfg.Alpha {
		return badConfig("Beta", "must be greater than Alpha ("+ftoa(cfg.Alpha)+"), got "+ftoa(cfg.Beta))
	}
	return nil
}

// Vegas is a TCP Vegas-style limit (Brakmo and Peterson, 1995; the shape of
// Netflix concurrency-limits' VegasLimit). It holds 2 KiB of recent RTTs.
// Not safe for concurrent use.
//
// Configured with SmoothPerSample, the minimum RTT (Probe.Quantile < 0),
// probing off and Netflix's functions, it computes Netflix's sequence for
// samples that are not dropped and do not lower the smallest RTT seen
// (Netflix's only records a new minimum; ours counts it as no queue); the
// differences otherwise are listed in docs/PEERS.md (drops, probing, the
// quantile RTTs, smoothing per round trip, t as a real logarithm).
type Vegas struct {
	cfg   VegasConfig // immutable after NewVegas
	limit float64
	tAt   float64 // the limit log10 was last taken of; 0: never
	t     float64 // max(1, log10(tAt))
	// boundFuncs: ThresholdFunc, AlphaFunc or BetaFunc is set (one test on
	// the common path instead of three)
	boundFuncs bool
	nl         noLoad
	gate       backoffGate
}

// NewVegas returns a Vegas limit, or an error naming the bad field.
func NewVegas(cfg VegasConfig) (*Vegas, error) {
	cfg.defaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	v := &Vegas{cfg: cfg, limit: float64(cfg.InitialLimit),
		boundFuncs: cfg.ThresholdFunc != nil || cfg.AlphaFunc != nil || cfg.BetaFunc != nil}
	v.nl.init(cfg.Probe)
	return v, nil
}

// Update feeds one sample. A dropped sample multiplies the limit by Backoff.
// The first sample not dropped only measures the no-load RTT (it would
// compare its RTT with itself), as in Netflix's VegasLimit. Otherwise the
// sample joins the current RTT window and, with
// queue = ⌈limit × (1 − RTT_noload ÷ RTT_actual)⌉ (whole requests, as
// Netflix's; RTT_actual: the Probe.Quantile of the last full window, see
// ProbeConfig, or the sample's own RTT when Probe.Quantile < 0) and
// t = max(1, log10(limit)) (the logarithm retaken when the limit has moved
// by more than 1%): queue ≤ t gives limit + Beta×t; queue < Alpha×t gives
// limit + t; queue > Beta×t gives limit − t; otherwise no change (each
// rule replaced by its function when set, see VegasConfig). Growth is
// skipped while fewer than half the limit are in flight (the limit is not
// being tested).
func (v *Vegas) Update(s Sample) int {
	if !validRTT(s) {
		return v.Limit()
	}
	first := v.nl.rtt == 0 && !s.Dropped
	probing := v.nl.observe(s.Now, s.RTT, v.limit, s.Dropped)
	if s.Dropped {
		v.limit = backOff(v.limit, s, &v.gate, v.cfg.Backoff, v.cfg.MinLimit)
		return v.Limit()
	}
	l := v.limit
	if first || probing || float64(2*s.InFlight) < l {
		return v.Limit()
	}
	queue := math.Ceil(l * (1 - v.nl.ratio(s.RTT)))
	t := v.threshold(l)
	thr, alpha, beta := t, v.cfg.Alpha*t, v.cfg.Beta*t
	if v.boundFuncs {
		thr, alpha, beta = v.bounds(l, thr, alpha, beta)
	}
	var newLimit float64
	switch {
	case queue <= thr:
		newLimit = l + beta
	case queue < alpha:
		newLimit = l + t
		if v.cfg.IncreaseFunc != nil {
			newLimit = v.cfg.IncreaseFunc(l)
		}
	case queue > beta:
		newLimit = l - t
		if v.cfg.DecreaseFunc != nil {
			newLimit = v.cfg.DecreaseFunc(l)
		}
	default:
		return v.Limit() // between alpha and beta: no change
	}
	// bounded first, then smoothed (as Netflix's): the limit approaches
	// MaxLimit smoothly instead of overshooting into it
	newLimit = clamp(newLimit, float64(v.cfg.MinLimit), float64(v.cfg.MaxLimit))
	v.limit = smoothTowards(l, newLimit, v.cfg.Smoothing, v.cfg.SmoothPerSample, v.cfg.MinLimit, v.cfg.MaxLimit)
	return v.Limit()
}

// bounds returns the threshold, alpha and beta at limit l with the
// functions that are set replacing the defaults thr, alpha and beta.
func (v *Vegas) bounds(l, thr, alpha, beta float64) (float64, float64, float64) {
	if v.cfg.ThresholdFunc != nil {
		thr = v.cfg.ThresholdFunc(l)
	}
	if v.cfg.AlphaFunc != nil {
		alpha = v.cfg.AlphaFunc(l)
	}
	if v.cfg.BetaFunc != nil {
		beta = v.cfg.BetaFunc(l)
	}
	return thr, alpha, beta
}

// threshold returns t = max(1, log10(l)): 1 up to a limit of 10; above,
// the logarithm (a dozen nanoseconds, more than the rest of Update) is
// retaken only when l has moved by more than a factor 1.01 either way since
// it was last taken, so t is within log10(1.01) < 0.005 of log10(l).
func (v *Vegas) threshold(l float64) float64 {
	if l <= 10 {
		return 1
	}
	if !(1.01*l >= v.tAt && l <= 1.01*v.tAt) {
		v.tAt, v.t = l, max(1, math.Log10(l))
	}
	return v.t
}

// Limit returns the current limit (floor of the internal value; Probe.Ratio
// of it while a no-load probe runs).
func (v *Vegas) Limit() int { return v.nl.cap(v.limit, v.cfg.MinLimit) }

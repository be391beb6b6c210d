package limit

import "math"

// VegasConfig configures a Vegas limit. The zero value gives the defaults
// documented on each field.
type VegasConfig struct {
	// InitialLimit is the starting limit. 0 means 20.
	InitialLimit int
	// MinLimit is the lowest limit. 0 means 1.
	MinLimit int
	// MaxLimit is the highest limit. 0 means 1000.
	MaxLimit int
	// Alpha, Beta: the queue estimate is kept between Alpha×log10(limit) and
	// Beta×log10(limit). 0 means 3 and 6. Alpha < Beta.
	Alpha, Beta float64
	// Smoothing α in (0, 1] towards the new limit, per round trip (α ÷ limit
	// per sample). 0 means 1.
	Smoothing float64
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
	if cfg.Alpha == 0 {
		cfg.Alpha = 3
	}
	if cfg.Beta == 0 {
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
	if err := checkPositive("Alpha", cfg.Alpha); err != nil {
		return err
	}
	if err := checkPositive("Beta", cfg.Beta); err != nil {
		return err
	}
	if cfg.Beta <= cfg.Alpha {
		return badConfig("Beta", "must be greater than Alpha ("+ftoa(cfg.Alpha)+"), got "+ftoa(cfg.Beta))
	}
	if err := checkFraction("Smoothing", cfg.Smoothing, true); err != nil {
		return err
	}
	if err := checkFraction("Backoff", cfg.Backoff, false); err != nil {
		return err
	}
	return cfg.Probe.validate()
}

// Vegas is a TCP Vegas-style limit (Brakmo and Peterson, 1995; the shape of
// Netflix concurrency-limits' VegasLimit). It holds 2 KiB of recent RTTs.
// Not safe for concurrent use.
type Vegas struct {
	cfg   VegasConfig // immutable after NewVegas
	limit float64
	tAt   float64 // the limit log10 was last taken of; 0: never
	t     float64 // max(1, log10(tAt))
	nl    noLoad
	gate  backoffGate
}

// NewVegas returns a Vegas limit, or an error naming the bad field.
func NewVegas(cfg VegasConfig) (*Vegas, error) {
	cfg.defaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	v := &Vegas{cfg: cfg, limit: float64(cfg.InitialLimit)}
	v.nl.init(cfg.Probe)
	return v, nil
}

// Update feeds one sample. A dropped sample multiplies the limit by Backoff.
// Otherwise the sample joins the current RTT window and, with
// queue = limit × (1 − RTT_noload ÷ RTT_actual) (RTT_actual: the
// Probe.Quantile of the last full window, see ProbeConfig, or the sample's
// own RTT when Probe.Quantile < 0) and t = max(1, log10(limit)) (the
// logarithm retaken when the limit has moved by more than 1%): queue ≤ t
// gives limit + Beta×t; queue < Alpha×t gives limit + t; queue > Beta×t gives
// limit − t; otherwise no change. Growth is skipped while fewer than half the
// limit are in flight (the limit is not being tested).
func (v *Vegas) Update(s Sample) int {
	if !validRTT(s) {
		return v.Limit()
	}
	probing := v.nl.observe(s.Now, s.RTT, v.limit, s.Dropped)
	if s.Dropped {
		v.limit = backOff(v.limit, s, &v.gate, v.cfg.Backoff, v.cfg.MinLimit)
		return v.Limit()
	}
	if probing {
		return v.Limit()
	}
	l := v.limit
	if 2*s.InFlight < int(l) {
		return v.Limit()
	}
	t := v.threshold(l)
	queue := l * (1 - v.nl.ratio(s.RTT))
	newLimit := l
	switch {
	case queue <= t:
		newLimit = l + float64(v.cfg.Beta*t)
	case queue < v.cfg.Alpha*t:
		newLimit = l + t
	case queue > v.cfg.Beta*t:
		newLimit = l - t
	}
	v.limit = smoothTowards(l, newLimit, v.cfg.Smoothing, v.cfg.MinLimit, v.cfg.MaxLimit)
	return v.Limit()
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

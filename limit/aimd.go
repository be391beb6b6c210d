package limit

import "math"

// AIMDConfig configures an AIMD limit. The zero value gives the defaults
// documented on each field (seed 000's sketch).
type AIMDConfig struct {
	// InitialLimit is the starting limit. 0 means 20.
	InitialLimit int
	// MinLimit is the lowest limit. 0 means 1.
	MinLimit int
	// MaxLimit is the highest limit. 0 means 1000.
	MaxLimit int
	// Baseline is the healthy RTT in seconds. 0 means 0.040 (40 ms).
	// Ignored when LearnBaseline is set.
	Baseline float64
	// LearnBaseline replaces the fixed Baseline by the measured no-load RTT
	// (see ProbeConfig), so the limit follows a slower new normal, and
	// compares it with the current RTT_actual, the same quantile of about
	// the last round trip's RTTs, instead of each sample's RTT, so latency
	// noise is not taken for overload. The RTTs take 2 KiB.
	LearnBaseline bool
	// Probe configures the no-load RTT measurement used with LearnBaseline
	// (Probe.Quantile < 0: the minimum RTT as the baseline and each
	// sample's RTT compared with it).
	Probe ProbeConfig
	// Tolerance: a sample slower than Tolerance × baseline (with
	// LearnBaseline: an RTT_actual above Tolerance × RTT_noload) counts as
	// overload. 0 means 2. Must be > 1. With LearnBaseline and noisy
	// latency keep it ≥ 1.2: the quantiles, estimated from about one round
	// trip of samples, wander by a few percent.
	Tolerance float64
	// Backoff is the multiplicative decrease, in (0, 1). 0 means 0.9.
	Backoff float64
}

func (cfg *AIMDConfig) defaults() {
	if cfg.InitialLimit == 0 {
		cfg.InitialLimit = 20
	}
	if cfg.MinLimit == 0 {
		cfg.MinLimit = 1
	}
	if cfg.MaxLimit == 0 {
		cfg.MaxLimit = 1000
	}
	if cfg.Baseline == 0 {
		cfg.Baseline = 0.040
	}
	if cfg.Tolerance == 0 {
		cfg.Tolerance = 2
	}
	if cfg.Backoff == 0 {
		cfg.Backoff = 0.9
	}
	cfg.Probe.defaults()
}

func (cfg AIMDConfig) validate() error {
	if err := checkBounds(cfg.MinLimit, cfg.MaxLimit, cfg.InitialLimit); err != nil {
		return err
	}
	if err := checkPositive("Baseline", cfg.Baseline); err != nil {
		return err
	}
	if !(cfg.Tolerance > 1) || math.IsInf(cfg.Tolerance, 0) {
		return badConfig("Tolerance", "must be a finite number > 1, got "+ftoa(cfg.Tolerance))
	}
	if err := checkFraction("Backoff", cfg.Backoff, false); err != nil {
		return err
	}
	if cfg.LearnBaseline {
		return cfg.Probe.validate()
	}
	return nil
}

// AIMD is additive increase, multiplicative decrease (seed 000), as TCP
// Reno does for its window. Not safe for concurrent use.
type AIMD struct {
	cfg   AIMDConfig // immutable after NewAIMD
	limit float64
	probe noLoad // used when cfg.LearnBaseline
	gate  backoffGate
}

// NewAIMD returns an AIMD limit, or an error naming the bad field.
func NewAIMD(cfg AIMDConfig) (*AIMD, error) {
	cfg.defaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	a := &AIMD{cfg: cfg, limit: float64(cfg.InitialLimit)}
	if cfg.LearnBaseline {
		a.probe.init(cfg.Probe)
	}
	return a, nil
}

// Update feeds one sample: on a drop or an RTT above Tolerance × baseline
// (with LearnBaseline: RTT_actual above Tolerance × RTT_noload; see
// ProbeConfig), at most once per round trip,
// limit = max(MinLimit, floor(limit × Backoff)); otherwise
// limit = min(MaxLimit, limit + 1/limit).
func (a *AIMD) Update(s Sample) int {
	if !validRTT(s) {
		return a.Limit()
	}
	baseline, rtt := a.cfg.Baseline, s.RTT
	if a.cfg.LearnBaseline {
		if a.probe.observe(s.Now, s.RTT, a.limit, s.Dropped) && !s.Dropped {
			return a.Limit() // probing: hold the limit, only learn the RTT
		}
		baseline, rtt = a.probe.rtt, a.probe.current(s.RTT)
	}
	if s.Dropped || rtt > a.cfg.Tolerance*baseline {
		if a.gate.allow(s) {
			a.limit = max(float64(a.cfg.MinLimit), math.Floor(a.limit*a.cfg.Backoff))
		}
	} else {
		a.limit = min(float64(a.cfg.MaxLimit), a.limit+1/a.limit)
	}
	return a.Limit()
}

// Limit returns the current limit, floor of the internal value (lowered
// while a no-load probe runs, see ProbeConfig).
func (a *AIMD) Limit() int {
	return a.probe.cap(a.limit, a.cfg.MinLimit)
}

package limit

import "math"

// GradientConfig configures a Gradient limit. The zero value gives the
// defaults documented on each field.
type GradientConfig struct {
	// InitialLimit is the starting limit. 0 means 20.
	InitialLimit int
	// MinLimit is the lowest limit. 0 means 1.
	MinLimit int
	// MaxLimit is the highest limit. 0 means 1000.
	MaxLimit int
	// MinGradient is the lower clamp of the gradient, in (0, 1]. 0 means
	// 0.5: one very slow round trip halves the target at most.
	MinGradient float64
	// Tolerance is how far RTT_actual may exceed RTT_noload before the
	// limit shrinks: gradient = clamp(Tolerance × RTT_noload ÷ RTT_actual,
	// MinGradient, 1), Netflix GradientLimit's rttTolerance. 0 means 1, and
	// it must be a finite number ≥ 1. Netflix's default is 2 because it
	// compares each RTT with the minimum, which noise alone sets apart;
	// here both are the same quantile, so 1 already means "no queue". With
	// T the limit settles where the RTT is about T × the no-load RTT (T × the
	// true concurrency, plus √limit), if the load can push it there: like
	// any limit the load does not fill (there is no in-flight gate), it
	// otherwise grows to MaxLimit.
	Tolerance float64
	// Smoothing α in (0, 1]: limit = limit×(1−α) + newLimit×α, per round
	// trip (α ÷ limit per sample; see SmoothPerSample). 0 means 0.2.
	Smoothing float64
	// SmoothPerSample applies Smoothing to every sample, as Netflix's
	// classes do, instead of spreading it over a round trip. With one
	// sample per request the limit then swings from its maximum to its
	// minimum within a round trip on a busy server; it is for samples that
	// each summarise a window, and for reproducing Netflix's sequences.
	SmoothPerSample bool
	// QueueSize returns the queue allowance for a limit. nil means √limit
	// (seed 004). It must be cheap, not allocate, and return a finite
	// number ≥ 0.
	QueueSize func(limit float64) float64
	// Backoff is the multiplicative decrease on a dropped sample, in (0, 1).
	// 0 means 0.9.
	Backoff float64
	// Probe configures the no-load RTT measurement and the quantile that
	// RTT_noload and RTT_actual are (Probe.Quantile < 0: the minimum and
	// each sample's RTT, as seed 004).
	Probe ProbeConfig
}

func (cfg *GradientConfig) defaults() {
	if cfg.InitialLimit == 0 {
		cfg.InitialLimit = 20
	}
	if cfg.MinLimit == 0 {
		cfg.MinLimit = 1
	}
	if cfg.MaxLimit == 0 {
		cfg.MaxLimit = 1000
	}
	if cfg.MinGradient == 0 {
		cfg.MinGradient = 0.5
	}
	if cfg.Tolerance == 0 {
		cfg.Tolerance = 1
	}
	if cfg.Smoothing == 0 {
		cfg.Smoothing = 0.2
	}
	if cfg.Backoff == 0 {
		cfg.Backoff = 0.9
	}
	cfg.Probe.defaults()
}

func (cfg GradientConfig) validate() error {
	if err := checkBounds(cfg.MinLimit, cfg.MaxLimit, cfg.InitialLimit); err != nil {
		return err
	}
	if err := checkFraction("MinGradient", cfg.MinGradient, true); err != nil {
		return err
	}
	if !(cfg.Tolerance >= 1) || math.IsInf(cfg.Tolerance, 0) {
		return badConfig("Tolerance", "must be a finite number ≥ 1, got "+ftoa(cfg.Tolerance))
	}
	if err := checkFraction("Smoothing", cfg.Smoothing, true); err != nil {
		return err
	}
	if err := checkFraction("Backoff", cfg.Backoff, false); err != nil {
		return err
	}
	return cfg.Probe.validate()
}

// Gradient is seed 004's gradient limit (Netflix, "Performance Under Load",
// 2018): gradient = RTT_noload ÷ RTT_actual, newLimit = limit × gradient +
// queueSize(limit), where RTT_noload and RTT_actual are the same low
// quantile of unloaded RTTs and of the last round trip's RTTs (see
// ProbeConfig), so latency noise does not shrink the limit. It holds about
// 2 KiB of recent RTTs. Not safe for concurrent use.
//
// It follows seed 004's formula, not Netflix concurrency-limits'
// GradientLimit, which (docs/PEERS.md lists it all) multiplies the ratio
// by a tolerance (2 by default; here Tolerance, 1 by default), smooths
// only decreases (growth is taken at once; here both directions, per round
// trip), skips growth while fewer than half the limit are in flight (here
// no such gate), probes by resetting the limit to its queue allowance and
// forgetting the minimum RTT every 1,000–2,000 samples (here a probe keeps
// Probe.Ratio of the limit for a few round trips and the limit returns),
// compares each sample's RTT with the smallest seen (here the same low
// quantile of both), and floors its queue allowance at 4.
type Gradient struct {
	cfg   GradientConfig // immutable after NewGradient
	limit float64
	nl    noLoad
	gate  backoffGate
}

// NewGradient returns a Gradient limit, or an error naming the bad field.
func NewGradient(cfg GradientConfig) (*Gradient, error) {
	cfg.defaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	g := &Gradient{cfg: cfg, limit: float64(cfg.InitialLimit)}
	g.nl.init(cfg.Probe)
	return g, nil
}

// Update feeds one sample. A dropped sample multiplies the limit by
// Backoff. Otherwise the sample joins the current RTT window,
// gradient = clamp(Tolerance × RTT_noload ÷ RTT_actual, MinGradient, 1)
// with RTT_actual
// the Probe.Quantile of the last full window (see ProbeConfig; the
// sample's own RTT when Probe.Quantile < 0),
// newLimit = limit × gradient + QueueSize(limit) and the limit moves by
// Smoothing towards newLimit, within [MinLimit, MaxLimit]. During a no-load
// probe only drops change the limit.
func (g *Gradient) Update(s Sample) int {
	if !validRTT(s) {
		return g.Limit()
	}
	probing := g.nl.observe(s.Now, s.RTT, g.limit, s.Dropped)
	switch {
	case s.Dropped:
		g.limit = backOff(g.limit, s, &g.gate, g.cfg.Backoff, g.cfg.MinLimit)
	case probing:
	default:
		grad := clamp(g.cfg.Tolerance*g.nl.ratio(s.RTT), g.cfg.MinGradient, 1)
		newLimit := float64(g.limit*grad) + g.queueSize(g.limit)
		g.limit = smoothTowards(g.limit, newLimit, g.cfg.Smoothing, g.cfg.SmoothPerSample, g.cfg.MinLimit, g.cfg.MaxLimit)
	}
	return g.Limit()
}

// queueSize is cfg.QueueSize(l), √l when it is nil (called directly: a
// call through a function value costs more than the square root).
func (g *Gradient) queueSize(l float64) float64 {
	if g.cfg.QueueSize == nil {
		return math.Sqrt(l)
	}
	return g.cfg.QueueSize(l)
}

// Limit returns the current limit (floor of the internal value; Probe.Ratio
// of it while a no-load probe runs).
func (g *Gradient) Limit() int { return g.nl.cap(g.limit, g.cfg.MinLimit) }

// NoLoadRTT returns the current no-load RTT estimate in seconds (0 before the
// first sample).
func (g *Gradient) NoLoadRTT() float64 { return g.nl.rtt }

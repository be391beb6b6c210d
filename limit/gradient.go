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
	// MinGradient is the lower clamp of RTT_noload ÷ RTT_actual, in (0, 1].
	// 0 means 0.5: one very slow round trip halves the target at most.
	MinGradient float64
	// Smoothing α in (0, 1]: limit = limit×(1−α) + newLimit×α. 0 means 0.2.
	Smoothing float64
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
// gradient = clamp(RTT_noload ÷ RTT_actual, MinGradient, 1) with RTT_actual
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
		grad := clamp(g.nl.ratio(s.RTT), g.cfg.MinGradient, 1)
		newLimit := float64(g.limit*grad) + g.queueSize(g.limit)
		g.limit = smoothTowards(g.limit, newLimit, g.cfg.Smoothing, g.cfg.MinLimit, g.cfg.MaxLimit)
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

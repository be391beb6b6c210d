package limit

import "math"

// Gradient2Config configures a Gradient2 limit. The zero value gives the
// defaults documented on each field.
type Gradient2Config struct {
	// InitialLimit is the starting limit. 0 means 20.
	InitialLimit int
	// MinLimit is the lowest limit. 0 means 1.
	MinLimit int
	// MaxLimit is the highest limit. 0 means 1000.
	MaxLimit int
	// Tolerance: the short-term RTT may exceed the long-term one by this
	// factor before the limit shrinks. 0 means 1.5. Must be ≥ 1.
	Tolerance float64
	// LongWindow is the long-term RTT average's window, in samples: the
	// average of the first 10 samples, then an exponential moving average
	// of weight 2 ÷ (LongWindow + 1) per sample (Netflix's ExpAvgMeasurement
	// with a warm-up of 10). 0 means 600.
	LongWindow int
	// Smoothing α in (0, 1]: limit = limit×(1−α) + newLimit×α, per round
	// trip (α ÷ limit per sample; see SmoothPerSample). 0 means 0.2.
	Smoothing float64
	// SmoothPerSample applies Smoothing to every sample, as Netflix's
	// Gradient2Limit does, instead of spreading it over a round trip (see
	// GradientConfig.SmoothPerSample).
	SmoothPerSample bool
	// QueueSize returns the queue allowance for a limit. nil means 4
	// (Netflix's default). It must be cheap, not allocate, and return a
	// finite number ≥ 0.
	QueueSize func(limit float64) float64
	// Backoff is the multiplicative decrease on a dropped sample, in (0, 1).
	// 0 means 0.9.
	Backoff float64
	// MaxDrift caps the long-term RTT at MaxDrift × the no-load RTT (see
	// Probe). Without the cap the long-term average follows the queue the
	// limit itself builds, and the limit creeps up forever under steady
	// overload. 0 means 1.2. Must be ≥ 1.
	MaxDrift float64
	// Probe configures the no-load RTT measurement behind MaxDrift.
	Probe ProbeConfig
}

func (cfg *Gradient2Config) defaults() {
	if cfg.InitialLimit == 0 {
		cfg.InitialLimit = 20
	}
	if cfg.MinLimit == 0 {
		cfg.MinLimit = 1
	}
	if cfg.MaxLimit == 0 {
		cfg.MaxLimit = 1000
	}
	if cfg.Tolerance == 0 {
		cfg.Tolerance = 1.5
	}
	if cfg.LongWindow == 0 {
		cfg.LongWindow = 600
	}
	if cfg.Smoothing == 0 {
		cfg.Smoothing = 0.2
	}
	if cfg.Backoff == 0 {
		cfg.Backoff = 0.9
	}
	if cfg.MaxDrift == 0 {
		cfg.MaxDrift = 1.2
	}
	cfg.Probe.defaults()
}

func (cfg Gradient2Config) validate() error {
	if err := checkBounds(cfg.MinLimit, cfg.MaxLimit, cfg.InitialLimit); err != nil {
		return err
	}
	if !(cfg.Tolerance >= 1) || math.IsInf(cfg.Tolerance, 0) {
		return badConfig("Tolerance", "must be a finite number ≥ 1, got "+ftoa(cfg.Tolerance))
	}
	if cfg.LongWindow < 1 {
		return badConfig("LongWindow", "must be at least 1 sample")
	}
	if err := checkFraction("Smoothing", cfg.Smoothing, true); err != nil {
		return err
	}
	if err := checkFraction("Backoff", cfg.Backoff, false); err != nil {
		return err
	}
	if !(cfg.MaxDrift >= 1) || math.IsInf(cfg.MaxDrift, 0) {
		return badConfig("MaxDrift", "must be a finite number ≥ 1, got "+ftoa(cfg.MaxDrift))
	}
	return cfg.Probe.validate()
}

// Gradient2 compares the short-term RTT (the sample) with a long-term RTT
// average, after the idea of Netflix concurrency-limits' Gradient2Limit
// (Netflix, 2018; our own code). Not safe for concurrent use.
//
// With SmoothPerSample, a MaxDrift too large to bind, probing off and no
// dropped samples it computes Netflix's sequence; the differences
// otherwise are listed in docs/PEERS.md (drops shrink the limit, MaxDrift,
// smoothing per round trip by default, and the defaults of MinLimit and
// MaxLimit: 1 and 1000 here, 20 and 200 there).
type Gradient2 struct {
	cfg     Gradient2Config // immutable after NewGradient2
	limit   float64
	longRTT float64 // the long-term average; 0 before the first sample
	sum     float64 // warm-up: the sum of the first n samples
	n       int     // samples averaged so far, up to longWarmup
	alpha   float64 // EWMA weight after the warm-up: 2 ÷ (LongWindow + 1)
	gate    backoffGate
	nl      noLoad
}

// longWarmup is the number of samples whose plain average starts the
// long-term RTT, as Netflix's Gradient2Limit does (ExpAvgMeasurement(600,
// 10)): an EWMA started from one sample would weigh it for hundreds more.
const longWarmup = 10

// NewGradient2 returns a Gradient2 limit, or an error naming the bad field.
func NewGradient2(cfg Gradient2Config) (*Gradient2, error) {
	cfg.defaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	g := &Gradient2{cfg: cfg, limit: float64(cfg.InitialLimit), alpha: 2 / float64(cfg.LongWindow+1)}
	g.nl.init(cfg.Probe)
	return g, nil
}

// Update feeds one sample. A dropped sample multiplies the limit by Backoff
// (Netflix's Gradient2Limit ignores drops and climbs under steady
// timeouts). Otherwise the long-term RTT is updated (see LongWindow; when
// it is over twice the sample it decays by 5% a sample so that a recovery
// is followed quickly) and capped at MaxDrift × the no-load RTT; growth is
// skipped while fewer than half the limit are in flight; gradient =
// clamp(Tolerance × long ÷ RTT, 0.5, 1), newLimit = limit × gradient +
// QueueSize(limit), and the limit moves by Smoothing towards newLimit,
// within [MinLimit, MaxLimit].
func (g *Gradient2) Update(s Sample) int {
	if !validRTT(s) {
		return g.Limit()
	}
	probing := g.nl.observe(s.Now, s.RTT, g.limit, s.Dropped)
	if s.Dropped {
		g.limit = backOff(g.limit, s, &g.gate, g.cfg.Backoff, g.cfg.MinLimit)
		return g.Limit()
	}
	g.addLong(s.RTT)
	if probing || float64(2*s.InFlight) < g.limit {
		return g.Limit()
	}
	grad := clamp(g.cfg.Tolerance*g.longRTT/s.RTT, 0.5, 1)
	newLimit := float64(g.limit*grad) + g.queueSize(g.limit)
	g.limit = smoothTowards(g.limit, newLimit, g.cfg.Smoothing, g.cfg.SmoothPerSample, g.cfg.MinLimit, g.cfg.MaxLimit)
	return g.Limit()
}

// addLong adds rtt to the long-term RTT: the plain average of the first
// longWarmup samples, then an EWMA of weight alpha; decayed by 5% while it
// is over twice rtt; capped at MaxDrift × the no-load RTT.
func (g *Gradient2) addLong(rtt float64) {
	if g.n < longWarmup {
		g.n++
		g.sum += rtt
		g.longRTT = g.sum / float64(g.n)
	} else {
		g.longRTT = float64(g.longRTT*(1-g.alpha)) + float64(rtt*g.alpha)
	}
	if g.longRTT > 2*rtt {
		g.longRTT *= 0.95
	}
	g.longRTT = min(g.longRTT, g.cfg.MaxDrift*g.nl.rtt)
}

// queueSize is cfg.QueueSize(l), 4 when it is nil.
func (g *Gradient2) queueSize(l float64) float64 {
	if g.cfg.QueueSize == nil {
		return 4
	}
	return g.cfg.QueueSize(l)
}

// Limit returns the current limit (floor of the internal value).
func (g *Gradient2) Limit() int { return g.nl.cap(g.limit, g.cfg.MinLimit) }

package limit

import "math"

// ProbeConfig configures how Gradient, Vegas and AIMD (LearnBaseline)
// measure the no-load RTT.
//
// Between probes the no-load RTT is the smallest RTT seen, so a faster
// server is noticed at once. A slower new normal cannot be seen that way,
// and a server kept busy above its capacity never shows its no-load RTT.
// So every Interval the algorithm probes: for a few RTTs it reports a
// limit of Ratio × its limit (not the minimum: the probe must not pin
// concurrency low, the failure reported against Envoy's adaptive
// concurrency filter), takes the smallest RTT of the requests that started
// during the probe as the new no-load RTT, and then returns to its
// previous limit.
//
// A probe also starts early when the limit falls below half of its highest
// value since the last probe: after the server's latency rises to a new
// normal, a stale no-load RTT drives the gradient down and the limit
// towards a handful; the early probe learns the new RTT in a few RTTs
// instead of up to Interval seconds.
type ProbeConfig struct {
	// Interval between probes, in seconds. 0 means 30. Negative turns
	// probing off (the no-load RTT is then the all-time minimum).
	Interval float64
	// Ratio is the share of the limit kept during a probe, in (0, 1).
	// 0 means 0.5.
	Ratio float64
	// RTTs is how long a probe lasts, in RTTs (the RTT of the sample that
	// started the probe): enough to drain requests started before it and
	// see fresh ones finish. 0 means 4. Must be ≥ 2.
	RTTs float64
}

func (p *ProbeConfig) defaults() {
	if p.Interval == 0 {
		p.Interval = 30
	}
	if p.Ratio == 0 {
		p.Ratio = 0.5
	}
	if p.RTTs == 0 {
		p.RTTs = 4
	}
}

func (p ProbeConfig) validate() error {
	if math.IsNaN(p.Interval) || math.IsInf(p.Interval, 0) {
		return badConfig("Probe.Interval", "must be a finite number of seconds, got "+ftoa(p.Interval))
	}
	if err := checkFraction("Probe.Ratio", p.Ratio, false); err != nil {
		return err
	}
	if !(p.RTTs >= 2) || math.IsInf(p.RTTs, 0) {
		return badConfig("Probe.RTTs", "must be a finite number ≥ 2, got "+ftoa(p.RTTs))
	}
	return nil
}

// noLoad tracks the no-load RTT and the probe state. The zero value (not
// initialized) never probes and caps nothing.
type noLoad struct {
	cfg        ProbeConfig
	enabled    bool
	rtt        float64 // current no-load RTT estimate; 0 before the first sample
	nextProbe  float64 // when the next probe starts
	probeStart float64 // start of the current probe
	probeEnd   float64 // end of the current probe; 0 when not probing
	probeMin   float64 // smallest RTT of requests started during the probe
	peak       float64 // highest limit since the last probe
}

func (n *noLoad) init(cfg ProbeConfig) {
	cfg.defaults()
	n.cfg = cfg
	n.enabled = true
}

// probing reports whether a probe is running.
func (n *noLoad) probing() bool { return n.probeEnd > 0 }

// observe feeds a valid sample and the caller's current limit, and reports
// whether a probe is running after it (the caller then holds its limit).
// A dropped sample says nothing about the no-load RTT and never starts a
// probe: a limit shrinking on drops is not a stale no-load RTT, and the
// probe waits until requests succeed again.
func (n *noLoad) observe(now, rtt, limit float64, dropped bool) bool {
	if n.rtt == 0 {
		n.rtt = rtt
		n.peak = limit
		n.nextProbe = now + n.cfg.Interval
		return false
	}
	if n.probing() {
		if !dropped && now-rtt >= n.probeStart && rtt < n.probeMin {
			n.probeMin = rtt
		}
		if now < n.probeEnd {
			return true
		}
		if n.probeMin < math.MaxFloat64 {
			n.rtt = n.probeMin
		}
		n.probeEnd = 0
		n.nextProbe = now + n.cfg.Interval
		n.peak = limit
		return false
	}
	if dropped {
		n.peak = limit
		return false
	}
	if rtt < n.rtt {
		n.rtt = rtt
	}
	n.peak = math.Max(n.peak, limit)
	if n.cfg.Interval > 0 && (now >= n.nextProbe || limit < 0.5*n.peak) {
		n.probeStart = now
		n.probeEnd = now + n.cfg.RTTs*rtt
		n.probeMin = math.MaxFloat64
		return true
	}
	return false
}

// cap returns floor(limit), lowered to Ratio × limit during a probe, and at
// least minLimit.
func (n *noLoad) cap(limit float64, minLimit int) int {
	if n.probing() {
		limit *= n.cfg.Ratio
	}
	l := int(limit)
	if l < minLimit {
		l = minLimit
	}
	return l
}

package limit

import "math"

// ProbeConfig configures how Gradient, Vegas and AIMD (LearnBaseline)
// measure the no-load RTT, and how Gradient2 measures the no-load RTT
// behind its MaxDrift cap.
//
// The no-load RTT is a low quantile (Quantile, p10 by default) of RTTs, and
// the RTT it is compared with is the same quantile of the last round trip's
// RTTs: like is compared with like, so latency noise that every request
// suffers (a garbage collector, cache misses) cancels out, and only the
// queueing delay the limit itself causes, which every request suffers too,
// moves the ratio. The smallest RTT ever seen would instead sit far below
// the typical unloaded RTT once requests carry noise, and the limit would
// shrink to a handful although nothing queues.
//
// Between probes the no-load RTT only falls: when two consecutive windows
// of the recent RTTs both have their quantile below it, it falls to the
// higher of the two, so a faster server is noticed within two round trips,
// one lucky window does not pull it down, and a server kept busy above its
// capacity (whose RTTs are all inflated by queueing) cannot raise it. A
// slower new normal cannot be seen that way, and a server kept busy above
// its capacity never shows its no-load RTT. So every Interval the algorithm
// probes: for a few RTTs it reports a limit of Ratio × its limit (not the
// minimum: the probe must not pin concurrency low, the failure reported
// against Envoy's adaptive concurrency filter), takes the quantile of the
// RTTs of the requests that started during the probe (the last 256 of them;
// requests admitted while at most Ratio × the limit were in flight: the
// unloaded evidence) as the new no-load RTT, and then returns to its
// previous limit.
//
// A probe also starts early when the limit falls below half of its highest
// value since the last probe: after the server's latency rises to a new
// normal, a stale no-load RTT drives the gradient down and the limit
// towards a handful; the early probe learns the new RTT in a few RTTs
// instead of up to Interval seconds.
//
// Memory: each algorithm keeps the last RTTs in a window of at most 256
// samples (about one round trip: the limit, at least 32 samples), twice
// (arrival order and sorted), 4 KiB; Update keeps it sorted with two
// binary searches and one memory move of at most 2 KiB, and allocates
// nothing.
type ProbeConfig struct {
	// Interval between probes, in seconds. 0 means 30. Negative turns
	// probing off (the no-load RTT then only ever falls).
	Interval float64
	// Ratio is the share of the limit kept during a probe, in (0, 1).
	// 0 means 0.5.
	Ratio float64
	// RTTs is how long a probe lasts, in RTTs (the larger of the RTT of the
	// sample that started the probe and the current quantile RTT): enough to
	// drain requests started before it and see fresh ones finish. 0 means
	// 4. Must be ≥ 2.
	RTTs float64
	// Quantile is the quantile of RTTs taken as the no-load RTT and as the
	// current RTT, by nearest rank, in (0, 0.5). 0 means 0.1 (the p10).
	// Smaller values are less moved by noise that slows only some requests
	// but are estimated from fewer of the samples (a window holds at least
	// 32, so below 1/32 the quantile can be the window's minimum).
	//
	// Negative selects the minimum, the behaviour of seed 004: the no-load
	// RTT is the smallest RTT seen (the smallest of the probe's requests
	// after a probe) and each sample's own RTT is the current RTT. It is
	// exact with noise-free latency and shrinks the limit far too much
	// with noisy latency.
	Quantile float64
}

// rttWindowMin and rttWindowMax bound the number of recent RTTs a window
// holds: about one round trip of samples (the limit), within these bounds.
const (
	rttWindowMin = 32
	rttWindowMax = 256
)

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
	if p.Quantile == 0 {
		p.Quantile = 0.1
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
	if !(p.Quantile < 0.5) || math.IsInf(p.Quantile, 0) {
		return badConfig("Probe.Quantile", "must be in (0, 0.5), or negative for the minimum, got "+ftoa(p.Quantile))
	}
	return nil
}

// noLoad tracks the no-load RTT, the current RTT and the probe state. The
// zero value (not initialized) never probes and caps nothing.
type noLoad struct {
	cfg        ProbeConfig
	enabled    bool
	quantile   bool    // cfg.Quantile > 0; else the minimum mode
	rtt        float64 // current no-load RTT estimate; 0 before the first sample
	nextProbe  float64 // when the next probe starts
	probeStart float64 // start of the current probe
	probeEnd   float64 // end of the current probe; 0 when not probing
	probeMin   float64 // minimum mode: smallest RTT of requests started during the probe
	peak       float64 // highest limit since the last probe
	fresh      int     // quantile mode: samples added since the last window quantile was taken
	prevQ      float64 // quantile mode: the previous window's quantile (+Inf: none since the last probe)
	win        rttWindow
}

func (n *noLoad) init(cfg ProbeConfig) {
	cfg.defaults()
	n.cfg = cfg
	n.enabled = true
	n.quantile = cfg.Quantile > 0
	n.prevQ = math.Inf(1)
}

// probing reports whether a probe is running.
func (n *noLoad) probing() bool { return n.probeEnd > 0 }

// windowSize is the number of recent RTTs to keep for a limit: about one
// round trip of samples.
func windowSize(limit float64) int {
	if !(limit < rttWindowMax) {
		return rttWindowMax
	}
	return max(rttWindowMin, int(math.Ceil(limit)))
}

// current returns the RTT to compare with the no-load RTT: in quantile
// mode the quantile of the recent window (rtt while the window is empty),
// in minimum mode rtt itself.
func (n *noLoad) current(rtt float64) float64 {
	if n.quantile && n.win.n > 0 {
		return n.win.quantile(n.cfg.Quantile)
	}
	return rtt
}

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
		if n.quantile && !dropped {
			n.win.add(rtt, windowSize(limit))
		}
		return false
	}
	if n.probing() {
		if !dropped && now-rtt >= n.probeStart {
			if n.quantile {
				n.win.add(rtt, rttWindowMax)
			} else if rtt < n.probeMin {
				n.probeMin = rtt
			}
		}
		if now < n.probeEnd {
			return true
		}
		if n.quantile {
			if n.win.n > 0 {
				n.rtt = n.win.quantile(n.cfg.Quantile)
			}
			n.fresh, n.prevQ = 0, math.Inf(1)
		} else if n.probeMin < math.MaxFloat64 {
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
	if n.quantile {
		size := windowSize(limit)
		n.win.add(rtt, size)
		if n.fresh++; n.fresh >= size {
			// a window's worth of new samples: its quantile lowers the
			// no-load RTT if the previous window's agrees
			q := n.win.quantile(n.cfg.Quantile)
			n.rtt = math.Min(n.rtt, math.Max(q, n.prevQ))
			n.prevQ, n.fresh = q, 0
		}
	} else if rtt < n.rtt {
		n.rtt = rtt
	}
	n.peak = math.Max(n.peak, limit)
	if n.cfg.Interval > 0 && (now >= n.nextProbe || limit < 0.5*n.peak) {
		n.probeStart = now
		n.probeEnd = now + n.cfg.RTTs*math.Max(rtt, n.current(rtt))
		n.probeMin = math.MaxFloat64
		n.win.reset()
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

// rttWindow holds the most recent RTTs, at most rttWindowMax: ring in
// arrival order (the oldest at head) and sorted ascending, both of n
// values. The zero value is empty.
type rttWindow struct {
	ring   [rttWindowMax]float64
	sorted [rttWindowMax]float64
	head   int
	n      int
}

func (w *rttWindow) reset() { w.head, w.n = 0, 0 }

// quantile returns the q-quantile by nearest rank: the ⌈q·n⌉-th smallest
// value, the smallest when that rank is below 1. The window must not be
// empty.
func (w *rttWindow) quantile(q float64) float64 {
	k := int(math.Ceil(float64(q*float64(w.n)))) - 1
	return w.sorted[max(k, 0)]
}

// add appends x as the newest value and drops the oldest ones so that at
// most size values remain (size in [1, rttWindowMax]). A window larger
// than size shrinks by at most two values per add, so a smaller size costs
// no burst of work.
func (w *rttWindow) add(x float64, size int) {
	for k := 0; k < 2 && w.n > size; k++ {
		w.removeOldest()
	}
	if w.n >= size {
		old := w.ring[w.head]
		w.ring[(w.head+w.n)%rttWindowMax] = x
		w.head = (w.head + 1) % rttWindowMax
		w.replaceSorted(old, x)
		return
	}
	w.ring[(w.head+w.n)%rttWindowMax] = x
	s := w.sorted[:w.n+1]
	j := lowerBound(s[:w.n], x)
	copy(s[j+1:], s[j:w.n])
	s[j] = x
	w.n++
}

// removeOldest drops the oldest value; the window must not be empty.
func (w *rttWindow) removeOldest() {
	old := w.ring[w.head]
	w.head = (w.head + 1) % rttWindowMax
	s := w.sorted[:w.n]
	i := lowerBound(s, old)
	copy(s[i:], s[i+1:])
	w.n--
}

// lowerBound returns the index of the first value in s not below x (len(s)
// if none). Written so that the compiler can use conditional moves: RTTs
// are noisy, and a branch per step would be mispredicted half the time.
func lowerBound(s []float64, x float64) int {
	n := len(s)
	if n == 0 {
		return 0
	}
	base := 0
	for n > 1 {
		half := n / 2
		base += half & -b2i(s[base+half-1] < x)
		n -= half
	}
	return base + b2i(s[base] < x)
}

// b2i is 1 for true and 0 for false, without a branch.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// replaceSorted replaces one value equal to old by x in the sorted values,
// moving only the values between the two positions.
func (w *rttWindow) replaceSorted(old, x float64) {
	s := w.sorted[:w.n]
	i := lowerBound(s, old) // s[i] == old
	j := lowerBound(s, x)   // x belongs before s[j]
	if j > i {
		copy(s[i:j-1], s[i+1:j])
		s[j-1] = x
	} else {
		copy(s[j+1:i+1], s[j:i])
		s[j] = x
	}
}

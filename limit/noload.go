package limit

import (
	"math"
	"slices"
)

// ProbeConfig configures how Gradient, Vegas and AIMD (LearnBaseline)
// measure the no-load RTT, and how Gradient2 measures the no-load RTT
// behind its MaxDrift cap.
//
// The no-load RTT is a low quantile (Quantile, p10 by default) of RTTs, and
// the RTT it is compared with (RTT_actual) is the same quantile of the last
// round trip's RTTs: like is compared with like, so latency noise that
// every request suffers (a garbage collector, cache misses) cancels out,
// and only the queueing delay the limit itself causes, which every request
// suffers too, moves the ratio. The smallest RTT ever seen would instead
// sit far below the typical unloaded RTT once requests carry noise, and the
// limit would shrink to a handful although nothing queues.
//
// The RTTs (dropped samples excluded) are gathered into consecutive windows
// of about one round trip each: a window is full at max(32, ⌈limit⌉)
// samples, at most 256. When a window is full its quantile is taken once,
// by nearest rank, and becomes RTT_actual until the next window is full; so
// RTT_actual moves once per round trip (the pace at which the algorithms
// step anyway) and lags the RTTs by one to two round trips. The first
// sample's RTT (the first not dropped: a dropped sample's RTT, such as a
// timeout's, is never an estimate) is the first no-load RTT and the first
// RTT_actual; until the
// first window is full, RTT_actual is the quantile of the RTTs gathered in
// it so far, retaken each time their count reaches a power of two (1, 2,
// 4, …).
// Between probes the no-load RTT only falls: when two consecutive windows
// both have their quantile below it, it falls to the
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
// Cost: each algorithm holds one window of at most 256 RTTs, 2 KiB. Update
// stores the sample and, once per window, selects the quantile in O(size)
// (about 1 µs for a window of 256 noisy RTTs, 4 ns a sample amortised: see
// BenchmarkRTTWindowTake); it allocates nothing.
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

// rttWindowMin and rttWindowMax bound the number of RTTs in a window:
// about one round trip of samples (the limit), within these bounds.
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
//
// In quantile mode the RTTs are gathered into consecutive windows that do
// not overlap; when one is full its quantile is taken once (an O(size)
// selection) and becomes the current RTT until the next window is full. So
// Update costs a store per sample plus one selection per window (per round
// trip), a few nanoseconds a sample, where a sliding quantile had to keep a
// sorted copy up to date on every sample.
type noLoad struct {
	cfg        ProbeConfig
	enabled    bool
	quantile   bool    // cfg.Quantile > 0; else the minimum mode
	rtt        float64 // current no-load RTT estimate; 0 before the first sample
	cur        float64 // quantile mode: RTT_actual, the last full window's quantile (see observe before the first)
	warm       bool    // quantile mode: a window has been full, or a probe has taken its quantile
	grad       float64 // quantile mode: rtt ÷ cur, computed when either changes
	nextProbe  float64 // when the next probe starts
	probeStart float64 // start of the current probe
	probeEnd   float64 // end of the current probe; 0 when not probing
	probeMin   float64 // minimum mode: smallest RTT of requests started during the probe
	peak       float64 // highest limit since the last probe
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

// windowFull reports whether a window of count RTTs is complete for a
// limit: about one round trip of samples, count ≥ ⌈limit⌉ within
// [rttWindowMin, rttWindowMax].
func windowFull(count int, limit float64) bool {
	return count >= rttWindowMax || count >= rttWindowMin && float64(count) >= limit
}

// current returns the RTT to compare with the no-load RTT: in quantile
// mode the last full window's quantile, in minimum mode rtt itself.
func (n *noLoad) current(rtt float64) float64 {
	if n.quantile {
		return n.cur
	}
	return rtt
}

// ratio returns RTT_noload ÷ current(rtt). In quantile mode both change
// only when a window is full or a probe ends, so the division is done then.
func (n *noLoad) ratio(rtt float64) float64 {
	if n.quantile {
		return n.grad
	}
	return n.rtt / rtt
}

// setCur makes q the current RTT, after n.rtt has been updated.
func (n *noLoad) setCur(q float64) {
	n.cur = q
	n.grad = n.rtt / q
}

// observe feeds a valid sample and the caller's current limit, and reports
// whether a probe is running after it (the caller then holds its limit).
// A dropped sample says nothing about the no-load RTT and never starts a
// probe: a limit shrinking on drops is not a stale no-load RTT, and the
// probe waits until requests succeed again.
func (n *noLoad) observe(now, rtt, limit float64, dropped bool) bool {
	if n.rtt == 0 {
		if dropped {
			// a timeout's or a refusal's RTT is no estimate of either
			// RTT: wait for the first sample that was not dropped
			return false
		}
		// the first sample not dropped is the first estimate of both
		// RTTs; windows start with the next one
		n.rtt = rtt
		n.setCur(rtt)
		n.peak = limit
		n.nextProbe = now + n.cfg.Interval
		return false
	}
	if n.probing() {
		if !dropped && now-rtt >= n.probeStart {
			if n.quantile {
				n.win.push(rtt)
			} else if rtt < n.probeMin {
				n.probeMin = rtt
			}
		}
		if now < n.probeEnd {
			return true
		}
		if n.quantile {
			if n.win.n > 0 {
				n.rtt = n.win.take(n.cfg.Quantile)
				n.setCur(n.rtt)
				n.warm = true
			}
			n.prevQ = math.Inf(1)
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
		n.win.push(rtt)
		if windowFull(n.win.n, limit) {
			// a window's quantile is the current RTT, and lowers the
			// no-load RTT if the previous window's agrees
			q := n.win.take(n.cfg.Quantile)
			n.rtt = min(n.rtt, max(q, n.prevQ))
			n.prevQ = q
			n.setCur(q)
			n.warm = true
		} else if !n.warm && n.win.n&(n.win.n-1) == 0 {
			// until the first window is full, the quantile of the RTTs
			// gathered so far, each time their count doubles (1, 2, 4,
			// …): an estimate within a few samples, and amortised O(1)
			n.setCur(n.win.quantile(n.cfg.Quantile))
		}
	} else if rtt < n.rtt {
		n.rtt = rtt
	}
	n.peak = max(n.peak, limit)
	if n.cfg.Interval > 0 && (now >= n.nextProbe || limit < 0.5*n.peak) {
		n.probeStart = now
		n.probeEnd = now + float64(n.cfg.RTTs*max(rtt, n.current(rtt)))
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

// rttWindow gathers RTTs for one quantile, at most rttWindowMax of them:
// past that (only during a probe), each value overwrites the oldest. The
// order of the values does not matter to a quantile, and quantile reorders
// them; after that, push overwrites an arbitrary value instead of the
// oldest, so quantile without take is only used on windows that are
// emptied before they wrap (a window between probes is full at
// rttWindowMax). The zero value is empty.
type rttWindow struct {
	buf  [rttWindowMax]float64
	n    int    // values held, at most rttWindowMax
	next int    // where the next value goes (n, until the buffer wraps)
	rnd  uint64 // state of the generator that picks pivot candidates
}

func (w *rttWindow) reset() { w.n, w.next = 0, 0 }

// push adds x, overwriting the oldest value when the window holds
// rttWindowMax values.
func (w *rttWindow) push(x float64) {
	w.buf[w.next] = x
	w.next++
	if w.next == rttWindowMax {
		w.next = 0
	}
	if w.n < rttWindowMax {
		w.n++
	}
}

// quantile returns the q-quantile of the values by nearest rank (the
// ⌈q·n⌉-th smallest, the smallest when that rank is below 1), reordering
// them. The window must not be empty. It costs O(n): a selection, not a
// sort.
func (w *rttWindow) quantile(q float64) float64 {
	k := int(math.Ceil(float64(q*float64(w.n)))) - 1
	return selectKth(w.buf[:w.n], min(max(k, 0), w.n-1), &w.rnd)
}

// take returns quantile(q) and empties the window.
func (w *rttWindow) take(q float64) float64 {
	v := w.quantile(q)
	w.reset()
	return v
}

// selectKth returns the value that would be at index k if s were sorted
// ascending (0 ≤ k < len(s)), reordering s. Quickselect: the pivot is the
// median of three values at pseudo-random positions drawn from *rnd (the
// result does not depend on them, only the cost; fixed positions degrade on
// ramps and organ-pipe orders, which RTTs can show), and the partitions are
// written without branches on the values (RTTs are noisy, so a branch per
// value would be mispredicted half the time). About 2–3 passes over len(s)
// values on average; after 2·log₂(256) rounds without convergence it sorts
// what is left, so the worst case is O(n log n).
func selectKth(s []float64, k int, rnd *uint64) float64 {
	lo, hi := 0, len(s) // s[k] is within s[lo:hi]
	for rounds := 0; hi-lo > 8; rounds++ {
		if rounds == 16 {
			slices.Sort(s[lo:hi])
			return s[k]
		}
		// three positions in [lo, hi) from three 16-bit fields of r
		r, n := splitmix(rnd), uint64(hi-lo)
		a := s[lo+int((r&0xffff*n)>>16)]
		b := s[lo+int((r>>16&0xffff*n)>>16)]
		c := s[lo+int((r>>32&0xffff*n)>>16)]
		p := median3(a, b, c)
		// s[lo:j] < p ≤ s[j:hi]
		j := lo
		for i := lo; i < hi; i++ {
			v := s[i]
			s[i] = s[j]
			s[j] = v
			j += b2i(v < p)
		}
		if k < j {
			hi = j
			continue
		}
		// s[j:m] == p < s[m:hi]; p is one of the values, so m > j
		m := j
		for i := j; i < hi; i++ {
			v := s[i]
			s[i] = s[m]
			s[m] = v
			m += b2i(v == p)
		}
		if k < m {
			return p
		}
		lo = m
	}
	// insertion sort of the few values left
	for i := lo + 1; i < hi; i++ {
		v := s[i]
		j := i
		for ; j > lo && s[j-1] > v; j-- {
			s[j] = s[j-1]
		}
		s[j] = v
	}
	return s[k]
}

// splitmix advances the state *x of a splitmix64 generator (any start,
// zero included) and returns its next output.
func splitmix(x *uint64) uint64 {
	*x += 0x9e3779b97f4a7c15
	z := *x
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// median3 returns the median of a, b and c.
func median3(a, b, c float64) float64 {
	return max(min(a, b), min(max(a, b), c))
}

// b2i is 1 for true and 0 for false, without a branch.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

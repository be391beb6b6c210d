package loadgen

import (
	"sync"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// Histograms record microseconds with 3 significant digits from 1 µs up to
// twice the call Deadline (larger values are clamped to it). One such
// histogram takes 96 KiB for a 1 s Deadline, 144 KiB for 1 min, 232 KiB for
// the largest Deadline (24 h). A run holds three per shard (at most 8) per
// step still open (from the step's first arrival until its last one ended,
// at most Deadline after its last intended send, and its result was made),
// plus three in the monitor and, with Abort.P99, one per shard and one per
// second of Abort.For: memory is bounded by the shards, the open steps and
// Abort.For, not by the rate or the run's length.
const sigDigits = 3

// maxReasons bounds the distinct Spillway-Reason values kept per class in
// one step (the header comes from the server); more are counted under
// otherReason.
const (
	maxReasons  = 64
	otherReason = "(other)"
	maxReason   = 64 // bytes of a reason kept
)

// hist is an HDR histogram of durations that also keeps the exact maximum.
type hist struct {
	h   *hdr.Histogram
	max time.Duration
}

func newHist(highest time.Duration) hist {
	return hist{h: hdr.New(1, max(2, highest.Microseconds()), sigDigits)}
}

func (h *hist) record(d time.Duration) {
	d = max(d, 0)
	h.max = max(h.max, d)
	us := min(d.Microseconds(), h.h.HighestTrackableValue())
	_ = h.h.RecordValue(us) // in range: clamped above
}

func (h *hist) merge(from *hist) {
	h.h.Merge(from.h)
	h.max = max(h.max, from.max)
}

func (h *hist) reset() {
	h.h.Reset()
	h.max = 0
}

// quantiles reads h's quantiles, none above its exact maximum.
func (h *hist) quantiles() Quantiles {
	if h.h.TotalCount() == 0 {
		return Quantiles{}
	}
	at := func(p float64) time.Duration {
		return min(time.Duration(h.h.ValueAtQuantile(p))*time.Microsecond, h.max)
	}
	mean := min(time.Duration(h.h.Mean()*float64(time.Microsecond)), h.max)
	return Quantiles{P50: at(50), P90: at(90), P99: at(99), P999: at(99.9), Max: h.max, Mean: mean}
}

// outcome is how one arrival ended.
type outcome struct {
	sent, ok, good, timeout bool
	status                  int
	retries                 int
	latency, lag            time.Duration
	reason                  string // the final answer's Spillway-Reason
}

// tally counts one step's ended arrivals in one shard.
type tally struct {
	offered, sent, unsent, ok, good, timeouts, retries int

	statuses map[int]int
	refusals map[string]map[string]int
	classes  []ClassResult // by class index + 1

	latency, goodLatency, sendLag hist
}

func newTally(classes int, highest time.Duration) *tally {
	return &tally{
		statuses: make(map[int]int),
		refusals: make(map[string]map[string]int),
		classes:  make([]ClassResult, classes+1),
		latency:  newHist(highest), goodLatency: newHist(highest), sendLag: newHist(highest),
	}
}

func (t *tally) add(o *outcome, class int, className string) {
	t.offered++
	t.classes[class+1].Offered++
	switch {
	case o.sent:
		t.sent++
		t.sendLag.record(o.lag)
	default:
		t.unsent++
	}
	if o.ok {
		t.ok++
	}
	if o.good {
		t.good++
		t.classes[class+1].Good++
		t.goodLatency.record(o.latency)
	}
	if o.timeout {
		t.timeouts++
	}
	t.retries += o.retries
	t.statuses[o.status]++
	t.latency.record(o.latency)
	if o.reason != "" {
		t.addRefusal(className, o.reason, 1)
	}
}

func (t *tally) addRefusal(class, reason string, n int) {
	m := t.refusals[class]
	if m == nil {
		m = make(map[string]int)
		t.refusals[class] = m
	}
	if len(reason) > maxReason {
		reason = reason[:maxReason]
	}
	if _, ok := m[reason]; !ok && len(m) >= maxReasons {
		reason = otherReason
	}
	m[reason] += n
}

// merge adds from's counts to t.
func (t *tally) merge(from *tally) {
	t.offered += from.offered
	t.sent += from.sent
	t.unsent += from.unsent
	t.ok += from.ok
	t.good += from.good
	t.timeouts += from.timeouts
	t.retries += from.retries
	for s, n := range from.statuses {
		t.statuses[s] += n
	}
	for class, reasons := range from.refusals {
		for reason, n := range reasons {
			t.addRefusal(class, reason, n)
		}
	}
	for i, c := range from.classes {
		t.classes[i].Offered += c.Offered
		t.classes[i].Good += c.Good
	}
	t.latency.merge(&from.latency)
	t.goodLatency.merge(&from.goodLatency)
	t.sendLag.merge(&from.sendLag)
}

// shard holds the tallies of the workers that record into it, behind one
// lock that those few workers rarely contend for.
type shard struct {
	mu     sync.Mutex
	steps  map[int]*tally // by step index; guarded by mu
	window hist           // latencies of the current report interval (Abort.P99 only); guarded by mu
}

// record counts arrival a's outcome o.
func (s *shard) record(r *runner, a *arrival, o *outcome) {
	s.mu.Lock()
	t := s.steps[int(a.step)]
	if t == nil {
		t = newTally(len(r.mix.classes), r.highest)
		s.steps[int(a.step)] = t
	}
	t.add(o, int(a.class), r.mix.className(int(a.class)))
	if s.window.h != nil {
		s.window.record(o.latency)
	}
	s.mu.Unlock()
}

// take removes and returns step k's tally (nil if it has none).
func (s *shard) take(k int) *tally {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.steps[k]
	delete(s.steps, k)
	return t
}

// peek adds step k's latencies and send lags so far to lat and lag.
func (s *shard) peek(k int, lat, lag *hist) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.steps[k]; t != nil {
		lat.merge(&t.latency)
		lag.merge(&t.sendLag)
	}
}

// drainWindow adds the interval's latencies to into and starts a new
// interval.
func (s *shard) drainWindow(into *hist) {
	s.mu.Lock()
	defer s.mu.Unlock()
	into.merge(&s.window)
	s.window.reset()
}

package loadgen

import (
	"fmt"
	"time"
)

// reportEvery is the progress and abort interval.
const reportEvery = time.Second

// monitor is the goroutine that makes the steps' results (in step order),
// reports progress and evaluates the abort thresholds. It alone calls the
// user's StepDone and Progress.
type monitor struct {
	r    *runner
	next int // the next step to report
	res  Result

	last     time.Duration // the previous tick, since the base
	lat, lag hist          // scratch for the running step's quantiles
	win      []window      // Abort: the last ⌈For/1s⌉ intervals, a ring
	filled   int           // intervals in win so far
}

// window is one report interval's arrivals that ended.
type window struct {
	ended, failed int64
	lat           hist // Abort.P99 only
}

func newMonitor(r *runner) *monitor {
	m := &monitor{r: r, lat: newHist(r.highest), lag: newHist(r.highest)}
	if a := r.cfg.Abort; a.ErrorRate > 0 || a.P99 > 0 {
		m.win = make([]window, int((a.For+reportEvery-1)/reportEvery))
		for i := range m.win {
			if a.P99 > 0 {
				m.win[i].lat = newHist(r.highest)
			}
		}
	}
	return m
}

func (m *monitor) run() Result {
	tick := time.NewTicker(reportEvery)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			m.tick()
		case <-m.r.notify:
		case <-m.r.finished:
			m.report(true)
			return m.res
		}
		m.report(false)
	}
}

// report makes the results of the steps that are complete, in order; with
// final (every goroutine ended), of every step that started.
func (m *monitor) report(final bool) {
	for m.next < len(m.r.steps) {
		st := m.r.steps[m.next]
		last := m.next == len(m.r.steps)-1
		if !st.started.Load() || st.pending.Load() != 0 || !(final || last || st.over.Load()) {
			return
		}
		res := m.result(m.next)
		m.res.Steps = append(m.res.Steps, res)
		m.next++
		if m.r.cfg.StepDone != nil {
			m.r.cfg.StepDone(res)
		}
	}
}

// result merges step k's tallies from every shard.
func (m *monitor) result(k int) StepResult {
	r, st := m.r, m.r.steps[k]
	t := newTally(len(r.mix.classes), r.highest)
	for _, s := range r.shards {
		if from := s.take(k); from != nil {
			t.merge(from)
		}
	}
	step := r.cfg.Steps[k]
	res := StepResult{
		Index: k, Rate: step.Rate, Duration: step.Duration,
		Elapsed: time.Duration(st.elapsed.Load()),
		Offered: t.offered, Sent: t.sent, Unsent: t.unsent, OK: t.ok, Good: t.good,
		Failed: t.offered - t.good, Timeouts: t.timeouts, Retries: t.retries,
		Attempts:    int(st.attempts.Load()),
		Latency:     t.latency.quantiles(),
		GoodLatency: t.goodLatency.quantiles(),
		SendLag:     t.sendLag.quantiles(),
		Partial:     st.cut.Load(),
		Statuses:    t.statuses, Refusals: t.refusals,
		Classes: make(map[string]ClassResult, len(t.classes)),
	}
	if secs := res.Elapsed.Seconds(); secs > 0 {
		res.Throughput = float64(res.OK) / secs
		res.Goodput = float64(res.Good) / secs
	}
	res.Invalid = res.SendLag.P99 > r.cfg.MaxSendLag
	for i, c := range t.classes {
		if i == 0 && c.Offered == 0 && len(t.classes) > 1 {
			continue // a mix whose shares sum to 1: no classless arrivals
		}
		res.Classes[r.mix.className(i-1)] = c
	}
	return res
}

// tick reports progress and evaluates the abort thresholds, once per
// interval.
func (m *monitor) tick() {
	r := m.r
	now := r.since()
	dt := (now - m.last).Seconds()
	m.last = now
	ended, ok, good := r.ivEnded.Swap(0), r.ivOK.Swap(0), r.ivGood.Swap(0)
	if r.cfg.Progress != nil {
		p := m.progress(now)
		if dt > 0 {
			p.Goodput = float64(good) / dt
		}
		if ended > 0 {
			p.ErrorRate = float64(ended-ok) / float64(ended)
		}
		r.cfg.Progress(p)
	}
	if m.win != nil && m.res.Aborted == "" {
		m.abort(ended, ended-ok)
	}
}

// progress returns the running step's state so far.
func (m *monitor) progress(now time.Duration) Progress {
	r := m.r
	k := int(r.current.Load())
	st := r.steps[k]
	m.lat.reset()
	m.lag.reset()
	for _, s := range r.shards {
		s.peek(k, &m.lat, &m.lag)
	}
	return Progress{
		Step: k, Rate: r.cfg.Steps[k].Rate, Elapsed: max(now-r.starts[k], 0),
		Sent: int(st.sent.Load()), Unsent: int(st.unsent.Load()), InFlight: int(r.inFlight.Load()),
		P99: m.lat.quantiles().P99, SendLagP99: m.lag.quantiles().P99,
	}
}

// abort adds the interval to the ring and stops the run when, over the
// last For, the error rate or the p99 is above its threshold.
func (m *monitor) abort(ended, failed int64) {
	r, a := m.r, m.r.cfg.Abort
	w := &m.win[m.filled%len(m.win)]
	w.ended, w.failed = ended, failed
	if w.lat.h != nil {
		w.lat.reset()
		for _, s := range r.shards {
			s.drainWindow(&w.lat)
		}
	}
	m.filled++
	if m.filled < len(m.win) {
		return
	}
	var sum window
	if a.P99 > 0 {
		sum.lat = m.lat
		sum.lat.reset()
	}
	for i := range m.win {
		sum.ended += m.win[i].ended
		sum.failed += m.win[i].failed
		if sum.lat.h != nil {
			sum.lat.merge(&m.win[i].lat)
		}
	}
	if sum.ended == 0 {
		return
	}
	if rate := float64(sum.failed) / float64(sum.ended); a.ErrorRate > 0 && rate > a.ErrorRate {
		m.res.Aborted = fmt.Sprintf("errors %.0f%% over %v, above %.0f%%", 100*rate, a.For, 100*a.ErrorRate)
	} else if p99 := sum.lat.quantiles().P99; a.P99 > 0 && p99 > a.P99 {
		m.res.Aborted = fmt.Sprintf("p99 %v over %v, above %v", p99.Round(time.Millisecond), a.For, a.P99)
	}
	if m.res.Aborted != "" {
		r.stop()
	}
}

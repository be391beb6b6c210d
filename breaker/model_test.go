package breaker

import (
	"fmt"
	"math"
	"testing"

	"github.com/spillwayhq/spillway/rng"
)

// refBreaker is a reference model of the breaker, written from the
// package documentation as plainly as possible (lists of calls re-scanned
// on every decision instead of rings and running sums). It takes a Config
// with every field set: it knows no defaults.
type refBreaker struct {
	c Config

	state      State
	gen        uint64
	consec     int     // consecutive failures (Consecutive)
	openedAt   float64 // 0 until the first opening
	openFor    float64
	trialAt    float64
	trialsOut  int
	closedLog  []refCall // every call reported in CLOSED since the breaker last closed
	probeLog   []refCall // this round's trial reports
	newest     int64     // the newest bucket seen (TimeWindow)
	seenBucket bool
	byProbes   bool // the last opening was decided by trials
}

type refCall struct {
	bucket     int64
	fail, slow bool
}

type refTicket struct {
	gen         uint64
	start       float64
	trial, done bool
}

func newRef(c Config) *refBreaker { return &refBreaker{c: c, openFor: c.Recovery} }

func (m *refBreaker) change(s State) {
	m.state = s
	m.gen++
}

func (m *refBreaker) allow(now float64) (*refTicket, bool) {
	if m.state == Closed {
		return &refTicket{gen: m.gen, start: now}, true
	}
	if m.state == Open {
		if !(now-m.openedAt >= m.openFor) {
			return nil, false
		}
		m.change(HalfOpen)
		m.trialsOut = 0
		m.probeLog = nil
	}
	if m.trialsOut >= m.c.Trials {
		if !(now-m.trialAt >= m.c.Recovery) {
			return nil, false
		}
		m.gen++ // the trials out are presumed lost
		m.trialsOut = 0
		m.probeLog = nil
	}
	m.trialAt = now
	m.trialsOut++
	return &refTicket{gen: m.gen, start: now, trial: true}, true
}

func (m *refBreaker) cancel(t *refTicket) {
	if t.done {
		return
	}
	t.done = true
	if t.gen == m.gen && t.trial && m.trialsOut > 0 {
		m.trialsOut--
	}
}

func (m *refBreaker) open(now float64) {
	if m.state == HalfOpen {
		m.openFor = math.Min(m.openFor*m.c.RecoveryMultiplier, m.c.MaxRecovery)
	}
	m.openedAt = now
	m.change(Open)
}

func (m *refBreaker) close() {
	m.consec = 0
	m.closedLog = nil
	m.openFor = m.c.Recovery
	m.change(Closed)
}

// rates returns the failure and slow shares of calls.
func (m *refBreaker) trips(calls []refCall) bool {
	failed, slow := 0, 0
	for _, c := range calls {
		if c.fail {
			failed++
		}
		if c.slow {
			slow++
		}
	}
	n := float64(len(calls))
	return float64(failed)/n >= m.c.FailureRate || (m.c.SlowCall > 0 && float64(slow)/n >= m.c.SlowCallRate)
}

// window returns the calls of closedLog that are in the window now.
func (m *refBreaker) window() []refCall {
	if m.c.Window == CountWindow {
		if len(m.closedLog) <= m.c.WindowCalls {
			return m.closedLog
		}
		return m.closedLog[len(m.closedLog)-m.c.WindowCalls:]
	}
	buckets := int64(math.Round(m.c.WindowSeconds / m.c.BucketSeconds))
	var in []refCall
	for _, c := range m.closedLog {
		if c.bucket > m.newest-buckets {
			in = append(in, c)
		}
	}
	return in
}

func (m *refBreaker) done(t *refTicket, now float64, ok bool) {
	if t.done {
		return
	}
	t.done = true
	if t.gen != m.gen {
		return
	}
	slow := m.c.SlowCall > 0 && now-t.start >= m.c.SlowCall
	if m.state == HalfOpen && m.c.TrialsInARow {
		// every trial must succeed: the first that fails or is slow
		// reopens, the Trials-th success closes
		m.probeLog = append(m.probeLog, refCall{fail: !ok, slow: slow})
		switch {
		case !ok || slow:
			if !ok {
				m.consec++
			}
			m.byProbes = true
			m.open(now)
		case len(m.probeLog) == m.c.Trials:
			m.close()
		default:
			m.consec = 0
		}
		return
	}
	if m.c.Window == Consecutive {
		if ok {
			m.consec = 0
			if m.state == HalfOpen {
				m.close()
			}
			return
		}
		m.consec++
		if m.state == HalfOpen || m.consec >= m.c.Threshold {
			m.open(now)
		}
		return
	}
	if m.state == HalfOpen {
		m.probeLog = append(m.probeLog, refCall{fail: !ok, slow: slow})
		if len(m.probeLog) == m.c.Trials {
			if m.trips(m.probeLog) {
				m.byProbes = true
				m.open(now)
			} else {
				m.close()
			}
		}
		return
	}
	if m.c.Window == TimeWindow {
		b := int64(math.Floor(now / m.c.BucketSeconds))
		if !m.seenBucket || b > m.newest {
			m.newest = b
		}
		m.seenBucket = true
	}
	m.closedLog = append(m.closedLog, refCall{bucket: m.newest, fail: !ok, slow: slow})
	if w := m.window(); len(w) >= m.c.MinCalls && m.trips(w) {
		m.byProbes = false
		m.open(now)
	}
}

// snapshot is what Breaker.Snapshot should say.
func (m *refBreaker) snapshot() Snapshot {
	s := Snapshot{State: m.state, OpenedAt: m.openedAt, OpenFor: m.openFor, Generation: m.gen}
	if m.c.Window == Consecutive {
		s.Failures = m.consec
		return s
	}
	calls := m.window()
	if m.state == HalfOpen || (m.state == Open && m.byProbes) {
		calls = m.probeLog
	}
	s.Calls = len(calls)
	for _, c := range calls {
		if c.fail {
			s.Failures++
		}
		if c.slow {
			s.Slow++
		}
	}
	return s
}

// The Breaker and the reference model go through the same random events —
// calls allowed, reported late, cancelled, reported twice, time passing,
// the dependency's health changing — and must agree after every one.
func TestAgainstModel(t *testing.T) {
	configs := []Config{
		{Window: Consecutive, Threshold: 3, Recovery: 5, Trials: 2, RecoveryMultiplier: 2, MaxRecovery: 17},
		{Window: Consecutive, Threshold: 1, Recovery: 1, Trials: 1, RecoveryMultiplier: 1, MaxRecovery: 1},
		{Window: CountWindow, WindowCalls: 5, MinCalls: 3, FailureRate: 0.4, SlowCall: 1.5, SlowCallRate: 0.6,
			Trials: 3, Recovery: 4, RecoveryMultiplier: 1.5, MaxRecovery: 20},
		{Window: CountWindow, WindowCalls: 1, MinCalls: 1, FailureRate: 1, Trials: 1, Recovery: 2, RecoveryMultiplier: 1, MaxRecovery: 2},
		{Window: CountWindow, WindowCalls: 30, MinCalls: 10, FailureRate: 0.25, SlowCall: 0.5, SlowCallRate: 0.3,
			Trials: 5, Recovery: 3, RecoveryMultiplier: 3, MaxRecovery: 40},
		{Window: TimeWindow, WindowSeconds: 4, BucketSeconds: 1, MinCalls: 2, FailureRate: 0.5, Trials: 2, Recovery: 3,
			RecoveryMultiplier: 1, MaxRecovery: 3},
		{Window: TimeWindow, WindowSeconds: 3, BucketSeconds: 0.5, MinCalls: 4, FailureRate: 0.3, SlowCall: 0.7, SlowCallRate: 0.5,
			Trials: 4, Recovery: 2.5, RecoveryMultiplier: 3, MaxRecovery: 30},
		{Window: TimeWindow, WindowSeconds: 10, BucketSeconds: 10, MinCalls: 3, FailureRate: 0.6, Trials: 1, Recovery: 1,
			RecoveryMultiplier: 1, MaxRecovery: 1},
		// gobreaker's half-open rule
		{Window: Consecutive, Threshold: 2, Recovery: 2, Trials: 3, TrialsInARow: true, RecoveryMultiplier: 2, MaxRecovery: 9},
		{Window: CountWindow, WindowCalls: 6, MinCalls: 3, FailureRate: 0.6, SlowCall: 1, SlowCallRate: 0.5,
			Trials: 3, TrialsInARow: true, Recovery: 3, RecoveryMultiplier: 1, MaxRecovery: 3},
		{Window: TimeWindow, WindowSeconds: 3, BucketSeconds: 1, MinCalls: 3, FailureRate: 0.6, Trials: 2, TrialsInARow: true,
			Recovery: 2, RecoveryMultiplier: 1.5, MaxRecovery: 10},
	}
	steps := []float64{0, 0, 0.1, 0.25, 0.5, 1, 2.5, 7}
	for ci, cfg := range configs {
		for seed := uint32(1); seed <= 3; seed++ {
			t.Run(fmt.Sprintf("%d-%v/seed%d", ci, cfg.Window, seed), func(t *testing.T) {
				b := mustNew(t, cfg)
				m := newRef(cfg)
				r := rng.New(seed)
				type pair struct {
					real  Ticket
					model *refTicket
				}
				var out, reported []pair
				now := 0.0
				failP := 0.2
				for i := 0; i < 4000; i++ {
					var what string
					switch u := r.Float64(); {
					case u < 0.02: // the dependency's health changes
						failP = []float64{0, 0.1, 0.3, 0.6, 1}[int(r.Float64()*5)]
						continue
					case u < 0.25:
						now += steps[int(r.Float64()*float64(len(steps)))]
						continue
					case u < 0.6 || len(out) == 0:
						tk, err := b.Allow(now)
						mt, ok := m.allow(now)
						if (err == nil) != ok {
							t.Fatalf("step %d at %v: Allow error %v, model allows %v", i, now, err, ok)
						}
						what = "allow"
						if ok {
							out = append(out, pair{tk, mt})
						}
					case u < 0.93: // report a call, usually an early one
						j := int(r.Float64() * float64(len(out)))
						if r.Float64() < 0.5 {
							j = 0
						}
						p := out[j]
						out = append(out[:j], out[j+1:]...)
						ok := r.Float64() >= failP
						p.real.Done(now, ok)
						m.done(p.model, now, ok)
						reported = append(reported, p)
						what = fmt.Sprintf("done ok=%v start=%v", ok, p.model.start)
					case u < 0.97:
						j := int(r.Float64() * float64(len(out)))
						p := out[j]
						out = append(out[:j], out[j+1:]...)
						p.real.Cancel()
						m.cancel(p.model)
						reported = append(reported, p)
						what = "cancel"
					default: // a second report on a reported ticket
						if len(reported) == 0 {
							continue
						}
						p := &reported[int(r.Float64()*float64(len(reported)))]
						p.real.Done(now, false)
						m.done(p.model, now, false)
						what = "report again"
					}
					if got, want := b.Snapshot(), m.snapshot(); got != want {
						t.Fatalf("step %d (%s) at %v:\n got %+v\nwant %+v", i, what, now, got, want)
					}
					if len(reported) > 64 {
						reported = reported[32:]
					}
				}
				if m.gen < 10 {
					t.Fatalf("only %d generations: the run did not exercise the state machine", m.gen)
				}
			})
		}
	}
}

// Every short sequence of sequential calls — success or failure, after a
// pause of 0, 2.5 or 5 seconds, lasting 0 or 2 seconds — gives the
// reference model's states and counts after every call, for a count and a
// time window.
func TestExhaustiveWindows(t *testing.T) {
	type symbol struct {
		pause, dur float64
		ok         bool
	}
	var alphabet []symbol
	for _, p := range []float64{0, 2.5, 5} {
		for _, d := range []float64{0, 2} {
			alphabet = append(alphabet, symbol{p, d, true}, symbol{p, d, false})
		}
	}
	for _, c := range []struct {
		cfg    Config
		length int
	}{
		{Config{Window: CountWindow, WindowCalls: 3, MinCalls: 2, FailureRate: 0.5, Trials: 2, Recovery: 5,
			RecoveryMultiplier: 2, MaxRecovery: 10}, 4},
		{Config{Window: CountWindow, WindowCalls: 2, MinCalls: 2, FailureRate: 1, SlowCall: 2, SlowCallRate: 0.5, Trials: 1,
			Recovery: 5, RecoveryMultiplier: 1, MaxRecovery: 5}, 4},
		{Config{Window: TimeWindow, WindowSeconds: 5, BucketSeconds: 2.5, MinCalls: 2, FailureRate: 0.5, SlowCall: 2,
			SlowCallRate: 1, Trials: 2, Recovery: 5, RecoveryMultiplier: 1.5, MaxRecovery: 9}, 4},
		{Config{Window: CountWindow, WindowCalls: 2, MinCalls: 1, FailureRate: 1, SlowCall: 2, SlowCallRate: 1, Trials: 2,
			TrialsInARow: true, Recovery: 5, RecoveryMultiplier: 1, MaxRecovery: 5}, 5},
	} {
		total := 1
		for i := 0; i < c.length; i++ {
			total *= len(alphabet)
		}
		seq := make([]int, c.length)
		for code := 0; code < total; code++ {
			x := code
			for i := range seq {
				seq[i], x = x%len(alphabet), x/len(alphabet)
			}
			b := mustNew(t, c.cfg)
			m := newRef(c.cfg)
			now := 0.0
			for i, k := range seq {
				s := alphabet[k]
				now += s.pause
				tk, err := b.Allow(now)
				mt, ok := m.allow(now)
				if (err == nil) != ok {
					t.Fatalf("%v, sequence %v, step %d: Allow error %v, model allows %v", c.cfg.Window, seq[:i+1], i, err, ok)
				}
				if ok {
					tk.Done(now+s.dur, s.ok)
					m.done(mt, now+s.dur, s.ok)
				}
				if got, want := b.Snapshot(), m.snapshot(); got != want {
					t.Fatalf("%v, sequence %v, step %d at %v:\n got %+v\nwant %+v", c.cfg.Window, seq[:i+1], i, now, got, want)
				}
			}
		}
	}
}

package sim

import (
	"fmt"
	"math"
	"time"

	"github.com/spillwayhq/spillway/retry"
	"github.com/spillwayhq/spillway/rng"
)

// DipPolicy is the clients' retry policy in PredictDip.
type DipPolicy int

const (
	// Immediate retries a failed attempt at once, up to MaxRetries times:
	// a timed-out one at its timeout (Timeout after it was sent, as the
	// seed's "immediate retry"), a 503 as it arrives. The server works on
	// requests whose client left (no HonorCancel).
	Immediate DipPolicy = iota
	// BudgetDropExpired retries after full-jitter backoff (Backoff), each
	// retry paid from a retry.Budget (Budget), and the server drops the
	// work of clients that left (HonorCancel): the seed's "backoff +
	// jitter + budget, server drops expired".
	BudgetDropExpired
)

func (p DipPolicy) String() string {
	switch p {
	case Immediate:
		return "immediate"
	case BudgetDropExpired:
		return "budget-drop-expired"
	}
	return fmt.Sprintf("DipPolicy(%d)", int(p))
}

// DipModel is the demo's capacity dip for PredictDip: new calls at NewRate
// (Poisson) to a backend of Workers workers (exponential service of mean
// Service, a FIFO queue of Queue) that has DipWorkers during [DipFrom,
// DipTo), with the clients retrying by Policy, run to End.
type DipModel struct {
	Seed       uint32  // arrivals from rng.New(Seed); service times and jitter from a second stream
	NewRate    float64 // new calls per second, > 0 (NewRate × End at most 2e6)
	Workers    int     // at least 1
	Service    time.Duration
	Queue      int // backend FIFO bound (0: none waits); beyond it 503
	DipWorkers int // workers during the dip, 0 or more

	DipFrom, DipTo, End time.Duration // 0 ≤ DipFrom < DipTo ≤ End; End at most 10 h

	Timeout    time.Duration // per attempt, from its send, > 0
	MaxRetries int           // retries per call at most, 0 to 10
	Policy     DipPolicy
	// Budget is BudgetDropExpired's retry budget (zero: the seed's, ratio
	// 0.1, max 10); Backoff its backoff (zero: the seed's, full jitter
	// with base 0.5 s and a cap that never binds).
	Budget  retry.BudgetConfig
	Backoff retry.Backoff

	// LoadFrom, LoadTo are the window of DipResult.LoadAfter; both 0
	// means [DipTo, End).
	LoadFrom, LoadTo time.Duration
	// Bin is the width of the per-second series' bins (0: 1 s); Window
	// the recovery's smoothing window, a whole number of bins (0: 5 s).
	Bin, Window time.Duration
}

// DipResult is PredictDip's prediction. The series have one value per
// bin, as a rate per second; an attempt counts in the bin it was sent in,
// a good call in the bin its successful attempt was sent in (as the seed
// and package loadgen count them).
type DipResult struct {
	Seconds  []float64 // each bin's start, seconds
	Attempts []float64 // attempts sent per second (new calls and retries)
	Good     []float64 // calls answered 200 within Timeout of their attempt's send, per second
	NewCalls []float64 // new calls per second
	// LoadInDip and LoadAfter are the mean attempts per second sent in
	// [DipFrom, DipTo) and in [LoadFrom, LoadTo).
	LoadInDip, LoadAfter float64
	// Recovery is the seconds after DipTo (a whole number of bins) from
	// which every Window-long run of bins up to End has goodput at least
	// 90% of the new calls that arrived in it (NewRate's Poisson arrivals,
	// so per-window noise does not count as a relapse); −1 if no such
	// instant leaves a whole window before End.
	Recovery float64
}

// PredictDip runs m. It is the retry-storm scenario's model (Poisson new
// calls, a per-attempt timeout, retries by the library's retry.Budget and
// retry.Backoff) on package backend's server with Workers workers
// (predServer), event-driven: an attempt fails at its timeout, or at once
// when the queue is full (503), and the retry is decided then —
// Budget.TryRetry at the failure's instant, not at the send as the seed's
// event loop does.
func PredictDip(m DipModel) (DipResult, error) {
	if err := m.defaults(); err != nil {
		return DipResult{}, err
	}
	s, err := newDipSim(&m)
	if err != nil {
		return DipResult{}, err
	}
	s.run()
	return s.result(), nil
}

// Bounds that keep PredictDip's memory and time small.
const (
	dipMaxEnd      = 36000 // seconds
	dipMaxArrivals = 2e6   // new calls, NewRate × End
	dipMaxBins     = 1e6
	dipSalt        = 0x9e3779b9 // the service and jitter stream: rng.New(Seed ^ dipSalt)
)

// defaults fills in m's zero fields and checks it.
func (m *DipModel) defaults() error {
	if m.Bin == 0 {
		m.Bin = time.Second
	}
	if m.Window == 0 {
		m.Window = 5 * time.Second
	}
	if m.LoadFrom == 0 && m.LoadTo == 0 {
		m.LoadFrom, m.LoadTo = m.DipTo, m.End
	}
	if m.Backoff == (retry.Backoff{}) && m.MaxRetries >= 0 && m.MaxRetries <= retryStormMaxRetries {
		// A cap of Base·2^MaxRetries never binds: the attempt number is at most MaxRetries.
		m.Backoff = retry.Backoff{Base: retryStormBackoffBase, Cap: math.Ldexp(retryStormBackoffBase, m.MaxRetries)}
	}
	end := m.End.Seconds()
	switch {
	case !(m.NewRate > 0) || m.NewRate*end > dipMaxArrivals:
		return fmt.Errorf("%w: NewRate %v, want above 0 and NewRate × End at most %v calls", ErrModel, m.NewRate, dipMaxArrivals)
	case m.Workers < 1 || m.DipWorkers < 0:
		return fmt.Errorf("%w: Workers %d, DipWorkers %d, want at least 1 and at least 0", ErrModel, m.Workers, m.DipWorkers)
	case m.Service <= 0 || m.Queue < 0:
		return fmt.Errorf("%w: Service %v, Queue %d, want more than 0 and at least 0", ErrModel, m.Service, m.Queue)
	case m.End <= 0 || end > dipMaxEnd:
		return fmt.Errorf("%w: End %v, want above 0 and at most %d s", ErrModel, m.End, dipMaxEnd)
	case m.DipFrom < 0 || m.DipTo <= m.DipFrom || m.DipTo > m.End:
		return fmt.Errorf("%w: dip [%v, %v), want 0 ≤ DipFrom < DipTo ≤ End", ErrModel, m.DipFrom, m.DipTo)
	case m.Timeout <= 0:
		return fmt.Errorf("%w: Timeout %v, want more than 0", ErrModel, m.Timeout)
	case m.MaxRetries < 0 || m.MaxRetries > retryStormMaxRetries:
		return fmt.Errorf("%w: MaxRetries %d, want 0 to %d", ErrModel, m.MaxRetries, retryStormMaxRetries)
	case m.Policy != Immediate && m.Policy != BudgetDropExpired:
		return fmt.Errorf("%w: unknown Policy %v", ErrModel, m.Policy)
	case m.LoadFrom < 0 || m.LoadTo <= m.LoadFrom || m.LoadTo > m.End:
		return fmt.Errorf("%w: load window [%v, %v), want 0 ≤ LoadFrom < LoadTo ≤ End", ErrModel, m.LoadFrom, m.LoadTo)
	case m.Bin < 0 || end/m.Bin.Seconds() > dipMaxBins:
		return fmt.Errorf("%w: Bin %v, want above 0 and End / Bin at most %v bins", ErrModel, m.Bin, dipMaxBins)
	case m.Window < m.Bin:
		return fmt.Errorf("%w: Window %v, want at least Bin %v", ErrModel, m.Window, m.Bin)
	}
	if err := m.Budget.Validate(); err != nil {
		return fmt.Errorf("%w: Budget: %v", ErrModel, err)
	}
	if err := m.Backoff.Validate(); err != nil {
		return fmt.Errorf("%w: Backoff: %v", ErrModel, err)
	}
	return nil
}

// dipSim is one PredictDip run.
type dipSim struct {
	m                *DipModel
	end, timeout     float64
	rate, bin        float64
	loadFrom, loadTo float64

	arr    *rng.Mulberry32 // new calls' arrivals
	src    *rng.Mulberry32 // service times and jitter
	ev     *predEvents
	srv    *predServer
	budget *retry.Budget // nil: Immediate

	att, good, calls []float64 // counts per bin
	dipN, loadN      int       // attempts sent in the dip, in [loadFrom, loadTo)
}

func newDipSim(m *DipModel) (*dipSim, error) {
	s := &dipSim{m: m, end: m.End.Seconds(), timeout: m.Timeout.Seconds(), rate: m.NewRate, bin: m.Bin.Seconds(),
		loadFrom: m.LoadFrom.Seconds(), loadTo: m.LoadTo.Seconds(),
		arr: rng.New(m.Seed), src: rng.New(m.Seed ^ dipSalt), ev: &predEvents{}}
	nb := int(math.Ceil(s.end / s.bin))
	s.att, s.good, s.calls = make([]float64, nb), make([]float64, nb), make([]float64, nb)
	from, to := m.DipFrom.Seconds(), m.DipTo.Seconds()
	workers, dip := m.Workers, m.DipWorkers
	s.srv = &predServer{workers: func(now float64) int {
		if now >= from && now < to {
			return dip
		}
		return workers
	}, queueMax: m.Queue, honor: m.Policy == BudgetDropExpired, service: m.Service.Seconds(), src: s.src, ev: s.ev}
	if m.Policy == BudgetDropExpired {
		var err error
		if s.budget, err = retry.NewBudget(m.Budget); err != nil {
			return nil, fmt.Errorf("%w: Budget: %v", ErrModel, err)
		}
	}
	return s, nil
}

// run runs the sends before End and the answers and timeouts they lead to.
func (s *dipSim) run() {
	if t := s.arr.Exp(1 / s.rate); t < s.end {
		s.ev.push(t, predSend, nil)
	}
	for len(s.ev.h) > 0 { // sends are all before End; answers to them may come after
		e := s.ev.h.pop()
		switch e.kind {
		case predSend:
			if e.job == nil {
				s.newCall(e.at)
			} else {
				s.send(e.job, e.at)
			}
		case predFinish:
			if j := e.job; s.srv.finished(e) && !j.answered {
				j.answered = true
				s.good[s.binOf(j.sent)]++
			}
		case predDeadline:
			if j := e.job; !j.answered {
				j.answered = true
				s.srv.cancel(j, e.at)
				s.fail(j, e.at)
			}
		}
	}
}

func (s *dipSim) binOf(t float64) int { return min(int(t/s.bin), len(s.att)-1) }

// newCall is a new call at t; the next one is drawn.
func (s *dipSim) newCall(t float64) {
	s.calls[s.binOf(t)]++
	if s.budget != nil {
		s.budget.RecordRequest(t)
	}
	s.send(&predJob{n: 1}, t)
	if next := t + s.arr.Exp(1/s.rate); next < s.end {
		s.ev.push(next, predSend, nil)
	}
}

// send sends attempt j at now; a full queue fails it at once.
func (s *dipSim) send(j *predJob, now float64) {
	j.sent = now
	s.att[s.binOf(now)]++
	if now >= s.loadFrom && now < s.loadTo {
		s.loadN++
	}
	if now >= s.m.DipFrom.Seconds() && now < s.m.DipTo.Seconds() {
		s.dipN++
	}
	s.ev.push(now+s.timeout, predDeadline, j)
	if !s.srv.arrive(j, now) {
		j.answered = true
		s.fail(j, now)
	}
}

// fail decides, at now, whether failed attempt j is retried, and when.
func (s *dipSim) fail(j *predJob, now float64) {
	if j.n > s.m.MaxRetries || (s.budget != nil && !s.budget.TryRetry(now)) {
		return // the call gives up
	}
	delay := 0.0
	if s.m.Policy == BudgetDropExpired {
		delay = s.m.Backoff.Delay(j.n, 0, s.src)
	}
	if at := now + delay; at < s.end {
		s.ev.push(at, predSend, &predJob{n: j.n + 1})
	}
}

func (s *dipSim) result() DipResult {
	nb := len(s.att)
	r := DipResult{Seconds: make([]float64, nb), Attempts: make([]float64, nb), Good: make([]float64, nb),
		NewCalls: make([]float64, nb), LoadAfter: float64(s.loadN) / (s.loadTo - s.loadFrom),
		LoadInDip: float64(s.dipN) / (s.m.DipTo - s.m.DipFrom).Seconds()}
	for i := range nb {
		lo := float64(i) * s.bin
		width := math.Min(s.bin, s.end-lo)
		r.Seconds[i] = lo
		r.Attempts[i], r.Good[i], r.NewCalls[i] = s.att[i]/width, s.good[i]/width, s.calls[i]/width
	}
	r.Recovery = s.recovery()
	return r
}

// recovery is DipResult.Recovery, from the per-bin counts.
func (s *dipSim) recovery() float64 {
	nb := len(s.att)
	w := max(1, int(math.Floor(s.m.Window.Seconds()/s.bin+1e-9)))
	dipTo := s.m.DipTo.Seconds()
	first := int(math.Ceil(dipTo/s.bin - 1e-9))
	from := first // the first window start from which no window fails
	for k := nb - w; k >= first; k-- {
		if Sum(s.good[k:k+w]) < 0.9*Sum(s.calls[k:k+w]) {
			from = k + 1
			break
		}
	}
	if from > nb-w {
		return -1
	}
	return math.Max(0, float64(from)*s.bin-dipTo)
}

package sim

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/spillwayhq/spillway/config"
	"github.com/spillwayhq/spillway/limit"
	"github.com/spillwayhq/spillway/rng"
	"github.com/spillwayhq/spillway/shed"
)

// ErrModel is wrapped by every error PredictOverload and PredictDip
// return for a model they cannot run.
var ErrModel = errors.New("sim: invalid model")

// OverloadModel is the demo's overload experiment for PredictOverload:
// Poisson arrivals at each of Loads, through a gateway cluster's admission
// (or none), to a backend like package backend's.
type OverloadModel struct {
	// Seed seeds the arrivals, classes and service times, drawn from one
	// stream in the seed's order (per arrival its class, then its service
	// time if the backend takes it, then the next arrival: as with the seed,
	// the arrivals differ between admissions once one refuses a request
	// another takes). Every load level restarts from it. Runs are
	// deterministic for a seed.
	Seed uint32
	// Workers is the backend's capacity in requests worked on at once, at
	// least 1; Service their mean service time (exponential), > 0.
	// Capacity = Workers / Service per second.
	Workers int
	Service time.Duration
	// Queue is how many requests may wait for a worker, FIFO; more are
	// answered 503. 0: none waits.
	Queue int
	// HonorCancel: a request whose client left leaves the backend's
	// queue, or frees its worker at once. Off, it is worked on anyway.
	HonorCancel bool
	// Timeout is the client's timeout, > 0, from the intended send: a
	// later answer is wasted work, and the client leaves then.
	Timeout time.Duration
	// Critical is the share of requests of class critical, in [0, 1]; the
	// rest are sheddable.
	Critical float64
	// Loads are the offered loads, requests per second (1 to 20 levels,
	// each above 0; load × Duration at most 2e6 arrivals). Each level runs
	// from an empty system: a fresh backend and a fresh Limiter.
	Loads []float64
	// Duration is how long each level sends, > 0.
	Duration time.Duration
	// Admission is the cluster's admission from the gateway's config (as
	// config.Load fills it in, defaults included), built into a
	// limit.Limiter exactly as the gateway builds it; nil: no protection.
	Admission *config.Admission
}

// OverloadRow is one load level's prediction. Counts are by arrival: an
// arrival in [0, Duration) counts once its client has its answer or has
// left, as package loadgen counts a step.
type OverloadRow struct {
	Load       float64       // asked, requests per second
	Offered    int           // arrivals
	Good       int           // answered 200 within Timeout of the send
	GoodPerSec float64       // Good per second of Duration
	P99        time.Duration // of the good answers' latencies (nearest rank); 0 if none
	// Rejected is the arrivals answered 503: refused by admission (its
	// limit, queue full or expired), or by the backend's full queue
	// (RejectedBackend of them).
	Rejected, RejectedBackend int
	TimedOut                  int     // no answer within Timeout: the client left
	CriticalOK                float64 // share of the critical arrivals that were good, in [0, 1]; NaN with none
}

// PredictOverload runs m at each of its loads and returns one row per
// load, in order.
//
// The run is event-driven under virtual time. A request arrives at the
// gateway; with an Admission it asks the Limiter for a place by its class
// (limit.Limiter.Admit, then Enqueue when the Limiter has a queue, the
// waiter given up at its max wait with ReasonExpired, or when its client
// leaves with ReasonCancelled, as admit.Gate.Enter does; requests carry no
// deadline and no client key, so deadlines and fairness never refuse). An
// admitted request goes to the backend (see predServer). Its place ends as
// the gateway's proxy ends it: Success with the backend's answer, Dropped
// when the backend answers 503 or when the client leaves at its timeout
// (the proxy sees the client gone; a Dropped sample shrinks an adaptive
// limit, and the backend may still be working on the request). A refusal
// is a 503 at once. Brownout and fairness are not simulated; shadow mode is
// (refusals counted by the Limiter, requests let through).
func PredictOverload(m OverloadModel) ([]OverloadRow, error) {
	if err := m.check(); err != nil {
		return nil, err
	}
	rows := make([]OverloadRow, 0, len(m.Loads))
	for _, load := range m.Loads {
		row, err := predictLevel(&m, load)
		if err != nil {
			return nil, err
		}
		rows = append(rows, row)
	}
	return rows, nil
}

func (m *OverloadModel) check() error {
	dur := m.Duration.Seconds()
	switch {
	case m.Workers < 1:
		return fmt.Errorf("%w: Workers %d, want at least 1", ErrModel, m.Workers)
	case m.Service <= 0:
		return fmt.Errorf("%w: Service %v, want more than 0", ErrModel, m.Service)
	case m.Queue < 0:
		return fmt.Errorf("%w: Queue %d, want 0 or more", ErrModel, m.Queue)
	case m.Timeout <= 0:
		return fmt.Errorf("%w: Timeout %v, want more than 0", ErrModel, m.Timeout)
	case !(m.Critical >= 0 && m.Critical <= 1):
		return fmt.Errorf("%w: Critical %v, want a share in [0, 1]", ErrModel, m.Critical)
	case m.Duration <= 0:
		return fmt.Errorf("%w: Duration %v, want more than 0", ErrModel, m.Duration)
	case len(m.Loads) < 1 || len(m.Loads) > overloadMaxLoads:
		return fmt.Errorf("%w: %d loads, want 1 to %d", ErrModel, len(m.Loads), overloadMaxLoads)
	}
	for _, l := range m.Loads {
		if !(l > 0) || l*dur > overloadMaxArrivals {
			return fmt.Errorf("%w: load %v, want above 0 and load × Duration at most %v arrivals", ErrModel, l, overloadMaxArrivals)
		}
	}
	return nil
}

// overloadSim is one load level's run.
type overloadSim struct {
	timeout, dur, load, critical float64

	src  *rng.Mulberry32
	ev   *predEvents
	srv  *predServer
	gate *predGate // nil: no admission

	row          OverloadRow
	crit, critOK int
	lat          []float64 // the good answers' latencies, seconds
	open         int       // arrivals whose client still waits
	sending      bool      // more arrivals to come
}

func predictLevel(m *OverloadModel, load float64) (OverloadRow, error) {
	s := &overloadSim{timeout: m.Timeout.Seconds(), dur: m.Duration.Seconds(), load: load, critical: m.Critical,
		src: rng.New(m.Seed), ev: &predEvents{}, row: OverloadRow{Load: load}}
	workers := m.Workers
	s.srv = &predServer{workers: func(float64) int { return workers }, queueMax: m.Queue, honor: m.HonorCancel,
		service: m.Service.Seconds(), src: s.src, ev: s.ev}
	if m.Admission != nil {
		var err error
		if s.gate, err = newPredGate(m.Admission, s.ev); err != nil {
			return OverloadRow{}, err
		}
	}
	if t := s.src.Exp(1 / load); t < s.dur {
		s.ev.push(t, predSend, nil)
		s.sending = true
	}
	for len(s.ev.h) > 0 && (s.sending || s.open > 0) {
		s.step(s.ev.h.pop())
	}
	return s.result(), nil
}

// step runs one event, then hands the gateway's newly settled waiters on.
func (s *overloadSim) step(e predEvent) {
	switch e.kind {
	case predSend:
		s.arrive(e.at)
	case predFinish:
		s.finish(e)
	case predDeadline:
		s.leave(e.job, e.at)
	case predExpire:
		if j := s.gate.giveUp(e.w, e.at, limit.ReasonExpired); j != nil {
			s.refuse(j, e.at)
		}
	}
	if s.gate == nil {
		return
	}
	for j := s.gate.take(); j != nil; j = s.gate.take() {
		switch {
		case j.answered: // granted as its client left (cannot happen: the client's leave cancels first)
			s.gate.done(j, e.at, limit.Ignore)
		case j.why == limit.Admitted:
			s.toServer(j, e.at)
		default:
			s.refuse(j, e.at)
		}
	}
}

// arrive sends a request at t, drawing (as the seed's overload run does)
// its class, then its service time when the backend takes it, then the
// next arrival.
func (s *overloadSim) arrive(t float64) {
	j := &predJob{sent: t, class: shed.Sheddable}
	s.row.Offered++
	s.open++
	if s.src.Float64() < s.critical {
		j.class = shed.Critical
		s.crit++
	}
	s.ev.push(t+s.timeout, predDeadline, j)
	switch goOn, why := s.admit(j, t); {
	case goOn:
		s.toServer(j, t)
	case why != limit.Admitted: // refused at once (Admitted: it waits in the queue)
		s.refuse(j, t)
	}
	if next := t + s.src.Exp(1/s.load); next < s.dur {
		s.ev.push(next, predSend, nil)
	} else {
		s.sending = false
	}
}

func (s *overloadSim) admit(j *predJob, now float64) (goOn bool, why limit.Reason) {
	if s.gate == nil {
		return true, limit.Admitted
	}
	return s.gate.enter(j, now)
}

// toServer forwards j to the backend at now; a full queue answers 503.
func (s *overloadSim) toServer(j *predJob, now float64) {
	if !s.srv.arrive(j, now) {
		s.row.RejectedBackend++
		s.refuse(j, now)
	}
}

// refuse answers j 503 at now; its place, if any, ends Dropped.
func (s *overloadSim) refuse(j *predJob, now float64) {
	if !s.settle(j) {
		return
	}
	s.row.Rejected++
	if s.gate != nil {
		s.gate.done(j, now, limit.Dropped)
	}
}

// finish is the backend's answer; good unless the client has left.
func (s *overloadSim) finish(e predEvent) {
	j := e.job
	if !s.srv.finished(e) || !s.settle(j) {
		return
	}
	s.lat = append(s.lat, e.at-j.sent)
	if j.class == shed.Critical {
		s.critOK++
	}
	if s.gate != nil {
		s.gate.done(j, e.at, limit.Success)
	}
}

// leave is j's client giving up at its timeout: a waiter is withdrawn,
// the backend told (it lets the job go only with HonorCancel) and the
// place ended Dropped.
func (s *overloadSim) leave(j *predJob, now float64) {
	if !s.settle(j) {
		return
	}
	s.row.TimedOut++
	if j.w != nil {
		s.gate.giveUp(j.w, now, limit.ReasonCancelled)
		return
	}
	s.srv.cancel(j, now)
	if s.gate != nil {
		s.gate.done(j, now, limit.Dropped)
	}
}

// settle marks j's client done (answered or gone); false if it already was.
func (s *overloadSim) settle(j *predJob) bool {
	if j.answered {
		return false
	}
	j.answered = true
	s.open--
	return true
}

func (s *overloadSim) result() OverloadRow {
	r := s.row
	slices.Sort(s.lat)
	r.Good = len(s.lat)
	r.GoodPerSec = float64(r.Good) / s.dur
	r.P99 = time.Duration(math.Round(NearestRank(s.lat, 0.99) * 1e9))
	r.CriticalOK = math.NaN()
	if s.crit > 0 {
		r.CriticalOK = float64(s.critOK) / float64(s.crit)
	}
	return r
}

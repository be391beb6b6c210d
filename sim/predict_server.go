package sim

import (
	"github.com/spillwayhq/spillway/limit"
	"github.com/spillwayhq/spillway/rng"
	"github.com/spillwayhq/spillway/shed"
)

// The server and event queue the predictions (PredictOverload, PredictDip)
// run on: package backend's behaviour under virtual time.

// predKind is an event's kind; at equal instants a lower kind runs first,
// so an answer due exactly at the client's deadline is in time (as the
// seed counts it: latency ≤ timeout), and places freed at t are free for
// an arrival at t (as the seed releases its tokens).
type predKind uint8

const (
	predFinish   predKind = iota // the server finished a job
	predExpire                   // a gateway waiter's max wait ran out
	predDeadline                 // the client's timeout for a job ran out
	predSend                     // a new request, or a retry, is sent
)

// predEvent is one event of a prediction's run.
type predEvent struct {
	at   float64
	kind predKind
	seq  uint64 // insertion number: ties broken in insertion order
	job  *predJob
	w    *adaptiveWaiter // predExpire's waiter
}

func (e predEvent) before(o predEvent) bool {
	if e.at != o.at {
		return e.at < o.at
	}
	if e.kind != o.kind {
		return e.kind < o.kind
	}
	return e.seq < o.seq
}

// predEvents is a prediction's event queue.
type predEvents struct {
	h   minHeap[predEvent]
	seq uint64
}

// push adds an event for job j and returns its insertion number.
func (q *predEvents) push(at float64, kind predKind, j *predJob) uint64 {
	return q.add(predEvent{at: at, kind: kind, job: j})
}

// add adds e, numbered in insertion order, and returns its number.
func (q *predEvents) add(e predEvent) uint64 {
	q.seq++
	e.seq = q.seq
	q.h.push(e)
	return q.seq
}

// jobState is where a job is on the server.
type jobState uint8

const (
	jobNew     jobState = iota // not (yet) on the server
	jobQueued                  // waiting for a worker
	jobWorking                 // held by a worker
	jobOff                     // finished, refused, or left (its client went, with HonorCancel)
)

// predJob is one request (one attempt, in PredictDip) on its way through
// the gateway and the server.
type predJob struct {
	sent      float64 // when the client sent it: its timeout runs from here
	service   float64 // drawn when the server takes it
	state     jobState
	finishSeq uint64 // its finish event, to skip one made stale by a cancel
	answered  bool   // the client has its answer (or a refusal), or has left

	// PredictOverload: the request's class and its admission: its place,
	// its waiter while it waits in the gateway's queue, how that ended.
	class shed.Class
	tk    *limit.Ticket // nil: no place held (no admission, or ended)
	slot  limit.Ticket  // the place when admitted at once
	w     *adaptiveWaiter
	why   limit.Reason

	// PredictDip: the attempt's number (1 for a new call).
	n int

	// SimulateConfig: the gateway request the job is part of.
	req *cfgReq
	ep  *cfgEndpoint // the endpoint of an upstream attempt
}

// predServer is package backend's Backend: at most workers(now) jobs
// worked on at once, each for an exponential service time of mean service
// drawn when the server takes the job; up to queueMax more wait in a FIFO
// queue, and beyond that the job is refused (503). Like the backend it sets
// no timer for a change in workers: queued jobs start at the next arrival,
// completion or cancel. With honor (HonorCancel) a job whose client left
// leaves the queue, or frees its worker at once; without, it is worked on
// anyway (wasted work).
type predServer struct {
	workers  func(now float64) int
	queueMax int
	honor    bool
	service  float64                    // mean, seconds
	draw     func(mean float64) float64 // a service time; nil: exponential from src
	src      *rng.Mulberry32
	ev       *predEvents

	working int
	queued  int        // waiting jobs, those that left excluded
	queue   []*predJob // FIFO from head; jobs that left stay until popped
	head    int
}

// arrive offers j to the server at now; false when it is refused (the
// queue is full).
func (s *predServer) arrive(j *predJob, now float64) bool {
	s.dispatch(now)
	switch {
	case s.queued == 0 && s.working < s.workers(now):
		j.service = s.serviceTime()
		s.start(j, now)
	case s.queued < s.queueMax:
		j.service = s.serviceTime()
		j.state = jobQueued
		s.push(j)
		s.queued++
	default:
		j.state = jobOff
		return false
	}
	return true
}

func (s *predServer) serviceTime() float64 {
	if s.draw != nil {
		return s.draw(s.service)
	}
	return s.src.Exp(s.service)
}

func (s *predServer) start(j *predJob, now float64) {
	s.working++
	j.state = jobWorking
	j.finishSeq = s.ev.push(now+j.service, predFinish, j)
}

// finished reports whether e, a finish event, is current (its job was not
// cancelled since) and if so frees its worker.
func (s *predServer) finished(e predEvent) bool {
	j := e.job
	if j.state != jobWorking || j.finishSeq != e.seq {
		return false
	}
	j.state = jobOff
	s.working--
	s.dispatch(e.at)
	return true
}

// cancel tells the server that j's client left at now; only a server that
// honours it (HonorCancel) lets the job go.
func (s *predServer) cancel(j *predJob, now float64) {
	if !s.honor {
		return
	}
	switch j.state {
	case jobQueued:
		s.queued--
	case jobWorking:
		s.working--
	default:
		return
	}
	j.state = jobOff
	s.dispatch(now)
}

// dispatch gives free workers to the oldest waiting jobs.
func (s *predServer) dispatch(now float64) {
	for s.head < len(s.queue) && s.working < s.workers(now) {
		j := s.queue[s.head]
		s.queue[s.head] = nil
		s.head++
		if j.state != jobQueued {
			continue // left while waiting
		}
		s.queued--
		s.start(j, now)
	}
}

// push appends j to the queue, reclaiming the popped front when it is most
// of the slice.
func (s *predServer) push(j *predJob) {
	if s.head >= 1024 && 2*s.head >= len(s.queue) {
		n := copy(s.queue, s.queue[s.head:])
		clear(s.queue[n:])
		s.queue, s.head = s.queue[:n], 0
	}
	s.queue = append(s.queue, j)
}

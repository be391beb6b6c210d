package sim

import (
	"fmt"

	"github.com/spillwayhq/spillway/config"
	"github.com/spillwayhq/spillway/limit"
	"github.com/spillwayhq/spillway/shed"
)

// predGate is a cluster's admission as the gateway runs it (gateway's
// gateFor, chain's Guard, admit.Gate.Enter), under virtual time: the
// limit.Limiter built from the config exactly as the gateway builds it,
// asked per request by class; with a queue, the waiters are followed as
// the adaptive scenario follows them (see adaptiveSim): settled inside the
// Limiter's Enqueue and Done calls, found by their Ready channels.
type predGate struct {
	lim    *limit.Limiter
	shadow bool
	ev     *predEvents

	// The queue's give-up: admit.Gate.Enter waits MaxWait (then cancels
	// with ReasonExpired); the client leaving first cancels with
	// ReasonCancelled at its deadline event.
	maxWait float64
	pending [shed.MaxClasses]adaptivePending
	jobs    map[*adaptiveWaiter]*predJob // the queued waiters' requests (at most the queues' bound)
	ready   []*predJob                   // settled since the caller last looked, in order (why set)
}

// newPredGate builds a's Limiter as gateway.gateFor does:
// a.Algorithm(), then limit.NewLimiter(alg, a.LimiterConfig()).
func newPredGate(a *config.Admission, ev *predEvents) (*predGate, error) {
	alg, err := a.Algorithm()
	if err != nil {
		return nil, fmt.Errorf("%w: Admission: %v", ErrModel, err)
	}
	lim, err := limit.NewLimiter(alg, a.LimiterConfig())
	if err != nil {
		return nil, fmt.Errorf("%w: Admission: %v", ErrModel, err)
	}
	g := &predGate{lim: lim, shadow: a.Shadow, ev: ev, maxWait: lim.MaxWait()}
	if lim.Queueing() {
		g.jobs = make(map[*adaptiveWaiter]*predJob)
	}
	return g, nil
}

// enter asks for a place for j at now, as chain's Guard.admit does (no
// deadline, no client: fairness never applies). It returns whether j may
// go on to the server now, and the refusal otherwise: ReasonLimit,
// ReasonQueueFull, …, or Admitted when j waits in the queue (its outcome
// comes through take).
func (g *predGate) enter(j *predJob, now float64) (goOn bool, why limit.Reason) {
	r := limit.Request{Class: j.class, Cost: 1}
	j.slot, why = g.lim.Admit(now, r)
	switch {
	case why == limit.Admitted:
		j.tk = &j.slot
		return true, why
	case g.shadow: // counted, not refused
		return true, why
	case why != limit.ReasonLimit || !g.lim.Queueing():
		return false, why
	}
	w := &adaptiveWaiter{w: limit.NewWaiter(), at: now, class: j.class}
	if why = g.lim.Enqueue(now, r, w.w); why != limit.Admitted {
		return false, why
	}
	g.pending[w.class].push(w)
	g.jobs[w], j.w = j, w
	g.ev.add(predEvent{at: now + g.maxWait, kind: predExpire, w: w})
	g.settled(now)
	return false, limit.Admitted
}

// settled collects the waiters the Limiter has just settled (granted or
// refused); call it after every Enqueue and Done.
func (g *predGate) settled(now float64) {
	if !g.lim.Queueing() {
		return
	}
	for c := range g.lim.Classes() {
		g.pending[c].drain(func(w *adaptiveWaiter) {
			j := g.jobs[w]
			delete(g.jobs, w)
			j.w, j.why = nil, w.w.Reason()
			if j.why == limit.Admitted {
				j.tk = w.w.Ticket()
			}
			g.ready = append(g.ready, j)
		})
	}
}

// take returns the oldest settled waiter's request, or nil; its why is
// Admitted (it holds a place and goes on to the server) or its refusal.
func (g *predGate) take() *predJob {
	if len(g.ready) == 0 {
		return nil
	}
	j := g.ready[0]
	g.ready[0] = nil
	g.ready = g.ready[1:]
	if len(g.ready) == 0 {
		g.ready = g.ready[:0:0]
	}
	return j
}

// giveUp withdraws waiter w at now, as admit.Gate.Enter does when its
// timer (ReasonExpired) or the client's context (ReasonCancelled) ends the
// wait first; it returns w's request when the withdrawal won (the request
// is refused with why, set on it), nil when the Limiter settled w before
// (take returns it, or already did).
func (g *predGate) giveUp(w *adaptiveWaiter, now float64, why limit.Reason) *predJob {
	if w.settled || w.gaveUp {
		return nil
	}
	if !g.lim.Cancel(w.w, now, why) {
		return nil // settled in an Enqueue or Done already followed by settled
	}
	w.gaveUp = true
	j := g.jobs[w]
	delete(g.jobs, w)
	j.w, j.why = nil, why
	return j
}

// done ends j's place at now with outcome o (a no-op without one).
func (g *predGate) done(j *predJob, now float64, o limit.Outcome) {
	if j.tk == nil {
		return
	}
	j.tk.Done(now, o)
	j.tk = nil
	g.settled(now)
}

package loadgen

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// reasonHeader is the gateway's reason code on its own answers.
const reasonHeader = "Spillway-Reason"

// worker sends one call at a time. Workers live until the run ends.
type worker struct {
	r     *runner
	shard *shard
	draws *draws
	call  callState
}

// worker is a pool goroutine: it sends first, then whatever the scheduler
// hands it, until r.work is closed.
func (r *runner) worker(id int, first arrival) {
	defer r.wg.Done()
	w := &worker{r: r, shard: r.shards[id%len(r.shards)], draws: newDraws(len(r.mix.ranges))}
	w.handle(&first)
	for a := range r.work {
		w.handle(&a)
	}
}

func (w *worker) handle(a *arrival) {
	r := w.r
	now := r.since()
	if now-a.intended > r.cfg.Timeout {
		r.unsent(w.shard, a)
		return
	}
	r.inFlight.Add(1)
	o, cut := w.send(a, now)
	r.inFlight.Add(-1)
	if cut {
		r.steps[a.step].cut.Store(true)
		r.ended(a.step)
		return
	}
	r.finish(w.shard, a, &o)
}

// send makes arrival a's call, its first attempt at now; cut reports a call
// ended by the run stopping, which says nothing of the server.
func (w *worker) send(a *arrival, now time.Duration) (o outcome, cut bool) {
	r, st := w.r, &w.call
	*st = callState{intended: a.intended}
	ctx, cancel := context.WithDeadline(r.ctx, r.base.Add(a.intended+r.cfg.Deadline))
	defer cancel()
	ctx = context.WithValue(ctx, callKey{}, st)
	o = outcome{sent: true, lag: now - a.intended}
	req, err := r.mix.request(ctx, a, w.draws)
	if err != nil { // a variable made the URL invalid: the call fails here
		o.latency = r.since() - a.intended
		return o, false
	}
	r.steps[a.step].sent.Add(1)
	resp, err := r.rt.RoundTrip(req)
	o.retries = max(st.attempts-1, 0)
	if err != nil {
		if r.ctx.Err() != nil && errors.Is(err, context.Canceled) {
			return o, true
		}
		w.failed(&o, err)
		return o, false
	}
	resp.Body.Close() // read to its end by the attempt already
	end := st.end
	o.status = resp.StatusCode
	o.ok = resp.StatusCode >= 200 && resp.StatusCode < 300
	o.latency = end - a.intended
	from := a.intended
	if st.attempts > 1 {
		from = st.lastSend
	}
	o.good = o.ok && end-from <= r.cfg.Timeout
	o.reason = resp.Header.Get(reasonHeader)
	return o, false
}

// failed fills in o for a call that ended without an answer: a timeout
// counts as the time it was given up, at least Timeout (at most Deadline).
func (w *worker) failed(o *outcome, err error) {
	r, st := w.r, &w.call
	o.timeout = errors.Is(err, errAttemptTimeout) || errors.Is(err, context.DeadlineExceeded)
	switch {
	case o.timeout && st.timedOut:
		o.latency = st.gaveUp - st.intended
	case o.timeout:
		o.latency = r.cfg.Deadline // the call's deadline passed between attempts
	case st.attempts > 0:
		o.latency = st.end - st.intended
	default:
		o.latency = r.since() - st.intended
	}
	if o.timeout {
		o.latency = min(max(o.latency, r.cfg.Timeout), r.cfg.Deadline)
	}
}

var _ http.RoundTripper = (*attempts)(nil)

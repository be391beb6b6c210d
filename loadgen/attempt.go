package loadgen

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/spillwayhq/spillway/deadline"
)

// errAttemptTimeout ends an attempt that was not answered within Timeout
// while its call still had time: a transport error, not the caller's
// context ending, so client.DefaultRetryable retries it.
var errAttemptTimeout = errors.New("loadgen: attempt timed out")

// callKey carries a call's *callState in its request's context.
type callKey struct{}

// callState is what the attempts of one call report to the worker that
// sent it. The attempts of a call run one after the other on the worker's
// goroutine (no hedging), so it needs no lock.
type callState struct {
	intended time.Duration // since the run's base
	attempts int
	lastSend time.Duration // the latest attempt's send, since the base
	end      time.Duration // the latest attempt's end (body read), since the base
	timedOut bool          // the latest attempt was given up at its deadline
	gaveUp   time.Duration // that deadline, since the base
}

// attempts is the RoundTripper under client.Transport (or alone, with
// RetryNone): it gives each attempt its own timeout, sends it with its
// remaining time in Spillway-Timeout, reads and discards the whole body
// inside that timeout, and counts the attempt in the window it was sent in.
type attempts struct {
	next http.RoundTripper
	r    *runner
}

func (t *attempts) RoundTrip(req *http.Request) (*http.Response, error) {
	call := req.Context()
	st, _ := call.Value(callKey{}).(*callState)
	if st == nil {
		return nil, errors.New("loadgen: request without a call")
	}
	now := t.r.since()
	st.attempts++
	st.lastSend = now
	if now < t.r.end {
		t.r.steps[t.r.windowAt(now)].attempts.Add(1)
	} else {
		t.r.tail.Add(1) // a retry after the last step: in no step's window
	}
	// The first attempt's timeout runs from the intended send (latency is
	// measured from there); a retry's from its own send.
	due := now + t.r.cfg.Timeout
	if st.attempts == 1 {
		due = st.intended + t.r.cfg.Timeout
	}
	ctx := call // an attempt with the call's own deadline needs no timer of its own
	if due < st.intended+t.r.cfg.Deadline {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(call, t.r.base.Add(due))
		defer cancel()
	}
	resp, err := t.send(ctx, req, now)
	st.end = t.r.since()
	st.timedOut = false
	if err == nil {
		return resp, nil
	}
	switch {
	case call.Err() != nil: // the call's deadline, or the run stopping
		st.timedOut = errors.Is(call.Err(), context.DeadlineExceeded)
		st.gaveUp = st.intended + t.r.cfg.Deadline
		return nil, call.Err()
	case ctx.Err() != nil:
		st.timedOut = true
		st.gaveUp = due
		return nil, errAttemptTimeout
	}
	return nil, err
}

// send sends req on ctx with the time left as its Spillway-Timeout, and
// reads the whole body; the response returned has none left.
func (t *attempts) send(ctx context.Context, req *http.Request, now time.Duration) (*http.Response, error) {
	r := req.WithContext(ctx)
	r.Header = req.Header.Clone()
	if r.Header == nil {
		r.Header = make(http.Header, 1)
	}
	deadline.SetHeader(r.Header, ctx, t.r.base.Add(now), 0)
	resp, err := t.next.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	resp.Body = http.NoBody
	if err != nil {
		return nil, err
	}
	return resp, nil
}

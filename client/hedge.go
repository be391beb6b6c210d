package client

import (
	"context"
	"io"
	"math"
	"net/http"
	"time"

	"github.com/spillwayhq/spillway/clock"
)

// hedgeResult is one attempt's answer in a hedged call.
type hedgeResult struct {
	resp   *http.Response
	err    error
	cancel context.CancelFunc
	idx    int // which attempt: index into the call's cancel funcs
}

// hedged sends req, and, while no answer has come within the Hedger's
// delay, up to MaxHedges copies of it, each paid from the budget
// (Hedger.TryHedge); the first answer that is not retryable wins (or the
// last answer, when all are), the others are cancelled and their bodies
// closed. Each attempt goes through the breaker and the bulkhead like any
// other. The winner's context is cancelled when its body is closed.
func (t *Transport) hedged(ctx context.Context, req *http.Request, n int, now float64) (*http.Response, error) {
	delay := t.hedger.Delay(now)
	if math.IsInf(delay, 1) {
		return t.attempt(ctx, req, n, now)
	}
	results := make(chan hedgeResult, 1+t.hedger.MaxHedges())
	var cancels []context.CancelFunc // every attempt's; cancelling twice is harmless
	launch := func(r *http.Request) {
		actx, cancel := context.WithCancel(ctx)
		idx := len(cancels)
		cancels = append(cancels, cancel)
		r = r.WithContext(actx)
		go func() {
			resp, err := t.attempt(actx, r, n, t.clk.Now())
			results <- hedgeResult{resp, err, cancel, idx}
		}()
	}
	launch(req)
	out, hedges := 1, 0
	timer := time.NewTimer(clock.Duration(delay))
	defer timer.Stop()
	var last hedgeResult
	for {
		select {
		case res := <-results:
			out--
			if (res.err == nil && !t.retryable(res.resp, nil)) || out == 0 {
				if out > 0 { // the losers: stop them now, collect them in the background
					for i, c := range cancels {
						if i != res.idx {
							c()
						}
					}
					go drainHedges(results, out)
				}
				if res.resp != nil && res.resp.Body != nil {
					res.resp.Body = &cancelBody{ReadCloser: res.resp.Body, cancel: res.cancel}
				} else {
					res.cancel()
				}
				if last.cancel != nil {
					discard(last)
				}
				return res.resp, res.err
			}
			if last.cancel != nil {
				discard(last)
			}
			last = res // keep the latest failure in case nothing better comes
		case <-timer.C:
			if hedges < t.hedger.MaxHedges() && t.hedger.TryHedge(t.clk.Now()) {
				r, err := t.replay(ctx, req)
				if err != nil {
					continue
				}
				hedges++
				t.counters.Hedged()
				launch(r)
				out++
				timer.Reset(clock.Duration(delay))
			}
		}
	}
}

// replay returns a fresh copy of req with its body produced again.
func (t *Transport) replay(ctx context.Context, req *http.Request) (*http.Request, error) {
	r := req.Clone(ctx)
	if req.Body != nil && req.Body != http.NoBody {
		body, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		r.Body = body
	}
	return r, nil
}

// drainHedges receives the n attempts still out, cancelling each and
// closing its body: the losers of a hedged call.
func drainHedges(results <-chan hedgeResult, n int) {
	for ; n > 0; n-- {
		discard(<-results)
	}
}

func discard(r hedgeResult) {
	r.cancel()
	if r.resp != nil && r.resp.Body != nil {
		_, _ = io.CopyN(io.Discard, r.resp.Body, 4096)
		r.resp.Body.Close()
	}
}

// cancelBody cancels the winning attempt's context when its body is closed.
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

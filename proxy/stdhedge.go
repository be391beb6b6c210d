package proxy

import (
	"context"
	"errors"
	"math"
	"net/http"
	"time"

	"github.com/spillwayhq/spillway/balancer"
	"github.com/spillwayhq/spillway/chain"
	"github.com/spillwayhq/spillway/clock"
	"github.com/spillwayhq/spillway/request"
	"github.com/spillwayhq/spillway/retry"
	"github.com/spillwayhq/spillway/upstream"
)

// Hedged requests on the HTTP/2 engine (hedge.go has the rules): its
// handler goroutine is free, so every attempt of a hedged exchange — the
// first included — runs up to its response head on a goroutine of its
// own (a leg), and the handler's goroutine, which alone touches the
// request's Pass and the client's stream, waits for the legs and sends
// the hedges on a timer. It waits for every leg to end, the losers
// cancelled, before it forwards the winner: no leg outlives the request.
// A hedged request's 1xx heads are not forwarded (a losing leg's would
// reach the client).

var errEndpointGone = errors.New("proxy: the endpoint picked was removed")

// stdLeg is one attempt of a hedged exchange, up to its response head.
type stdLeg struct {
	es     *balancer.EndpointState
	start  float64
	ticket chain.HedgeTicket // a hedge's breaker permission (the first's is the Pass's)
	ctx    context.Context
	cancel context.CancelFunc
	late   bool // it ended after another leg won, or the request's context ended

	pool     *upstream.Pool // to an HTTP/1.1 cluster
	ureq     upstream.Request
	uresp    upstream.Response
	resp     *http.Response // to an HTTP/2 cluster
	err      error
	timedOut bool // its response header timeout cut it
}

// status is the leg's response status (0: none).
func (l *stdLeg) status() int {
	if l.resp != nil {
		return l.resp.StatusCode
	}
	return l.uresp.Head.Status
}

// close closes the leg's response and ends its context.
func (l *stdLeg) close() {
	if l.resp != nil {
		_ = l.resp.Body.Close()
	}
	l.uresp.Close()
	l.cancel()
}

// stdHedgeDelay is the delay after which an attempt at now may be hedged
// (+Inf: not hedged).
func stdHedgeDelay(t *stdTry, o *outbound, now float64) float64 {
	if t.pass == nil || !t.replayable || o.upgrade != nil || !t.pass.Hedging() {
		return math.Inf(1)
	}
	return t.pass.HedgeDelay(now)
}

// stdRace is one hedged exchange of an HTTP/2 request.
type stdRace struct {
	ctx  context.Context
	rt   *Route
	o    *outbound
	head []byte
	rec  *record
	t    *stdTry
	te   bool // the client asked for trailers
	legs []*stdLeg
	done chan *stdLeg
}

// stdHedged is stdAttempt's exchange on es when it is hedged after delay:
// it returns the endpoint and start of the attempt whose result stands
// (the winner's, or the first's), and what forwardH2 returns.
func stdHedged(ctx context.Context, w http.ResponseWriter, r *http.Request, v *request.View, rt *Route, o *outbound, head []byte, idle *idleCut, rec *record, t *stdTry, es *balancer.EndpointState, delay float64) (*balancer.EndpointState, float64, int, bool, bool) {
	x := &stdRace{ctx: ctx, rt: rt, o: o, head: head, rec: rec, t: t, te: r.Header.Get("Te") == "trailers",
		done: make(chan *stdLeg, 1+retry.MaxMaxHedges)}
	x.launch(&stdLeg{es: es, start: rec.tryAt})
	win := x.race(v, delay)
	cl, first := rec.cl, x.legs[0]
	now := t.s.cfg.Clock.Now()
	for _, l := range x.legs {
		if l == win || (win == nil && l == first) {
			continue
		}
		status := l.status()
		l.close()
		if l == first {
			cl.finish(l.es, l.start, now, 0, endClient) // its breaker ticket: HedgeWon
		} else {
			cl.hedgeLost(l.es, l.start, now, l.late, l.err, status, &l.ticket)
		}
	}
	l := win
	if l == nil {
		l = first
	} else if l != first {
		t.pass.HedgeWon(&l.ticket)
		rec.endpoint = l.es.Addr()
		if rec.log {
			rec.upSent = l.start
		}
	}
	defer l.close()
	if l.err != nil {
		timedOut := l.timedOut || idle.timedOut() || ctx.Err() == context.DeadlineExceeded
		return l.es, l.start, 0, false, stdFailed(ctx, w, r, cl, l.err, timedOut, rec, t)
	}
	t.headArrived(rec, l.start, l.status())
	var status int
	var cut, retried bool
	if l.resp != nil {
		status, cut, retried = h2Answer(ctx, w, rt, l.resp, idle, rec, t)
	} else {
		status, cut, retried = h1Answer(w, rt, o, &l.uresp, rec, t)
	}
	return l.es, l.start, status, cut, retried
}

// race waits for the legs, sending a hedge each time delay passes with
// no winner, until every leg has ended; it returns the winner (nil: none).
func (x *stdRace) race(v *request.View, delay float64) *stdLeg {
	timer := time.NewTimer(clock.Duration(delay))
	defer timer.Stop()
	var win *stdLeg
	for pending := 1; pending > 0; {
		select {
		case l := <-x.done:
			pending--
			l.late = win != nil || x.ctx.Err() != nil
			if win == nil && l.err == nil && winsRace(x.t.pass, l.status()) {
				win = l
				for _, o := range x.legs {
					if o != l {
						o.cancel()
					}
				}
			}
		case <-timer.C:
			if win != nil || x.ctx.Err() != nil {
				continue
			}
			now := x.t.s.cfg.Clock.Now()
			if !x.hedge(now, v) {
				continue // refused, or no endpoint left: no more hedges
			}
			pending++
			if d := x.t.pass.HedgeDelay(now); !math.IsInf(d, 1) {
				timer.Reset(clock.Duration(d))
			}
		}
	}
	return win
}

// hedge starts a hedge at now on an endpoint the request has not tried,
// if the chain lets it.
func (x *stdRace) hedge(now float64, v *request.View) bool {
	es, t, ok := x.rec.cl.pickHedge(now, v, x.t.pass)
	if !ok {
		return false
	}
	x.launch(&stdLeg{es: es, start: now, ticket: t})
	return true
}

// launch starts leg l's exchange on its own goroutine.
func (x *stdRace) launch(l *stdLeg) {
	l.ctx, l.cancel = context.WithCancel(x.ctx)
	if x.rec.cl.H2 == nil {
		l.pool = x.rec.cl.pool(l.es.Addr())
	}
	x.legs = append(x.legs, l)
	x.rec.sending()
	go x.run(l)
}

// run is a leg's goroutine: its exchange up to the response head.
func (x *stdRace) run(l *stdLeg) {
	defer func() { x.done <- l }()
	cl := x.rec.cl
	if cl.H2 == nil {
		if l.pool == nil { // the endpoint left since the pick
			l.err = errEndpointGone
			return
		}
		l.ureq = upstream.Request{Method: x.o.method, Head: x.head, Replayable: idempotent(x.o.method),
			HeaderTimeout: x.rt.ResponseHeaderTimeout}
		if x.rt.Streaming {
			l.ureq.ReadTimeout = x.rt.IdleTimeout
		}
		l.err = l.pool.RoundTrip(l.ctx, &l.ureq, &l.uresp)
		return
	}
	hdr := newHeaderTimer(x.rt.ResponseHeaderTimeout, l.cancel)
	req, err := stdRequest(l.ctx, x.head, l.es.Addr(), nil, 0)
	if err == nil {
		if x.te {
			req.Header["Te"] = []string{"trailers"}
		}
		l.resp, err = cl.H2.RoundTrip(req)
	}
	hdr.stop()
	l.err, l.timedOut = err, hdr.timedOut()
}

package proxy

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spillwayhq/spillway/balancer"
	"github.com/spillwayhq/spillway/chain"
	"github.com/spillwayhq/spillway/clock"
	"github.com/spillwayhq/spillway/request"
	"github.com/spillwayhq/spillway/upstream"
)

// Hedged requests on the HTTP/1.1 engine to HTTP/1.1 clusters (the route's
// chain.Config.Hedger). The first attempt runs as any other, in the
// connection's goroutine. A timer of the connection's own (made on its
// first hedged request, Reset per request) fires after Pass.HedgeDelay;
// if no attempt has a response head by then and Pass.TryHedge agrees, a
// hedge is sent on its own goroutine, with its own upstream request,
// response and context, to an endpoint the request has not tried. The
// first attempt whose head is not a failure the route retries wins (a
// compare-and-swap); the others are cancelled — their endpoints'
// completions reported as cancelled (no failure, no latency sample),
// their breaker tickets released — and the winner's answer is copied to
// the client as the first attempt's would be. Every hedge goroutine has
// ended before the connection's goroutine goes on (settle), so none
// outlives its request. Requests with a body or an Upgrade are never
// hedged: both attempts would need the client's bytes at once.
type hedging struct {
	c        *h1conn
	timer    *time.Timer
	cancelFn func() // cancelAll, made once: the watcher's cancel for a hedged exchange

	mu        sync.Mutex
	armed     bool           // the first attempt is out and undecided: the timer may send hedges
	cancelled bool           // cancelAll ran: no more hedges
	due       float64        // clock seconds before which the timer's call is a stale one
	first     *exchangeCtx   // the first attempt's context
	slots     []*hedgeSlot   // reused; slots[:n] belong to this request
	n         int            // hedges sent for this attempt
	winner    atomic.Int32   // 0: none yet; -1: the first attempt; i+1: slots[i]
	wg        sync.WaitGroup // the hedges' goroutines
}

// hedgeSlot is one hedge's exchange.
type hedgeSlot struct {
	hd     *hedging
	idx    int
	ctx    *exchangeCtx
	req    upstream.Request
	resp   upstream.Response
	es     *balancer.EndpointState
	pool   *upstream.Pool
	ticket chain.HedgeTicket
	start  float64 // clock seconds when it was sent
}

// hedgesFor returns the connection's hedging, armed for the attempt about
// to go with context ctx, or nil when the attempt is not hedged.
func (c *h1conn) hedgesFor(hasBody bool, ctx *exchangeCtx) *hedging {
	p := c.out.pass
	if p == nil || hasBody || c.out.upgrade != nil || !p.Hedging() {
		return nil
	}
	now := c.s.cfg.Clock.Now()
	d := p.HedgeDelay(now)
	if math.IsInf(d, 1) {
		return nil
	}
	hd := c.hedge
	if hd == nil {
		hd = &hedging{c: c}
		hd.cancelFn = hd.cancelAll
		hd.timer = time.AfterFunc(time.Hour, hd.fire)
		hd.timer.Stop()
		c.hedge = hd
	}
	hd.mu.Lock()
	hd.armed, hd.cancelled, hd.due, hd.first, hd.n = true, false, now+d, ctx, 0
	hd.winner.Store(0)
	hd.mu.Unlock()
	hd.timer.Reset(clock.Duration(d))
	return hd
}

// fire is the timer's: it sends a hedge if the attempt is still undecided,
// and arms the next one.
func (hd *hedging) fire() {
	hd.mu.Lock()
	defer hd.mu.Unlock()
	c := hd.c
	if !hd.armed || hd.cancelled || hd.winner.Load() != 0 {
		return
	}
	now := c.s.cfg.Clock.Now()
	if now < hd.due-1e-3 { // a call left over from an earlier request
		return
	}
	p := c.out.pass
	if !hd.send(now, p) {
		return
	}
	if d := p.HedgeDelay(now); !math.IsInf(d, 1) {
		hd.due = now + d
		hd.timer.Reset(clock.Duration(d))
	}
}

// send starts one hedge at now on an endpoint p has not tried, if the
// chain lets it; hd.mu is held.
func (hd *hedging) send(now float64, p *chain.Pass) bool {
	c := hd.c
	cl := c.rec.cl
	es, t, ok := cl.pickHedge(now, &c.view, p)
	if !ok {
		return false
	}
	pool := cl.pool(es.Addr())
	if pool == nil { // the endpoint left since the pick
		es.Done(now, -1, false)
		t.Cancel()
		return false
	}
	if hd.n == len(hd.slots) {
		hd.slots = append(hd.slots, &hedgeSlot{hd: hd, idx: hd.n})
	}
	s := hd.slots[hd.n]
	hd.n++
	if s.ctx == nil || s.ctx.Err() != nil {
		s.ctx = newExchangeCtx()
	}
	s.req = c.ureq
	s.req.Interim = nil // 1xx heads reach the client from the first attempt only
	s.es, s.pool, s.ticket, s.start = es, pool, t, now
	hd.wg.Add(1)
	go s.run()
	return true
}

// pickHedge picks the endpoint of a hedge at now: one p has not tried (a
// hedge to the same endpoint would share its trouble) that the cluster
// can reach, if TryHedge lets the hedge go; the endpoint is recorded as
// tried and counted started (the caller owes its Done), t is the hedge's
// breaker permission.
func (c *Cluster) pickHedge(now float64, v *request.View, p *chain.Pass) (es *balancer.EndpointState, t chain.HedgeTicket, ok bool) {
	es, err := c.pickAvoiding(now, v, p)
	if err != nil {
		return nil, t, false
	}
	if (c.H2 == nil && c.pool(es.Addr()) == nil) || !p.Untried(es.Addr()) {
		es.Done(now, -1, false)
		return nil, t, false
	}
	if t, ok = p.TryHedge(now); !ok {
		es.Done(now, -1, false)
		return nil, t, false
	}
	p.Tried(es.Addr())
	return es, t, true
}

// run is a hedge's goroutine: its exchange up to the response head. A
// winner leaves its response to the connection's goroutine; a loser
// reports itself and closes its response.
func (s *hedgeSlot) run() {
	defer s.hd.wg.Done()
	err := s.pool.RoundTrip(s.ctx, &s.req, &s.resp)
	hd := s.hd
	if err == nil && hd.good(&s.resp) && hd.winner.CompareAndSwap(0, int32(s.idx+1)) {
		hd.cancelOthers(s.idx)
		return
	}
	status := s.resp.Head.Status
	s.resp.Close()
	cancelled := s.ctx.Err() != nil || (err == nil && hd.winner.Load() != 0)
	hd.c.rec.cl.hedgeLost(s.es, s.start, hd.c.s.cfg.Clock.Now(), cancelled, err, status, &s.ticket)
}

// hedgeLost reports a hedge on es, sent at start, that lost (its
// response closed): cancelled (cut, or answered after another attempt
// won) it says nothing — endpoint done without a sample, breaker ticket
// released; else it failed, before a head (err) or with a status the
// route retries, and is reported as any failed attempt.
func (c *Cluster) hedgeLost(es *balancer.EndpointState, start, now float64, cancelled bool, err error, status int, t *chain.HedgeTicket) {
	switch {
	case cancelled:
		c.finish(es, start, now, 0, endClient)
		t.Cancel()
	case err != nil:
		if kind, ok := failureKind(err, false); ok && c.Observer != nil {
			c.Observer.UpstreamError(es.Addr(), kind)
		}
		c.finish(es, start, now, 0, endUpstream)
		t.Done(now, true)
	default:
		c.finish(es, start, now, status, endOK)
		t.Done(now, status >= 500)
	}
}

// good reports whether a response head may win the race.
func (hd *hedging) good(r *upstream.Response) bool { return winsRace(hd.c.out.pass, r.Head.Status) }

// winsRace reports whether an attempt's response head of status may win a
// hedged exchange on both engines: it is not a failure the route retries.
func winsRace(p *chain.Pass, status int) bool {
	return !p.Retryable(chain.Failure{Status: status, Replayable: true, After: -1})
}

// cancelOthers cancels every attempt but hedge i (-1: but the first).
func (hd *hedging) cancelOthers(i int) {
	hd.mu.Lock()
	defer hd.mu.Unlock()
	hd.armed = false
	if i >= 0 {
		hd.first.cancel()
	}
	for j, s := range hd.slots[:hd.n] {
		if j != i {
			s.ctx.cancel()
		}
	}
}

// cancelAll cancels every attempt (the watcher's: the client left, or
// the request timed out) and sends no more hedges.
func (hd *hedging) cancelAll() {
	hd.mu.Lock()
	defer hd.mu.Unlock()
	hd.cancelled, hd.armed = true, false
	hd.first.cancel()
	for _, s := range hd.slots[:hd.n] {
		s.ctx.cancel()
	}
}

// settle ends the race once the first attempt's RoundTrip returned (err):
// a good head of its own wins unless a hedge's did first; no more hedges
// are sent; every hedge goroutine has ended when it returns. It returns
// the winning hedge (nil: the first attempt's result stands).
func (hd *hedging) settle(err error) *hedgeSlot {
	c := hd.c
	if err == nil && hd.good(&c.uresp) && hd.winner.CompareAndSwap(0, -1) {
		hd.cancelOthers(-1)
	}
	hd.mu.Lock()
	hd.armed = false
	hd.mu.Unlock()
	hd.timer.Stop()
	hd.wg.Wait() // after a cancel, at once; after the first failed, until a hedge answers
	c.rec.attempts += hd.n
	if w := hd.winner.Load(); w > 0 {
		return hd.slots[w-1]
	}
	return nil
}

// hedgeWon makes hedge w's answer the request's: the first attempt, on
// endpoint first, is reported cancelled and its response closed; the
// breaker ticket, the record's endpoint and the response become w's.
func (c *h1conn) hedgeWon(first *balancer.EndpointState, w *hedgeSlot) *balancer.EndpointState {
	now := c.s.cfg.Clock.Now()
	c.uresp.Close()
	c.rec.cl.finish(first, c.rec.tryAt, now, 0, endClient)
	c.out.pass.HedgeWon(&w.ticket)
	c.rec.endpoint, c.rec.tryAt = w.es.Addr(), w.start
	if c.rec.log {
		c.rec.upSent = w.start
	}
	c.resp = &w.resp
	return w.es
}

// closeHedges closes what the connection's hedges hold (its release).
func (c *h1conn) closeHedges() {
	if hd := c.hedge; hd != nil {
		hd.timer.Stop()
		for _, s := range hd.slots {
			s.resp.Close()
		}
	}
}

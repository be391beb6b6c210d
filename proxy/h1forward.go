package proxy

import (
	"time"

	"github.com/spillwayhq/spillway/balancer"
	"github.com/spillwayhq/spillway/chain"
	"github.com/spillwayhq/spillway/httpwire"
	"github.com/spillwayhq/spillway/upstream"
)

// forward sends the request (head already in c.wbuf) to an endpoint of
// the route's cluster and copies the answer back; false ends the
// connection. With a policy chain each attempt asks the cluster's breaker
// first, and a failed attempt may be retried on an endpoint not tried yet.
func (c *h1conn) forward(rt *Route, m int) bool {
	hasBody := c.out.length > 0 || c.out.length == bodyChunked
	p := c.out.pass
	if keep := replayLimit(rt, p, hasBody, c.out.length); keep > 0 {
		c.body.reset(c, rt)
		c.replay.start(&c.body, keep)
		defer c.replay.release()
	}
	for {
		if p != nil {
			ref, fallback := p.Attempt(c.rec.tryAt)
			if ref != nil {
				return c.refuse(ref, c.head.KeepAlive && !hasBody)
			}
			if fallback && rt.Fallback != nil {
				c.rec.cl, c.rec.fallback = rt.Fallback, true
			}
		}
		if c.rec.cl.H2 != nil {
			return c.forwardH2(rt, m)
		}
		keep, again := c.attempt(rt, m, hasBody)
		if !again {
			return keep
		}
		c.rec.tryAt = c.s.cfg.Clock.Now()
	}
}

// attempt is one exchange with an endpoint; again reports that it failed
// and is to be retried (its backoff already waited).
func (c *h1conn) attempt(rt *Route, m int, hasBody bool) (keep, again bool) {
	cl := c.rec.cl
	es, err := cl.pickFor(c.rec.tryAt, &c.view, c.out.pass)
	var pool *upstream.Pool
	if err == nil {
		pool = cl.pool(es.Addr())
	}
	if pool == nil {
		if es != nil {
			es.Done(c.rec.tryAt, -1, false) // removed between the pick and the lookup
		}
		c.attemptDone(false)
		return c.writeProblem(cl.noEndpoint, c.head.KeepAlive && !hasBody), false
	}
	c.rec.endpoint = es.Addr()
	ctx := c.exchange()
	c.prepareRequest(rt, m, hasBody)
	cancel := ctx.cancelFn
	hd := c.hedgesFor(hasBody, ctx)
	if hd != nil {
		cancel = hd.cancelFn
	}
	c.watch.arm(cancel, c.exchangeTimeout(rt))
	if !hasBody || c.replay.complete() {
		c.watch.start()
	}
	c.rec.sending()
	c.resp = &c.uresp
	err = pool.RoundTrip(ctx, &c.ureq, &c.uresp)
	if hd != nil {
		if w := hd.settle(err); w != nil {
			es, err = c.hedgeWon(es, w), nil
		}
	}
	if err != nil {
		c.watch.stop()
		c.finishFailed(es, err, c.watch.timedOut)
		c.attemptDone(!c.watch.gone)
		if !c.watch.gone && c.body.err == nil && c.retry(chain.Failure{Kind: kindOf(err, c.watch.timedOut), Replayable: !hasBody || c.replay.replayable(), After: -1}) {
			return false, true
		}
		return c.upstreamFailed(cl, err, c.watch.timedOut), false
	}
	c.rec.headArrived()
	status := c.resp.Head.Status
	c.recordLatency(status)
	if status == 101 {
		c.rec.upstream(101)
		c.watch.stop()
		c.finished(es, 101)
		c.attemptDone(false)
		c.tunnel(rt)
		c.rec.at = 0 // the record ends with the tunnel
		return false, false
	}
	if status >= 500 && c.out.pass != nil && (!hasBody || c.replay.replayable()) && c.retryStatus(es, status) {
		return false, true
	}
	keep = c.copyResponse(rt, m, hasBody)
	c.watch.stop()
	if c.sent {
		c.watch.gone = false // it left after its whole answer: served, not gone
	}
	c.finished(es, status)
	c.attemptDone(status >= 500)
	c.resp.Close()
	return keep && !c.watch.gone, false
}

// recordLatency gives a hedging route's delay tracker the time to the
// response head of an attempt answered with status (below 500: a good
// one).
func (c *h1conn) recordLatency(status int) {
	if p := c.out.pass; p != nil && status < 500 && p.Hedging() {
		now := c.s.cfg.Clock.Now()
		p.RecordLatency(now, now-c.rec.tryAt)
	}
}

// retryStatus decides whether an upstream answer of status is retried
// instead of forwarded; if so the answer is dropped (its connection
// closed) and the backoff waited.
func (c *h1conn) retryStatus(es *balancer.EndpointState, status int) bool {
	f := chain.Failure{Status: status, Replayable: true, After: retryAfterOf(&c.resp.Head)}
	delay, ok := c.out.pass.Retry(c.s.cfg.Clock.Now(), f)
	if !ok {
		return false
	}
	c.watch.stop()
	c.resp.Close()
	c.finished(es, status)
	c.attemptDone(true)
	backoff(delay)
	return true
}

// attemptDone reports the attempt to the breaker.
func (c *h1conn) attemptDone(failed bool) {
	if p := c.out.pass; p != nil {
		p.AttemptDone(c.s.cfg.Clock.Now(), failed)
	}
}

// retry asks the chain whether the failed attempt f is retried, and waits
// its backoff if so.
func (c *h1conn) retry(f chain.Failure) bool {
	p := c.out.pass
	if p == nil {
		return false
	}
	delay, ok := p.Retry(c.s.cfg.Clock.Now(), f)
	if ok {
		backoff(delay)
	}
	return ok
}

// finishFailed completes an exchange that failed before its answer: the
// client's doing (it left, its body failed) or the upstream's, which is
// reported to the cluster's observer.
func (c *h1conn) finishFailed(es *balancer.EndpointState, err error, timedOut bool) {
	how := endUpstream
	if c.watch.gone || c.body.err != nil {
		how = endClient
	} else {
		c.rec.upstreamFailed(err, timedOut)
	}
	c.rec.bytesIn = c.body.read
	c.rec.at = c.s.cfg.Clock.Now()
	c.rec.cl.finish(es, c.rec.tryAt, c.rec.at, 0, how)
}

// finished completes an exchange the upstream answered with status (its
// body may have failed midway: reported here, after the watch).
func (c *h1conn) finished(es *balancer.EndpointState, status int) {
	how := endOK
	if c.watch.gone {
		how = endClient
	} else if c.rec.upErr != nil {
		c.rec.upstreamFailed(c.rec.upErr, c.watch.timedOut)
	}
	c.rec.bytesIn = c.body.read
	c.rec.at = c.s.cfg.Clock.Now()
	c.rec.cl.finish(es, c.rec.tryAt, c.rec.at, status, how)
}

// requestTimeout is the bound on a whole exchange: the route's request
// timeout, none on a streaming route (its idle timeout bounds each read).
func requestTimeout(rt *Route) time.Duration {
	if rt.Streaming {
		return 0
	}
	return rt.RequestTimeout
}

// prepareRequest fills c.ureq for the upstream: the client's body on the
// first attempt, its replay (kept bytes, then the rest from the client)
// on the next ones.
func (c *h1conn) prepareRequest(rt *Route, m int, hasBody bool) {
	c.ureq = upstream.Request{
		Method:        c.method[:m],
		Head:          c.wbuf,
		Replayable:    !hasBody && idempotent(c.method[:m]),
		HeaderTimeout: rt.ResponseHeaderTimeout,
		Interim:       c.interimFn,
	}
	if rt.Streaming {
		c.ureq.ReadTimeout = rt.IdleTimeout
	}
	if hasBody {
		if c.replay.src == nil {
			c.body.reset(c, rt)
			c.ureq.Body = &c.body
		} else {
			c.ureq.Body = c.replay.attempt(&c.replayR)
		}
		c.ureq.BodyLength = c.out.length
		if c.out.length == bodyChunked {
			c.ureq.Trailers = c.trailersFn
		}
	} else {
		c.body.done, c.body.err, c.body.read = true, nil, 0 // no body; nothing left from the last exchange
	}
}

// upstreamFailed answers a failed exchange: the client's own fault (its
// body stopped, was malformed or too large), its departure (nothing to
// answer: logged as 499), or the upstream's (502/504 naming the cluster;
// 504 whenever one of the exchange's timeouts cut it).
func (c *h1conn) upstreamFailed(cl *Cluster, err error, timedOut bool) bool {
	switch {
	case c.watch.gone:
		c.rec.status, c.rec.fromUp, c.rec.reason = 499, false, "client-gone"
		return false
	case c.body.err != nil:
		c.writeProblem(c.body.problem(), false)
		return false
	}
	p := cl.problemFor(err)
	if timedOut {
		p = cl.timeout
	}
	return c.writeProblem(p, c.head.KeepAlive && c.body.done) // done is set for a bodiless request
}

// interim forwards a 1xx response (other than 101) to the client at once.
func (c *h1conn) interim(h *httpwire.ResponseHead) {
	b := httpwire.AppendStatusLine(c.ibuf[:0], h.Status, h.Reason)
	for i := range h.Fields {
		f := &h.Fields[i]
		if !h.HopByHop(f.Name) {
			b = httpwire.AppendField(b, f.Name, f.Value)
		}
	}
	b = append(b, "\r\n"...)
	c.ibuf = b
	c.armSend()
	_, _ = c.bw.Write(b)
	_ = c.bw.Flush()
}

// idempotent reports whether a request with this method may be sent again
// when a kept-alive connection turns out dead (RFC 9110 section 9.2.2).
func idempotent(m []byte) bool {
	switch string(m) {
	case "GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE":
		return true
	}
	return false
}

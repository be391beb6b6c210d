package proxy

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/spillwayhq/spillway/balancer"
	"github.com/spillwayhq/spillway/chain"
	"github.com/spillwayhq/spillway/clock"
	budget "github.com/spillwayhq/spillway/deadline"
	"github.com/spillwayhq/spillway/httpwire"
	"github.com/spillwayhq/spillway/request"
	"github.com/spillwayhq/spillway/retry"
	"github.com/spillwayhq/spillway/upstream"
)

// The policy chain's side of the engines: its refusals on both engines
// (problem+json, or trailers-only gRPC statuses on gRPC routes over
// HTTP/2), and the control fields it forwards upstream.

// BrownoutHeader is the default field that carries a request's brownout
// decision upstream.
const BrownoutHeader = "Spillway-Brownout"

// appendRefusal appends the whole HTTP/1.1 answer ref, with the request's
// Retry-After and RateLimit fields from p, to dst; reason false leaves
// Spillway-Reason out.
func appendRefusal(dst []byte, ref *chain.Refusal, p *chain.Pass, keepAlive, head, reason bool) []byte {
	dst = httpwire.AppendStatusLine(dst, ref.Status, nil)
	ct := ref.ContentType
	if ct == "" {
		ct = "application/problem+json"
		dst = append(dst, "Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n"...)
	}
	dst = append(append(append(dst, "Content-Type: "...), ct...), "\r\n"...)
	if reason {
		dst = append(append(append(dst, "Spillway-Reason: "...), ref.Reason...), "\r\n"...)
	}
	if ref.Retry && p.RetryAfter >= 0 {
		dst = strconv.AppendInt(append(dst, "Retry-After: "...), p.RetryAfter, 10)
		dst = append(dst, "\r\n"...)
	}
	dst = appendRateLimit(dst, p)
	for _, f := range ref.Fields {
		dst = append(append(append(append(dst, f.Name...), ": "...), f.Value...), "\r\n"...)
	}
	dst = strconv.AppendInt(append(dst, "Content-Length: "...), int64(len(ref.Body)), 10)
	dst = append(dst, "\r\n"...)
	if !keepAlive {
		dst = append(dst, "Connection: close\r\n"...)
	}
	dst = append(dst, "\r\n"...)
	if head {
		return dst
	}
	return append(dst, ref.Body...)
}

// appendRateLimit appends the rate limit's RateLimit-Policy and RateLimit
// fields, when the request had any.
func appendRateLimit(dst []byte, p *chain.Pass) []byte {
	pol, lim := p.RateLimitFields()
	if len(pol) > 0 {
		dst = append(append(append(dst, "RateLimit-Policy: "...), pol...), "\r\n"...)
	}
	if len(lim) > 0 {
		dst = append(append(append(dst, "RateLimit: "...), lim...), "\r\n"...)
	}
	return dst
}

// writeRefusal writes ref to an HTTP/2 client: as a trailers-only gRPC
// status on a gRPC route asked in gRPC, else as the HTTP answer; reason
// false leaves Spillway-Reason out.
func writeRefusal(w http.ResponseWriter, r *http.Request, rt *Route, ref *chain.Refusal, p *chain.Pass, reason bool) {
	h := w.Header()
	if rt.GRPC && isGRPC(r) {
		h["Content-Type"] = grpcType
		h["Grpc-Status"] = []string{strconv.Itoa(ref.GRPC)}
		h["Grpc-Message"] = []string{ref.GRPCMessage}
		if reason {
			h["Spillway-Reason"] = []string{ref.Reason}
		}
		if ref.Retry && p.RetryAfter >= 0 {
			h[retryPushback] = []string{strconv.FormatInt(p.RetryAfter*1000, 10)}
		}
		w.WriteHeader(http.StatusOK)
		return
	}
	ct := ref.ContentType
	if ct == "" {
		h["Content-Type"] = problemType
		h["Cache-Control"] = noStore
		h["X-Content-Type-Options"] = noSniff
	} else {
		h["Content-Type"] = []string{ct}
	}
	if reason {
		h["Spillway-Reason"] = []string{ref.Reason}
	}
	if ref.Retry && p.RetryAfter >= 0 {
		h["Retry-After"] = []string{strconv.FormatInt(p.RetryAfter, 10)}
	}
	addRateLimit(h, p)
	for _, f := range ref.Fields {
		h.Add(f.Name, f.Value)
	}
	h["Content-Length"] = []string{strconv.Itoa(len(ref.Body))}
	w.WriteHeader(ref.Status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(ref.Body)
	}
}

var grpcType = []string{"application/grpc"}

// retryPushback is grpc-retry-pushback-ms as net/http keys it.
const retryPushback = "Grpc-Retry-Pushback-Ms"

// isGRPC reports whether r speaks gRPC (its Content-Type is
// application/grpc, with or without a +codec suffix).
func isGRPC(r *http.Request) bool {
	ct := r.Header.Get("Content-Type")
	return len(ct) >= 16 && ct[:16] == "application/grpc"
}

// controlField reports whether name is one of the gateway's control
// fields, which only a trusted peer may send and which the chain replaces
// with its own.
func controlField(name []byte) bool {
	return httpwire.EqualFold(name, "spillway-criticality") || httpwire.EqualFold(name, "spillway-timeout") ||
		httpwire.EqualFold(name, "spillway-brownout") || httpwire.EqualFold(name, chain.EnvoyHeader)
}

// appendControl appends the chain's control fields for the upstream: the
// request's class, its remaining budget (Spillway-Timeout, and
// grpc-timeout on gRPC routes) and its brownout decision.
func appendControl(dst []byte, o *outbound, rt *Route) []byte {
	p := o.pass
	if p == nil {
		return dst
	}
	dst = append(append(append(dst, "Spillway-Criticality: "...), p.Class().String()...), "\r\n"...)
	if secs, ok := p.Remaining(o.now); ok {
		d := clock.Duration(secs)
		dst = budget.AppendTimeout(append(dst, "Spillway-Timeout: "...), d)
		dst = append(dst, "\r\n"...)
		if rt.GRPC {
			dst = budget.AppendTimeout(append(dst, "grpc-timeout: "...), d)
			dst = append(dst, "\r\n"...)
		}
	}
	if name, optional, ok := p.Brownout(); ok {
		v := "0"
		if optional {
			v = "1"
		}
		dst = append(append(append(append(dst, name...), ": "...), v...), "\r\n"...)
	}
	return dst
}

// backoff waits a retry's delay (bounded by the retry policy's cap and the
// request's deadline) on the request's own goroutine.
func backoff(delay float64) {
	if delay > 0 {
		time.Sleep(clock.Duration(delay))
	}
}

// kindOf classifies a failed exchange for the retry policy; a failure
// that is not the upstream's is KindCanceled (never retried).
func kindOf(err error, timedOut bool) upstream.Kind {
	if k, ok := failureKind(err, timedOut); ok {
		return k
	}
	return upstream.KindCanceled
}

// retryAfterOf reads an upstream answer's Retry-After, in seconds
// (-1: none or malformed).
func retryAfterOf(h *httpwire.ResponseHead) float64 {
	for i := range h.Fields {
		if f := &h.Fields[i]; httpwire.EqualFold(f.Name, "retry-after") {
			return serverDelay(bstr(f.Value))
		}
	}
	return -1
}

// serverDelay is a Retry-After value in seconds (retry.ParseRetryAfter:
// delay-seconds or an HTTP-date); -1 when absent or malformed.
func serverDelay(v string) float64 {
	if v == "" {
		return -1
	}
	d, ok := retry.ParseRetryAfter(v, time.Now())
	if !ok {
		return -1
	}
	return d.Seconds()
}

// pickFor picks an endpoint for one attempt of a request with policy
// pass p (nil: none): a retry avoids the endpoints already tried when the
// cluster has others (a few draws, as a fast-failing endpoint looks the
// emptiest to a least-request picker, then the least loaded untried
// endpoint), and the endpoint is recorded.
func (c *Cluster) pickFor(now float64, v *request.View, p *chain.Pass) (*balancer.EndpointState, error) {
	es, err := c.pickAvoiding(now, v, p)
	if err == nil && p != nil {
		p.Tried(es.Addr())
	}
	return es, err
}

// pickAvoiding is pickFor without recording the endpoint: one p has not
// tried when the cluster has one (a hedge checks and records it itself).
func (c *Cluster) pickAvoiding(now float64, v *request.View, p *chain.Pass) (*balancer.EndpointState, error) {
	es, err := c.pick(now, v)
	if err != nil || p == nil {
		return es, err
	}
	if p.NTried() > 0 && !p.Untried(es.Addr()) {
		for k := 0; k < 3; k++ {
			other, err := c.pick(now, v)
			if err != nil {
				break
			}
			if p.Untried(other.Addr()) {
				es.Done(now, -1, false)
				es = other
				break
			}
			other.Done(now, -1, false)
		}
		if !p.Untried(es.Addr()) { // every draw was an endpoint tried already
			if other := c.leastUntried(now, p); other != nil {
				es.Done(now, -1, false)
				es = other
			}
		}
	}
	return es, nil
}

// leastUntried returns (started) the eligible endpoint with the fewest
// requests in flight among those p has not tried, or nil when it tried
// them all.
func (c *Cluster) leastUntried(now float64, p *chain.Pass) *balancer.EndpointState {
	snap := c.Set.Current(now)
	best := -1
	for i := 0; i < snap.Len(); i++ {
		if p.Untried(snap.Endpoint(i).Addr()) && (best < 0 || snap.Load(i) < snap.Load(best)) {
			best = i
		}
	}
	if best < 0 {
		return nil
	}
	e := snap.Endpoint(best)
	e.Start()
	return e
}

// exchangeTimeout bounds one HTTP/1.1 exchange (see exchangeBound).
func (c *h1conn) exchangeTimeout(rt *Route) time.Duration {
	return exchangeBound(rt, c.out.pass, c.s.cfg.Clock.Now())
}

// exchangeBound is the bound on a whole exchange at now: the route's
// request timeout (none when streaming), cut to the request's remaining
// budget when it has one; 0: none.
func exchangeBound(rt *Route, p *chain.Pass, now float64) time.Duration {
	d := requestTimeout(rt)
	if p != nil && p.Deadline() > 0 {
		if left := clock.Duration(max(p.Deadline()-now, 1e-6)); d == 0 || left < d {
			d = left
		}
	}
	return d
}

// refuse answers the chain's refusal ref over HTTP/1.1.
func (c *h1conn) refuse(ref *chain.Refusal, keep bool) bool {
	keep = keep && c.mayKeep()
	c.rec.refused(ref, c.isHead)
	c.wbuf = appendRefusal(c.wbuf[:0], ref, c.pass, keep, c.isHead, !c.s.cfg.OmitReason)
	c.armSend()
	_, _ = c.bw.Write(c.wbuf)
	return c.finish(keep) == nil && keep
}

// outcomeOf is how a request ended for admission's sample: a client
// that went away first is a drop (it gave up waiting: not a latency
// sample), and so is a gateway failure (502, 504) or an upstream 503, 504
// or 429, which say the cluster is overloaded; an answer the chain never
// saw forwarded says nothing; anything else is a success.
func outcomeOf(r *record, gone bool) chain.Outcome {
	switch {
	case gone || r.status == 499:
		return chain.Dropped
	case r.status == 0:
		return chain.Ignore
	case !r.fromUp && r.status >= 500,
		r.fromUp && (r.status == 503 || r.status == 504 || r.status == 429):
		return chain.Dropped
	}
	return chain.Success
}

// passes recycles the HTTP/1.1 engine's policy passes: an idle connection
// holds none.
var passes = sync.Pool{New: func() any { return new(chain.Pass) }}

// dropPass gives the request's pass back to the pool.
func (c *h1conn) dropPass() {
	c.pass.Clear() // pins no generation while pooled
	passes.Put(c.pass)
	c.pass = nil
}

// addRateLimit adds the rate limit's fields to an HTTP/2 client's answer.
func addRateLimit(h http.Header, p *chain.Pass) {
	if p == nil {
		return
	}
	if pol, lim := p.RateLimitFields(); len(pol) > 0 || len(lim) > 0 {
		h["Ratelimit-Policy"] = []string{string(pol)}
		h["Ratelimit"] = []string{string(lim)}
	}
}

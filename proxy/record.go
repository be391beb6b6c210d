package proxy

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"

	"github.com/spillwayhq/spillway/chain"
	"github.com/spillwayhq/spillway/clock"
	"github.com/spillwayhq/spillway/shed"
	"github.com/spillwayhq/spillway/upstream"
)

// record is one routed request's bookkeeping, the same on both engines:
// the generation's live count, the route's observer, and its access log
// line. It lives in the connection (HTTP/1.1) or in the pooled stream
// scratch (HTTP/2), so keeping it costs no allocation.
//
// Time is the Server's clock, read when the request is routed (start,
// which the engine also gives the balancer) and when the exchange is over
// (at, which the engine also gives the endpoint's latency sample): the
// observer's duration costs no clock read of its own.
type record struct {
	rt       *Route   // nil between requests: an idle connection pins no generation
	cl       *Cluster // the cluster of the attempt: the route's, or its breaker's fallback
	fallback bool     // cl is the fallback cluster
	tryAt    float64  // when the current upstream attempt started
	clk      clock.Clock
	start    float64 // clock seconds when the request was routed
	at       float64 // when the exchange ended (0: not known, read at the end)
	status   int     // what the client got (0: nothing yet)
	fromUp   bool    // status is the upstream's answer, not the gateway's own
	reason   string  // the gateway's reason code for its own answers
	bare     bool    // its answers leave Spillway-Reason out (Config.OmitReason)
	endpoint string  // the address picked ("" if none)
	upErr    error   // the upstream's failure in the middle of a body, reported at the end
	attempts int     // upstream exchanges tried
	// The request's class as the policy chain gave it (admitted); classed
	// false: no chain ran.
	class   shed.Class
	classed bool
	// Body bytes read from the client and written to it.
	bytesIn, bytesOut int64

	// For the access log line, only when log (logging may allocate; the
	// rest of the record never does): copies of the request's strings,
	// the request id forwarded, and when the upstream exchange started
	// and its response head arrived (clock seconds; 0: none).
	log                bool
	method, host, path string
	reqID              string
	upSent, upHead     float64
}

// begin starts the record of a request that took route rt now, and
// draws whether it is logged (math/rand/v2's generator: per-thread
// state, no lock, no allocation).
func (r *record) begin(rt *Route, cfg *Config) {
	now := cfg.Clock.Now()
	*r = record{rt: rt, cl: rt.Cluster, clk: cfg.Clock, start: now, tryAt: now, bare: cfg.OmitReason}
	if rt.Live != nil {
		rt.Live.Add(1)
	}
	if o := rt.Observer; o != nil {
		o.Begin()
	}
	switch rt.AccessLog {
	case LogFull:
		r.log = true
	case LogSampled:
		r.log = rand.Float64() < rt.AccessSample
	}
}

// sending marks the start of an upstream exchange.
func (r *record) sending() {
	r.attempts++
	if r.log {
		r.upSent = r.clk.Now()
	}
}

// headArrived marks the upstream's response head.
func (r *record) headArrived() {
	if r.log {
		r.upHead = r.clk.Now()
	}
}

// gateway records an answer of the gateway's own (a refusal, a timeout),
// its body sent unless the request was a HEAD.
func (r *record) gateway(p *Problem, head bool) {
	r.status, r.fromUp, r.reason = p.Status, false, p.Reason
	if !head {
		r.bytesOut = int64(len(p.Body))
	}
}

// refused records the policy chain's refusal ref.
func (r *record) refused(ref *chain.Refusal, head bool) {
	r.status, r.fromUp, r.reason = ref.Status, false, ref.Reason
	if !head {
		r.bytesOut = int64(len(ref.Body))
	}
}

// admitted records the class the policy chain gave the request (p has
// been through Chain.Admit, refused or not), for the route's observer.
func (r *record) admitted(p *chain.Pass) {
	r.class, r.classed = p.Class(), true
}

// upstream records the upstream's status, forwarded to the client.
func (r *record) upstream(status int) {
	r.status, r.fromUp, r.reason = status, true, ""
}

// clientGone records a client that went away before its answer.
func (r *record) clientGone() {
	r.status, r.fromUp, r.reason = 499, false, "client-gone"
}

// end closes the record — the exchange, or the tunnel, is over: it
// reports it to the route's observer, writes its access log line (client
// is the peer's address), and counts it out of its generation, last.
func (r *record) end(s *Server, client netip.Addr) {
	o := r.rt.Observer
	if r.at == 0 && (o != nil || r.log) {
		r.at = r.clk.Now()
	}
	if o != nil {
		o.End(Ending{Status: r.status, FromUpstream: r.fromUp, Seconds: r.at - r.start,
			Reason: r.reason, Class: r.class, Classed: r.classed})
	}
	if r.log {
		s.logAccess(r, client)
	}
	if live := r.rt.Live; live != nil {
		live.Add(-1)
	}
	*r = record{} // drop the route, the strings and the error
}

// upstreamFailed reports a failed exchange with the endpoint to the
// cluster's observer, unless the failure was the client's doing (it went
// away, its body failed). timedOut says one of the exchange's timeouts
// cut it.
func (r *record) upstreamFailed(err error, timedOut bool) {
	o := r.cl.Observer
	if o == nil {
		return
	}
	if kind, ok := failureKind(err, timedOut); ok {
		o.UpstreamError(r.endpoint, kind)
	}
}

// failureKind classifies an upstream failure: the pools' *upstream.Error
// says it itself; an HTTP/2 transport's error is a dial failure (refused),
// a deadline (timeout) or anything else (reset). False: not the
// upstream's failure.
func failureKind(err error, timedOut bool) (upstream.Kind, bool) {
	if timedOut {
		return upstream.KindTimeout, true
	}
	if ue, ok := err.(*upstream.Error); ok {
		switch ue.Kind {
		case upstream.KindCanceled, upstream.KindRequestBody:
			return 0, false
		}
		return ue.Kind, true
	}
	var op *net.OpError
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, errBodyGone):
		return 0, false
	case errors.Is(err, context.DeadlineExceeded), isTimeout(err):
		return upstream.KindTimeout, true
	case errors.As(err, &op) && (op.Op == "dial" || op.Op == "remote error"):
		// A dial, or a TLS handshake the endpoint refused (an alert).
		return upstream.KindRefused, true
	}
	return upstream.KindReset, true
}

// answer writes one of the gateway's own answers to an HTTP/2 client.
func (r *record) answer(w http.ResponseWriter, p *Problem, head bool) {
	r.gateway(p, head)
	p.writeHTTP(w, head, !r.bare)
}

// failedStd answers an HTTP/2 client's failed exchange with p, and
// reports the failure unless the client's going away caused it.
func (r *record) failedStd(w http.ResponseWriter, req *http.Request, p *Problem, err error, timedOut bool) {
	if req.Context().Err() == nil {
		r.upstreamFailed(err, timedOut)
	}
	r.answer(w, p, req.Method == http.MethodHead)
}

// endStream closes an HTTP/2 request's record (deferred, so a stream
// reset after a cut body is recorded too): 499 when the client left
// first.
func (h *h2handler) endStream(r *record, req *http.Request) {
	if req.Context().Err() != nil {
		r.clientGone()
	}
	r.end(h.s, h.peer.Addr())
}

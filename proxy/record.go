package proxy

// record is one routed request's bookkeeping, the same on both engines:
// the generation's live count, the route's observer, and its access log
// line. It lives in the connection (HTTP/1.1) or in the pooled stream
// scratch (HTTP/2), so keeping it costs no allocation.
type record struct {
	rt     *Route // nil between requests: an idle connection pins no generation
	status int    // what the client got (0: nothing yet)
	fromUp bool   // status is the upstream's answer, not the gateway's own
	reason string // the gateway's reason code for its own answers
}

// begin starts the record of a request that took route rt.
func (r *record) begin(rt *Route) {
	*r = record{rt: rt}
	if rt.Live != nil {
		rt.Live.Add(1)
	}
}

// gateway records an answer of the gateway's own (a refusal, a timeout).
func (r *record) gateway(p *Problem) {
	r.status, r.fromUp, r.reason = p.Status, false, p.Reason
}

// upstream records the upstream's status, forwarded to the client.
func (r *record) upstream(status int) {
	r.status, r.fromUp, r.reason = status, true, ""
}

// end closes the record: the exchange, or the tunnel, is over.
func (r *record) end() {
	if live := r.rt.Live; live != nil {
		live.Add(-1)
	}
	r.rt = nil
}

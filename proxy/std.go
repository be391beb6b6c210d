package proxy

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"sync"

	"github.com/spillwayhq/spillway/chain"
	"github.com/spillwayhq/spillway/httpwire"
	"github.com/spillwayhq/spillway/request"
	"github.com/spillwayhq/spillway/upstream"
)

// forwardStd forwards a request received by the HTTP/2 engine: to an
// HTTP/2 cluster through its transport (gRPC end to end, trailers both
// ways), or to an HTTP/1.1 cluster through its pools. The upstream head is
// built by appendHead, as for the HTTP/1.1 engine. With a policy chain the
// request is admitted first (p is its pass) and its attempts go through
// the cluster's breaker and the route's retries.
func forwardStd(s *Server, w http.ResponseWriter, r *http.Request, v *request.View, rt *Route, o *outbound, rec *record, p *chain.Pass) {
	o.pass = nil
	if rt.Policy != nil {
		ref := rt.Policy.Admit(r.Context(), s.cfg.Clock, rec.start, v, p)
		rec.admitted(p)
		if ref != nil {
			rec.refused(ref, r.Method == http.MethodHead)
			writeRefusal(w, r, rt, ref, p, !s.cfg.OmitReason)
			return
		}
		o.pass, o.now = p, s.cfg.Clock.Now()
		rec.tryAt = o.now
		defer func() { p.End(s.cfg.Clock.Now(), outcomeOf(rec, r.Context().Err() != nil)) }()
	}
	head := appendHead(make([]byte, 0, 1024), o, rt)
	if rec.log {
		rec.reqID = string(head[o.idAt:o.idEnd])
	}
	ctx, cancel := stdContext(r.Context(), rt, o.pass, rec.tryAt)
	defer cancel()
	idle := newIdleCut(rt, cancel)
	defer idle.stop()
	if o.length == bodyNone || o.length == 0 {
		// x/net/http2 gives a bodiless request a Body that reads EOF at
		// once; a transport takes a Body with length 0 for one of unknown
		// length (an open stream, then an empty DATA frame). NoBody sends
		// the upstream what the HTTP/1.1 engine sends.
		gr := *r
		gr.Body = http.NoBody
		r = &gr
	}
	var g *bodyGate
	if r.Body != nil && r.Body != http.NoBody {
		g = &bodyGate{rc: r.Body, idle: idle, read: &rec.bytesIn}
		defer g.shut()
		gr := *r // the engine's copy: the caller's request is not changed
		gr.Body = g
		r = &gr
	}
	t := stdTry{s: s, pass: o.pass, replayable: r.Body == http.NoBody}
	var rep *replay // allocated: a stale attempt's reader may outlive the request
	if keep := replayLimit(rt, o.pass, g != nil, o.length); keep > 0 {
		rep = new(replay)
		rep.start(g, keep)
		defer rep.release()
		t.rep = rep
	}
	for {
		if rep != nil {
			r.Body = replayBody{rep.attempt(new(replayReader))}
		}
		if o.pass != nil {
			ref, fallback := o.pass.Attempt(rec.tryAt)
			if ref != nil {
				rec.refused(ref, r.Method == http.MethodHead)
				writeRefusal(w, r, rt, ref, o.pass, !s.cfg.OmitReason)
				return
			}
			if fallback && rt.Fallback != nil {
				rec.cl, rec.fallback = rt.Fallback, true
			}
		}
		if !stdAttempt(ctx, w, r, v, rt, o, head, idle, rec, &t) {
			return
		}
		rec.tryAt = s.cfg.Clock.Now()
	}
}

// stdTry is what an HTTP/2 request's attempts share for retries.
type stdTry struct {
	s          *Server
	pass       *chain.Pass // nil: no policy chain, no retries
	replayable bool        // the request has no body to send again
	rep        *replay     // the body kept for a retry, or nil
}

// replayBody is an attempt's request body read from its replay. Closing
// it leaves the client's body open for the next attempt (the handler
// shuts that at its end).
type replayBody struct{ io.Reader }

func (replayBody) Close() error { return nil }

// again asks the chain whether failed attempt f is retried, and waits its
// backoff if so.
func (t *stdTry) again(f chain.Failure) bool {
	if t.pass == nil {
		return false
	}
	f.Replayable = t.replayable || t.rep != nil && t.rep.replayable()
	delay, ok := t.pass.Retry(t.s.cfg.Clock.Now(), f)
	if ok {
		backoff(delay)
	}
	return ok
}

// headArrived marks an attempt's response head, of status, in rec, and
// gives a hedging route's delay tracker the time to it from start (a
// good answer's: below 500).
func (t *stdTry) headArrived(rec *record, start float64, status int) {
	rec.headArrived()
	if p := t.pass; p != nil && status < 500 && p.Hedging() {
		now := t.s.cfg.Clock.Now()
		p.RecordLatency(now, now-start)
	}
}

// done reports an attempt's result to the breaker.
func (t *stdTry) done(failed bool) {
	if t.pass != nil {
		t.pass.AttemptDone(t.s.cfg.Clock.Now(), failed)
	}
}

// stdAttempt is one exchange with an endpoint of rec.cl; it reports
// whether it failed and is to be retried (nothing written to w then).
func stdAttempt(ctx context.Context, w http.ResponseWriter, r *http.Request, v *request.View, rt *Route, o *outbound, head []byte, idle *idleCut, rec *record, t *stdTry) bool {
	cl := rec.cl
	isHead := r.Method == http.MethodHead
	now := rec.tryAt
	es, err := cl.pickFor(now, v, t.pass)
	if err != nil {
		t.done(false)
		rec.answer(w, cl.noEndpoint, isHead)
		return false
	}
	rec.endpoint = es.Addr()
	status, cut, retried := 0, false, false
	if d := stdHedgeDelay(t, o, now); !math.IsInf(d, 1) && (cl.H2 != nil || cl.pool(es.Addr()) != nil) {
		es, now, status, cut, retried = stdHedged(ctx, w, r, v, rt, o, head, idle, rec, t, es, d)
	} else if cl.H2 != nil {
		status, cut, retried = forwardH2(ctx, w, r, rt, head, es.Addr(), idle, rec, t)
	} else if pool := cl.pool(es.Addr()); pool != nil {
		status, cut, retried = forwardH1(ctx, w, r, rt, o, head, pool, rec, t)
	} else {
		t.done(false)
		rec.answer(w, cl.noEndpoint, isHead)
		es.Done(now, -1, false)
		return false
	}
	how := endOK
	switch {
	case r.Context().Err() != nil:
		how = endClient // the client went away: no sample
	case status == 0:
		how = endUpstream
	case rec.upErr != nil:
		rec.upstreamFailed(rec.upErr, ctx.Err() == context.DeadlineExceeded || idle.timedOut())
	}
	rec.at = t.s.cfg.Clock.Now()
	cl.finish(es, now, rec.at, status, how)
	t.done(how == endUpstream || status >= 500)
	if cut {
		// The head is gone and the body is short: reset the stream
		// (net/http's sentinel for it), so the client cannot take the
		// truncated body for a whole one.
		panic(http.ErrAbortHandler)
	}
	return retried
}

// stdContext bounds an HTTP/2 request's exchanges: the route's request
// timeout (none when streaming), cut to the request's deadline.
func stdContext(parent context.Context, rt *Route, p *chain.Pass, now float64) (context.Context, context.CancelFunc) {
	if d := exchangeBound(rt, p, now); d > 0 {
		return context.WithTimeout(parent, d)
	}
	return context.WithCancel(parent)
}

// forwardH2 sends the request through the cluster's HTTP/2 transport. It
// returns the upstream's status (0 when none was forwarded) and whether
// the response body was cut after its head went out.
//
// On a streaming route, idle ends the exchange after a silence both ways.
func forwardH2(ctx context.Context, w http.ResponseWriter, r *http.Request, rt *Route, head []byte, addr string, idle *idleCut, rec *record, t *stdTry) (status int, cut, retried bool) {
	cl := rec.cl
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hdr := newHeaderTimer(rt.ResponseHeaderTimeout, cancel)
	req, err := stdRequest(hctx, head, addr, sendBody(r.Body, hdr), r.ContentLength)
	if err != nil {
		rec.answer(w, cl.badResponse, r.Method == http.MethodHead)
		return 0, false, false
	}
	if r.Header.Get("Te") == "trailers" {
		req.Header["Te"] = []string{"trailers"}
	}
	req.Trailer = r.Trailer
	rec.sending()
	resp, err := cl.H2.RoundTrip(req)
	hdr.stop()
	if err != nil {
		timedOut := idle.timedOut() || hdr.timedOut() || ctx.Err() == context.DeadlineExceeded
		return 0, false, stdFailed(ctx, w, r, cl, err, timedOut, rec, t)
	}
	defer resp.Body.Close()
	t.headArrived(rec, rec.tryAt, resp.StatusCode)
	return h2Answer(ctx, w, rt, resp, idle, rec, t)
}

// stdFailed answers an exchange that failed before its response head,
// unless it is retried (true: nothing written, the backoff waited).
func stdFailed(ctx context.Context, w http.ResponseWriter, r *http.Request, cl *Cluster, err error, timedOut bool, rec *record, t *stdTry) bool {
	if r.Context().Err() == nil && !timedOut && t.again(chain.Failure{Kind: kindOf(err, false), After: -1}) {
		rec.upstreamFailed(err, false)
		return true
	}
	p := stdProblem(ctx, cl, err)
	if timedOut {
		p = cl.timeout
	}
	rec.failedStd(w, r, p, err, timedOut)
	return false
}

// h2Answer forwards an HTTP/2 upstream's response resp (its head
// arrived), unless its status is retried; it returns what forwardH2 does.
func h2Answer(ctx context.Context, w http.ResponseWriter, rt *Route, resp *http.Response, idle *idleCut, rec *record, t *stdTry) (status int, cut, retried bool) {
	if resp.StatusCode >= 500 && t.again(chain.Failure{Status: resp.StatusCode, After: serverDelay(resp.Header.Get("Retry-After"))}) {
		return resp.StatusCode, false, true
	}
	// x/net's transport looks at the context only between its own steps:
	// a response body read, or the copy of a request body the client has
	// not finished, blocks past the route's request timeout. Closing the
	// response body when the context ends cuts both (the stream is reset).
	stop := context.AfterFunc(ctx, func() { _ = resp.Body.Close() })
	defer stop()
	copyHeader(w.Header(), resp.Header, rt)
	addRateLimit(w.Header(), t.pass)
	for k := range resp.Trailer {
		w.Header().Add("Trailer", k)
	}
	rec.upstream(resp.StatusCode)
	w.WriteHeader(resp.StatusCode)
	var body io.Reader = resp.Body
	if idle != nil {
		body = touchReader{resp.Body, idle}
	}
	if !streamBody(w, body, resp.ContentLength, rec) {
		return resp.StatusCode, true, false
	}
	for k, vs := range resp.Trailer {
		w.Header()[http.TrailerPrefix+k] = vs
	}
	return resp.StatusCode, false, false
}

// forwardH1 sends an HTTP/2 client's request to an HTTP/1.1 pool; it
// returns what forwardH2 does.
func forwardH1(ctx context.Context, w http.ResponseWriter, r *http.Request, rt *Route, o *outbound, head []byte, pool *upstream.Pool, rec *record, t *stdTry) (status int, cut, retried bool) {
	cl := rec.cl
	ureq := upstream.Request{
		Method: o.method, Head: head, Replayable: o.length == bodyNone && idempotent(o.method),
		HeaderTimeout: rt.ResponseHeaderTimeout,
		Interim:       func(ih *httpwire.ResponseHead) { writeInterim(w, ih) },
	}
	if rt.Streaming {
		ureq.ReadTimeout = rt.IdleTimeout
	}
	if o.length != bodyNone {
		ureq.Body, ureq.BodyLength = r.Body, o.length
		if o.length == bodyChunked {
			ureq.Trailers = func() []httpwire.Field { return fieldsOf(r.Trailer) }
		}
	}
	var resp upstream.Response
	defer resp.Close()
	rec.sending()
	if err := pool.RoundTrip(ctx, &ureq, &resp); err != nil {
		return 0, false, stdFailed(ctx, w, r, cl, err, ctx.Err() == context.DeadlineExceeded, rec, t)
	}
	t.headArrived(rec, rec.tryAt, resp.Head.Status)
	return h1Answer(w, rt, o, &resp, rec, t)
}

// h1Answer forwards an HTTP/1.1 upstream's response resp (its head
// arrived) to an HTTP/2 client, unless its status is retried; it returns
// what forwardH2 does.
func h1Answer(w http.ResponseWriter, rt *Route, o *outbound, resp *upstream.Response, rec *record, t *stdTry) (status int, cut, retried bool) {
	if resp.Head.Status >= 500 && t.again(chain.Failure{Status: resp.Head.Status, After: retryAfterOf(&resp.Head)}) {
		return resp.Head.Status, false, true
	}
	h := w.Header()
	copyFields(h, &resp.Head, rt)
	for _, f := range rt.ResponseAdd {
		h.Add(f.Name, f.Value)
	}
	addRateLimit(h, t.pass)
	keepUntyped(h)
	rec.upstream(resp.Head.Status)
	w.WriteHeader(resp.Head.Status)
	if !httpwire.NoBody(o.method, resp.Head.Status) {
		if !streamBody(w, resp.Body, resp.Head.ContentLength, rec) {
			return resp.Head.Status, true, false
		}
		for _, f := range resp.Trailers() {
			h[http.TrailerPrefix+string(f.Name)] = append(h[http.TrailerPrefix+string(f.Name)], string(f.Value))
		}
	}
	return resp.Head.Status, false, false
}

// copyFields copies an HTTP/1.1 upstream's response fields into an
// HTTP/2 client's header — hop-by-hop and framing fields and the route's
// removals left out, Content-Length set from the parsed length — with
// canonical names. Every name and value is a piece of one string and
// every first value a piece of one slice: two allocations for the head,
// not two or three per field.
func copyFields(h http.Header, head *httpwire.ResponseHead, rt *Route) {
	skip := func(f *httpwire.Field) bool {
		return head.HopByHop(f.Name) || isFraming(f.Name) || removed(f.Name, rt.ResponseRemove)
	}
	size, n := 0, 0
	for i := range head.Fields {
		if f := &head.Fields[i]; !skip(f) {
			size, n = size+len(f.Name)+len(f.Value), n+1
		}
	}
	if head.ContentLength >= 0 {
		size, n = size+len("Content-Length")+20, n+1
	}
	if n == 0 {
		return
	}
	var spans [64]int // where each name and value ends in b
	sp := spans[:0]
	b := make([]byte, 0, size)
	for i := range head.Fields {
		if f := &head.Fields[i]; !skip(f) {
			b = appendCanonical(b, f.Name)
			sp = append(sp, len(b))
			b = append(b, f.Value...)
			sp = append(sp, len(b))
		}
	}
	if head.ContentLength >= 0 {
		b = append(b, "Content-Length"...)
		sp = append(sp, len(b))
		b = strconv.AppendInt(b, head.ContentLength, 10)
		sp = append(sp, len(b))
	}
	all := bstr(b) // b is not written again
	vals := make([]string, 0, n)
	at := 0
	for i := 0; i+1 < len(sp); i += 2 {
		k, v := all[at:sp[i]], all[sp[i]:sp[i+1]]
		at = sp[i+1]
		if vs, ok := h[k]; ok && k != "Content-Length" {
			h[k] = append(vs, v)
			continue
		}
		vals = append(vals, v)
		h[k] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
}

// stdProblem maps a failed exchange to its refusal: the route's timeout
// when the context's deadline passed, else the upstream error's class.
func stdProblem(ctx context.Context, cl *Cluster, err error) *Problem {
	if ctx.Err() == context.DeadlineExceeded {
		return cl.timeout
	}
	return cl.problemFor(err)
}

// stdRequest turns an upstream head built by appendHead into an
// *http.Request for addr (HTTP/2 transports take requests, not bytes).
func stdRequest(ctx context.Context, head []byte, addr string, body io.ReadCloser, length int64) (*http.Request, error) {
	var h httpwire.RequestHead
	if _, err := httpwire.ParseRequestHead(head, &h, httpwire.Limits{MaxHeaderBytes: len(head) + 1, MaxFields: 1 << 16}); err != nil {
		return nil, err
	}
	u := &url.URL{Scheme: "http", Host: addr, Path: string(h.Path), RawQuery: string(h.Query)}
	if p, err := url.PathUnescape(u.Path); err == nil {
		u.Path, u.RawPath = p, string(h.Path)
	}
	req := &http.Request{
		Method: string(h.Method), URL: u, Host: string(h.Host), Header: make(http.Header, len(h.Fields)),
		Proto: "HTTP/2.0", ProtoMajor: 2, Body: body, ContentLength: length,
	}
	for i := range h.Fields {
		f := &h.Fields[i]
		if httpwire.EqualFold(f.Name, "host") || isFraming(f.Name) {
			continue
		}
		req.Header.Add(string(f.Name), string(f.Value))
	}
	if body == nil {
		req.Body = http.NoBody
	}
	return req.WithContext(ctx), nil
}

// copyHeader copies an upstream's header to the client, minus hop-by-hop
// fields and the route's removals, plus its additions.
func copyHeader(dst, src http.Header, rt *Route) {
	for k, vs := range src {
		if staticHop([]byte(k)) || removed([]byte(k), rt.ResponseRemove) {
			continue
		}
		dst[k] = vs
	}
	for _, f := range rt.ResponseAdd {
		dst.Add(f.Name, f.Value)
	}
	keepUntyped(dst)
}

// keepUntyped keeps net/http's server from adding a Content-Type the upstream
// did not send (it sniffs the body when the field is absent, not when it
// is present and empty): the client sees what the HTTP/1.1 engine shows.
func keepUntyped(h http.Header) {
	if _, ok := h["Content-Type"]; !ok {
		h["Content-Type"] = nil
	}
}

// writeInterim forwards an upstream's 1xx head (103 Early Hints, 102) to
// an HTTP/2 client at once, as the HTTP/1.1 engine does. A 100 Continue is
// not forwarded: x/net/http2 answers the client's Expect itself. The
// header map is empty before the final head, and emptied again after.
func writeInterim(w http.ResponseWriter, ih *httpwire.ResponseHead) {
	if ih.Status == http.StatusContinue {
		return
	}
	h := w.Header()
	for i := range ih.Fields {
		if f := &ih.Fields[i]; !ih.HopByHop(f.Name) && !isFraming(f.Name) {
			h.Add(string(f.Name), string(f.Value))
		}
	}
	w.WriteHeader(ih.Status)
	clear(h)
}

// streamBody copies a body of length bytes (-1: unknown) to w, flushing
// whenever the source has nothing more at hand (gRPC messages and event
// streams go out as they come) — except after the last byte of a body of
// known length, which the handler's return sends with the end of the
// stream in one frame. It reports whether the whole body went out (the
// source ended with io.EOF); a failed read is kept in rec.upErr.
func streamBody(w http.ResponseWriter, body io.Reader, length int64, rec *record) bool {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	rc := http.NewResponseController(w)
	var sent int64
	for {
		n, err := body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return false
			}
			sent += int64(n)
			rec.bytesOut += int64(n)
			if length >= 0 && sent >= length {
				continue // the next Read says EOF; the end goes with the last frame
			}
			if n < len(buf) {
				_ = rc.Flush()
			}
		}
		if err != nil {
			if err != io.EOF {
				rec.upErr = err
			}
			return err == io.EOF
		}
	}
}

// fieldsOf lists an http.Header's fields.
func fieldsOf(h http.Header) []httpwire.Field {
	var out []httpwire.Field
	for k, vs := range h {
		for _, v := range vs {
			out = append(out, httpwire.Field{Name: []byte(k), Value: []byte(v)})
		}
	}
	return out
}

// bodyGate is a request body handed to an upstream transport, which may
// still be reading it in its own goroutine when the exchange is over
// (x/net's transport does after an early answer, a timeout or a reset,
// and closes the body later still). shut, called before the handler returns, closes the body
// (so a Read in progress returns), waits for that Read, and makes later
// Reads fail: the server's body and its deadlines are never touched
// after the handler is done.
type bodyGate struct {
	rc     io.ReadCloser
	idle   *idleCut     // touched by every byte read; may be nil
	read   *int64       // counts the bytes read (under mu, read after shut)
	mu     sync.RWMutex // held shared by each Read, exclusively by shut
	closed bool         // guarded by mu
}

func (g *bodyGate) Read(p []byte) (int, error) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.closed {
		return 0, errBodyGone
	}
	n, err := g.rc.Read(p)
	if n > 0 {
		g.idle.touch()
		*g.read += int64(n)
	}
	return n, err
}

// Close passes the transport's close on (the server's body may be closed
// while a Read is in progress: that is how the Read is ended).
func (g *bodyGate) Close() error { return g.rc.Close() }

func (g *bodyGate) shut() {
	_ = g.rc.Close()
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

var errBodyGone = errors.New("proxy: request body read after the exchange ended")

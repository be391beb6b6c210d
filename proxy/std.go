package proxy

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"

	"github.com/spillwayhq/spillway/httpwire"
	"github.com/spillwayhq/spillway/request"
	"github.com/spillwayhq/spillway/upstream"
)

// forwardStd forwards a request received by the HTTP/2 engine: to an
// HTTP/2 cluster through its transport (gRPC end to end, trailers both
// ways), or to an HTTP/1.1 cluster through its pools. The upstream head is
// built by appendHead, as for the HTTP/1.1 engine.
func forwardStd(s *Server, w http.ResponseWriter, r *http.Request, v *request.View, rt *Route, o *outbound, rec *record) {
	cl := rt.Cluster
	isHead := r.Method == http.MethodHead
	now := rec.start
	es, err := cl.pick(now, v)
	if err != nil {
		rec.answer(w, cl.noEndpoint, isHead)
		return
	}
	rec.endpoint = es.Addr()
	head := appendHead(make([]byte, 0, 1024), o, rt)
	if rec.log {
		rec.reqID = string(head[o.idAt:o.idEnd])
	}
	ctx, cancel := stdContext(r.Context(), rt)
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
	} else if r.Body != nil && r.Body != http.NoBody {
		g := &bodyGate{rc: r.Body, idle: idle, read: &rec.bytesIn}
		defer g.shut()
		gr := *r // the engine's copy: the caller's request is not changed
		gr.Body = g
		r = &gr
	}
	status, cut := 0, false
	if cl.H2 != nil {
		status, cut = forwardH2(ctx, w, r, rt, head, es.Addr(), idle, rec)
	} else if pool := cl.pool(es.Addr()); pool != nil {
		status, cut = forwardH1(ctx, w, r, rt, o, head, pool, rec)
	} else {
		rec.answer(w, cl.noEndpoint, isHead)
		es.Done(now, -1, false)
		return
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
	rec.at = s.cfg.Clock.Now()
	cl.finish(es, now, rec.at, status, how)
	if cut {
		// The head is gone and the body is short: reset the stream
		// (net/http's sentinel for it), so the client cannot take the
		// truncated body for a whole one.
		panic(http.ErrAbortHandler)
	}
}

func stdContext(parent context.Context, rt *Route) (context.Context, context.CancelFunc) {
	if !rt.Streaming && rt.RequestTimeout > 0 {
		return context.WithTimeout(parent, rt.RequestTimeout)
	}
	return context.WithCancel(parent)
}

// forwardH2 sends the request through the cluster's HTTP/2 transport. It
// returns the upstream's status (0 when none was forwarded) and whether
// the response body was cut after its head went out.
//
// On a streaming route, idle ends the exchange after a silence both ways.
func forwardH2(ctx context.Context, w http.ResponseWriter, r *http.Request, rt *Route, head []byte, addr string, idle *idleCut, rec *record) (int, bool) {
	cl := rt.Cluster
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hdr := newHeaderTimer(rt.ResponseHeaderTimeout, cancel)
	req, err := stdRequest(hctx, head, addr, sendBody(r.Body, hdr), r.ContentLength)
	if err != nil {
		rec.answer(w, cl.badResponse, r.Method == http.MethodHead)
		return 0, false
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
		p := stdProblem(ctx, cl, err)
		if timedOut {
			p = cl.timeout
		}
		rec.failedStd(w, r, p, err, timedOut)
		return 0, false
	}
	defer resp.Body.Close()
	rec.headArrived()
	// x/net's transport looks at the context only between its own steps:
	// a response body read, or the copy of a request body the client has
	// not finished, blocks past the route's request timeout. Closing the
	// response body when the context ends cuts both (the stream is reset).
	stop := context.AfterFunc(ctx, func() { _ = resp.Body.Close() })
	defer stop()
	copyHeader(w.Header(), resp.Header, rt)
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
		return resp.StatusCode, true
	}
	for k, vs := range resp.Trailer {
		w.Header()[http.TrailerPrefix+k] = vs
	}
	return resp.StatusCode, false
}

// forwardH1 sends an HTTP/2 client's request to an HTTP/1.1 pool; it
// returns what forwardH2 does.
func forwardH1(ctx context.Context, w http.ResponseWriter, r *http.Request, rt *Route, o *outbound, head []byte, pool *upstream.Pool, rec *record) (int, bool) {
	cl := rt.Cluster
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
		rec.failedStd(w, r, stdProblem(ctx, cl, err), err, ctx.Err() == context.DeadlineExceeded)
		return 0, false
	}
	rec.headArrived()
	h := w.Header()
	for i := range resp.Head.Fields {
		f := &resp.Head.Fields[i]
		if resp.Head.HopByHop(f.Name) || isFraming(f.Name) || removed(f.Name, rt.ResponseRemove) {
			continue
		}
		h.Add(string(f.Name), string(f.Value))
	}
	for _, f := range rt.ResponseAdd {
		h.Add(f.Name, f.Value)
	}
	keepUntyped(h)
	if resp.Head.ContentLength >= 0 {
		h.Set("Content-Length", strconv.FormatInt(resp.Head.ContentLength, 10))
	}
	rec.upstream(resp.Head.Status)
	w.WriteHeader(resp.Head.Status)
	if !httpwire.NoBody(o.method, resp.Head.Status) {
		if !streamBody(w, resp.Body, resp.Head.ContentLength, rec) {
			return resp.Head.Status, true
		}
		for _, f := range resp.Trailers() {
			h[http.TrailerPrefix+string(f.Name)] = append(h[http.TrailerPrefix+string(f.Name)], string(f.Value))
		}
	}
	return resp.Head.Status, false
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

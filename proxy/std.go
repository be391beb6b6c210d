package proxy

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/spillwayhq/spillway/httpwire"
	"github.com/spillwayhq/spillway/request"
	"github.com/spillwayhq/spillway/upstream"
)

// forwardStd forwards a request received by the HTTP/2 engine: to an
// HTTP/2 cluster through its transport (gRPC end to end, trailers both
// ways), or to an HTTP/1.1 cluster through its pools. The upstream head is
// built by appendHead, as for the HTTP/1.1 engine.
func forwardStd(s *Server, w http.ResponseWriter, r *http.Request, v *request.View, rt *Route, o *outbound) {
	cl := rt.Cluster
	isHead := r.Method == http.MethodHead
	now := s.cfg.Clock.Now()
	es, err := cl.pick(now, v)
	if err != nil {
		cl.noEndpoint.writeHTTP(w, isHead)
		return
	}
	head := appendHead(make([]byte, 0, 1024), o, rt)
	ctx, cancel := stdContext(r.Context(), rt)
	defer cancel()
	es.Start()
	status := 0
	if cl.H2 != nil {
		status = forwardH2(ctx, w, r, rt, head, es.Addr())
	} else if pool := cl.pool(es.Addr()); pool != nil {
		status = forwardH1(ctx, w, r, rt, o, head, pool)
	} else {
		cl.noEndpoint.writeHTTP(w, isHead)
		es.Done(now, -1, false)
		return
	}
	how := endOK
	switch {
	case r.Context().Err() != nil:
		how = endClient // the client went away: no sample
	case status == 0:
		how = endUpstream
	}
	cl.finish(es, now, s.cfg.Clock.Now(), status, how)
}

func stdContext(parent context.Context, rt *Route) (context.Context, context.CancelFunc) {
	if !rt.Streaming && rt.RequestTimeout > 0 {
		return context.WithTimeout(parent, rt.RequestTimeout)
	}
	return context.WithCancel(parent)
}

// forwardH2 sends the request through the cluster's HTTP/2 transport.
func forwardH2(ctx context.Context, w http.ResponseWriter, r *http.Request, rt *Route, head []byte, addr string) int {
	cl := rt.Cluster
	req, err := stdRequest(ctx, head, addr, r.Body, r.ContentLength)
	if err != nil {
		cl.badResponse.writeHTTP(w, r.Method == http.MethodHead)
		return 0
	}
	if r.Header.Get("Te") == "trailers" {
		req.Header["Te"] = []string{"trailers"}
	}
	req.Trailer = r.Trailer
	resp, err := cl.H2.RoundTrip(req)
	if err != nil {
		stdProblem(ctx, cl, err).writeHTTP(w, r.Method == http.MethodHead)
		return 0
	}
	defer resp.Body.Close()
	copyHeader(w.Header(), resp.Header, rt)
	for k := range resp.Trailer {
		w.Header().Add("Trailer", k)
	}
	w.WriteHeader(resp.StatusCode)
	streamBody(w, resp.Body)
	for k, vs := range resp.Trailer {
		w.Header()[http.TrailerPrefix+k] = vs
	}
	return resp.StatusCode
}

// forwardH1 sends an HTTP/2 client's request to an HTTP/1.1 pool.
func forwardH1(ctx context.Context, w http.ResponseWriter, r *http.Request, rt *Route, o *outbound, head []byte, pool *upstream.Pool) int {
	cl := rt.Cluster
	ureq := upstream.Request{
		Method: o.method, Head: head, Replayable: o.length == bodyNone && idempotent(o.method),
		HeaderTimeout: rt.ResponseHeaderTimeout,
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
	if err := pool.RoundTrip(ctx, &ureq, &resp); err != nil {
		stdProblem(ctx, cl, err).writeHTTP(w, r.Method == http.MethodHead)
		return 0
	}
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
	if resp.Head.ContentLength >= 0 {
		h.Set("Content-Length", strconv.FormatInt(resp.Head.ContentLength, 10))
	}
	w.WriteHeader(resp.Head.Status)
	if !httpwire.NoBody(o.method, resp.Head.Status) {
		streamBody(w, resp.Body)
		for _, f := range resp.Trailers() {
			h[http.TrailerPrefix+string(f.Name)] = append(h[http.TrailerPrefix+string(f.Name)], string(f.Value))
		}
	}
	return resp.Head.Status
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
}

// streamBody copies a body to w, flushing whenever the source has nothing
// more at hand (gRPC messages and event streams go out as they come).
func streamBody(w http.ResponseWriter, body io.Reader) {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	rc := http.NewResponseController(w)
	for {
		n, err := body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			if n < len(buf) {
				_ = rc.Flush()
			}
		}
		if err != nil {
			return
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

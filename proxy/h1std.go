package proxy

import (
	"io"
	"net/http"
	"strconv"

	"github.com/spillwayhq/spillway/httpwire"
)

// forwardH2 sends an HTTP/1.1 client's request to an HTTP/2 cluster (a
// backend that speaks only h2 or h2c) and writes the answer back in
// HTTP/1.1. This path allocates (an *http.Request per exchange); the
// HTTP/1.1-to-HTTP/1.1 path does not.
func (c *h1conn) forwardH2(rt *Route, m int) bool {
	cl := c.rec.cl
	hasBody := c.out.length > 0 || c.out.length == bodyChunked
	es, err := cl.pick(c.rec.start, &c.view)
	if err != nil {
		return c.writeProblem(cl.noEndpoint, c.head.KeepAlive && !hasBody)
	}
	c.rec.endpoint = es.Addr()
	ctx := c.exchange()
	c.prepareRequest(rt, m, hasBody)
	hdr := newHeaderTimer(rt.ResponseHeaderTimeout, ctx.cancelFn)
	idle := newIdleCut(rt, ctx.cancelFn)
	defer idle.stop()
	var body io.ReadCloser
	if hasBody {
		body = io.NopCloser(touchReader{&c.body, idle})
	}
	req, err := stdRequest(ctx, c.wbuf, es.Addr(), body, c.out.length)
	if err != nil {
		es.Done(c.rec.start, -1, false)
		c.writeProblem(cl.badResponse, false)
		return false
	}
	if c.out.length == bodyChunked {
		req.ContentLength = -1
		// Trailers arrive after the body: the transport sends what the
		// map holds when the body ends, and the body fills it then.
		req.Trailer = c.announcedTrailers()
		req.Body = io.NopCloser(touchReader{&trailerFill{c: c, h: req.Trailer}, idle})
	}
	req.Body = sendBody(req.Body, hdr)
	c.watch.arm(ctx.cancelFn, requestTimeout(rt))
	if !hasBody {
		c.watch.start()
	}
	c.rec.sending()
	resp, err := cl.H2.RoundTrip(req)
	hdr.stop()
	if err != nil {
		c.watch.stop()
		timedOut := c.watch.timedOut || hdr.timedOut() || idle.timedOut()
		c.finishFailed(es, err, timedOut)
		return c.upstreamFailed(cl, err, timedOut)
	}
	c.rec.headArrived()
	if idle != nil {
		resp.Body = readCloser{touchReader{resp.Body, idle}, resp.Body}
	}
	keep := c.copyStdResponse(rt, m, resp, hasBody)
	_ = resp.Body.Close()
	c.watch.stop()
	c.finished(es, resp.StatusCode)
	return keep && !c.watch.gone
}

// copyStdResponse writes an *http.Response to the HTTP/1.1 client.
func (c *h1conn) copyStdResponse(rt *Route, m int, resp *http.Response, hasBody bool) bool {
	keep := c.head.KeepAlive && (!hasBody || c.body.done) && c.mayKeep()
	c.rec.upstream(resp.StatusCode)
	noBody := httpwire.NoBody(c.method[:m], resp.StatusCode)
	b := httpwire.AppendStatusLine(c.wbuf[:0], resp.StatusCode, nil)
	for k, vs := range resp.Header {
		if staticHop([]byte(k)) || isFraming([]byte(k)) || removed([]byte(k), rt.ResponseRemove) {
			continue
		}
		for _, v := range vs {
			b = append(append(append(append(b, k...), ": "...), v...), "\r\n"...)
		}
	}
	for _, f := range rt.ResponseAdd {
		b = append(append(append(append(b, f.Name...), ": "...), f.Value...), "\r\n"...)
	}
	chunked := false
	switch {
	case noBody:
		if c.isHead && resp.ContentLength >= 0 {
			b = strconv.AppendInt(append(b, "Content-Length: "...), resp.ContentLength, 10)
			b = append(b, "\r\n"...)
		}
	case resp.ContentLength >= 0 && len(resp.Trailer) == 0:
		b = strconv.AppendInt(append(b, "Content-Length: "...), resp.ContentLength, 10)
		b = append(b, "\r\n"...)
	case c.head.Minor >= 1:
		chunked = true
		b = append(b, "Transfer-Encoding: chunked\r\n"...)
	default:
		keep = false
	}
	if !keep {
		b = append(b, "Connection: close\r\n"...)
	}
	b = append(b, "\r\n"...)
	c.wbuf = b
	c.armSend()
	if _, err := c.bw.Write(b); err != nil {
		return false
	}
	if noBody {
		return keep && c.flush() == nil
	}
	var cw httpwire.ChunkedWriter
	var w io.Writer = c.bw
	if chunked {
		cw.Reset(c.bw)
		w = &cw
	}
	if err := c.streamStd(w, resp.Body); err != nil {
		_ = c.flush()
		return false
	}
	if chunked && cw.Close(fieldsOf(resp.Trailer)) != nil {
		return false
	}
	return keep && c.flush() == nil
}

// streamStd copies an HTTP/2 upstream's body to w (the client's writer,
// or a chunked writer over it), re-arming the send deadline on every write
// and flushing whenever the upstream has nothing more at hand, as copyBody
// does for HTTP/1.1 upstreams: a stream reaches the client as it is
// produced, and a long steady download is not cut by a deadline set once.
func (c *h1conn) streamStd(w io.Writer, body io.Reader) error {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	for {
		n, err := body.Read(buf)
		if n > 0 {
			c.armSend()
			if _, werr := w.Write(buf[:n]); werr != nil {
				return werr
			}
			c.rec.bytesOut += int64(n)
			if n < len(buf) && err == nil {
				if werr := c.bw.Flush(); werr != nil {
					return werr
				}
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			c.rec.upErr = err
			return err
		}
	}
}

// announcedTrailers returns the trailer names the client's Trailer field
// announced, as keys without values: x/net/http2's transport sends only
// trailers declared before the body (an HTTP/1.1 client that did not
// announce its trailers loses them on the way to an HTTP/2 upstream).
func (c *h1conn) announcedTrailers() http.Header {
	h := http.Header{}
	for i := range c.head.Fields {
		f := &c.head.Fields[i]
		if !httpwire.EqualFold(f.Name, "trailer") {
			continue
		}
		for v := f.Value; len(v) > 0; {
			var tok []byte
			tok, v = nextToken(v)
			if len(tok) > 0 {
				h[http.CanonicalHeaderKey(string(tok))] = nil
			}
		}
	}
	return h
}

// trailerFill is the client's chunked body toward an HTTP/2 upstream: at
// its end it copies the client's trailers into the request's Trailer map.
type trailerFill struct {
	c *h1conn
	h http.Header
}

func (t *trailerFill) Read(p []byte) (int, error) {
	n, err := t.c.body.Read(p)
	if err == io.EOF {
		for _, f := range t.c.body.trailers() {
			t.h.Add(string(f.Name), string(f.Value))
		}
	}
	return n, err
}

// readCloser pairs a reader with the closer of the body it wraps.
type readCloser struct {
	io.Reader
	io.Closer
}

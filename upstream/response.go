package upstream

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"time"

	"github.com/spillwayhq/spillway/httpwire"
)

// Response is the answer to one exchange. The engine keeps one per request
// slot and reuses it: its buffers keep their capacity, so a steady state
// allocates nothing.
type Response struct {
	// Head is the final response head; its fields point into the Response's
	// own buffer and are valid until the next RoundTrip with it.
	Head httpwire.ResponseHead
	// Body reads the decoded body: Content-Length bytes, chunked (decoded;
	// trailers in Trailers after EOF), until the server closes, or nothing
	// (HEAD, 1xx, 204, 304, 2xx to CONNECT). Its errors are *Error.
	Body io.Reader
	// Reused says the exchange went over a connection taken from the pool.
	Reused bool

	c         *conn
	ctx       context.Context
	stop      func() bool // ends the context watch; nil when none
	lim       httpwire.Limits
	maxHead   int
	framing   httpwire.Framing
	remain    int64         // body bytes left (FramingLength)
	readTO    time.Duration // ReadTimeout: re-arm the read deadline per read
	keepAlive bool          // the connection may carry another exchange after this body
	done      bool          // the body was read to its end
	failed    bool          // a body read failed
	hijack    bool          // a 101 or a 2xx to CONNECT: the connection may be hijacked
	headBuf   []byte
	body      bodyReader
	chunked   httpwire.ChunkedReader
}

// bodyReader is Response.Body; a distinct type so that Response itself is
// not an io.Reader.
type bodyReader struct{ r *Response }

func (b *bodyReader) Read(p []byte) (int, error) { return b.r.read(p) }

// errClosed is the cause of reading a Body after Close.
var errClosed = errors.New("response body read after Close")

// afterFuncer is a context that schedules a function for its end itself
// (the AfterFunc method context.AfterFunc also looks for): calling it
// directly skips context.AfterFunc's two allocations per exchange.
type afterFuncer interface {
	AfterFunc(f func()) (stop func() bool)
}

// start readies r for an exchange on c and watches ctx.
func (r *Response) start(ctx context.Context, c *conn, req *Request, reused bool) {
	r.c, r.ctx, r.Reused = c, ctx, reused
	r.lim = c.pool.cfg.Limits
	r.maxHead = c.pool.cfg.maxHeaderBytes()
	r.framing, r.remain = httpwire.FramingNone, 0
	r.readTO = req.ReadTimeout
	r.keepAlive, r.done, r.failed, r.hijack = false, false, false, false
	r.body.r = r
	r.Body = &r.body
	if a, ok := ctx.(afterFuncer); ok {
		r.stop = a.AfterFunc(c.cancelFn) // no allocation: the engine's reusable context
	} else if ctx.Done() != nil {
		r.stop = context.AfterFunc(ctx, c.cancelFn)
	}
}

// fail ends a failed exchange: the connection is closed.
func (r *Response) fail() {
	r.keepAlive, r.done = false, false
	r.Close()
}

// Close releases the connection: back to the pool when the body was read to
// its end (or its rest is already buffered, then skipped) and the exchange
// allows keep-alive, else closed. It is idempotent, and a no-op after Hijack.
func (r *Response) Close() {
	c := r.c
	if c == nil {
		return
	}
	r.c, r.ctx = nil, nil
	reuse := r.keepAlive && !r.failed
	if reuse && !r.done {
		reuse = r.framing == httpwire.FramingLength && r.remain <= int64(c.br.Buffered())
		if reuse {
			c.br.Discard(int(r.remain))
		}
	}
	if reuse && c.br.Buffered() > 0 {
		reuse = false // bytes beyond the response: the server is out of step
	}
	if r.stop != nil {
		if !r.stop() {
			reuse = false // the context ended: the connection is closed
		}
		r.stop = nil
	}
	c.pool.release(c, reuse && !c.canceled.Load()) // deadlines left armed: the next exchange renews them
}

// Framing says how Body is delimited on the upstream connection (the
// engine re-frames it for its client): FramingNone, FramingLength
// (Head.ContentLength bytes), FramingChunked or FramingClose.
func (r *Response) Framing() httpwire.Framing { return r.framing }

// Trailers returns the trailer fields of a chunked body once Body returned
// io.EOF, else nil. They are valid until the next RoundTrip.
func (r *Response) Trailers() []httpwire.Field {
	if r.framing != httpwire.FramingChunked || !r.done {
		return nil
	}
	return r.chunked.Trailers()
}

// Hijack takes the connection after a 101 Switching Protocols response (or
// a 2xx to CONNECT): the caller owns the returned conn, with no deadline set,
// and its buffered reader, which may hold bytes the server sent after the
// head. The pool forgets the connection, and the request's context no
// longer watches it (if the context ended first, the connection is closed
// already and its reads fail). It returns nil, nil for any other response,
// after Close or a second Hijack.
func (r *Response) Hijack() (net.Conn, *bufio.Reader) {
	c := r.c
	if c == nil || !r.hijack {
		return nil, nil
	}
	r.c, r.ctx = nil, nil
	if r.stop != nil {
		r.stop()
		r.stop = nil
	}
	c.clearDeadlines()
	c.idleTimer.Stop()
	c.pool.dropSlot()
	return c.nc, c.br
}

// read is Body.Read.
func (r *Response) read(p []byte) (int, error) {
	if r.done {
		return 0, io.EOF
	}
	c := r.c
	if c == nil {
		return 0, &Error{Kind: KindReset, Op: "read response body", Err: errClosed}
	}
	if r.failed {
		return 0, &Error{Kind: KindReset, Op: "read response body", Err: errClosed}
	}
	if len(p) == 0 {
		return 0, nil
	}
	if r.readTO > 0 { // every read: a deadline armed long ago may pass on a buffered read's refill
		c.setReadDeadline(r.readTO)
	}
	var n int
	var err error
	switch r.framing {
	case httpwire.FramingLength:
		if int64(len(p)) > r.remain {
			p = p[:r.remain]
		}
		n, err = c.br.Read(p)
		r.remain -= int64(n)
		if r.remain == 0 {
			r.done, err = true, io.EOF
		} else if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
	case httpwire.FramingChunked:
		n, err = r.chunked.Read(p)
		r.done = err == io.EOF
	case httpwire.FramingClose:
		n, err = c.br.Read(p)
		r.done = err == io.EOF
	default:
		r.done, err = true, io.EOF
	}
	if err != nil && err != io.EOF {
		r.failed = true
		err = ioError(r.ctx, "read response body", c.canceled.Load(), err)
	}
	return n, err
}

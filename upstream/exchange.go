package upstream

import (
	"cmp"
	"context"
	"io"
	"sync"

	"github.com/spillwayhq/spillway/httpwire"
)

// bodyBufs holds the buffers request bodies are copied through.
var bodyBufs = sync.Pool{New: func() any { return new([bodyBufSize]byte) }}

// RoundTrip sends req on a pooled (or new) connection and reads the
// response head into resp, which the caller reuses across requests; resp's
// Body then streams the response body and resp.Close releases the
// connection (RoundTrip closes a resp left open by the previous exchange).
//
// The context's end closes the connection at once (context.AfterFunc) and
// RoundTrip, or a later Body.Read, returns an *Error of KindCanceled; the
// watch lasts until resp.Close. A context that can never end costs nothing.
//
// The request is written whole (head, then the body streamed through a
// pooled 32 KiB buffer, flushed after each read of Body) before the
// response is read. A server may answer early (a 413) and stop reading:
// when writing fails because the server closed or reset the connection,
// RoundTrip still reads a response head from it, and if one arrives it is
// delivered (the connection is closed after it) instead of the write error;
// a write that times out or is canceled fails at once. A write that blocks on a
// server that neither reads nor closes is bounded by WriteTimeout and ctx.
//
// A failure on a reused connection before any response byte arrived is
// retried once on a new connection when req is replayable (see
// Request.Replayable). Every error is an *Error.
func (p *Pool) RoundTrip(ctx context.Context, req *Request, resp *Response) error {
	resp.Close()
	if ctx.Err() != nil {
		return &Error{Kind: KindCanceled, Op: "send request", Err: context.Cause(ctx)}
	}
	c, reused, err := p.get(ctx, false)
	if err != nil {
		return err
	}
	err, retry := p.exchange(ctx, c, reused, req, resp)
	if !retry {
		return err
	}
	if c, _, err = p.get(ctx, true); err != nil {
		return err
	}
	err, _ = p.exchange(ctx, c, false, req, resp)
	return err
}

// exchange sends req on c and reads the response head into resp. On
// failure c is closed and retry says whether req may be sent again.
func (p *Pool) exchange(ctx context.Context, c *conn, reused bool, req *Request, resp *Response) (err error, retry bool) {
	resp.start(ctx, c, req, reused)
	werr := c.writeRequest(ctx, req)
	// Only a reset leaves a response worth reading: the server may have
	// answered and closed without reading the whole request.
	if e, ok := werr.(*Error); ok && e.Kind != KindReset { // writeRequest's errors are *Error
		resp.fail()
		return werr, false
	}
	c.setReadDeadline(req.HeaderTimeout)
	gotByte, herr := resp.readHead(req)
	if herr == nil {
		herr = resp.frame(req)
	}
	if herr == nil {
		if werr != nil {
			resp.keepAlive = false // answered early: the request was not sent whole
		}
		if req.ReadTimeout > 0 || !resp.bodyBuffered() {
			c.setReadDeadline(req.ReadTimeout) // else nothing more is read: the head's deadline may stay
		}
		return nil, false
	}
	canceled := c.canceled.Load()
	resp.fail()
	if !reused && !gotByte && !canceled && (isTLSAlert(herr) || isTLSAlert(werr)) {
		// TLS 1.3: the server refuses the client's certificate (or its
		// absence) after the client's side of the handshake, so the dial
		// succeeded and the alert arrives with the first read.
		return &Error{Kind: KindRefused, Op: "handshake", Err: cmp.Or(herr, werr)}, false
	}
	retry = reused && !gotByte && !canceled && (werr != nil || isReset(herr)) && req.replayable()
	if werr != nil && !gotByte {
		return werr, retry
	}
	return ioError(ctx, "read response head", canceled, herr), retry
}

// writeRequest writes req's head and body to c and flushes them.
func (c *conn) writeRequest(ctx context.Context, req *Request) error {
	c.setWriteDeadline(req.WriteTimeout)
	if c.send.Ready() && (req.Body == nil || req.BodyLength == 0) && c.bw.Buffered() == 0 {
		// An HTTP/1.1 server sends nothing before the request, as
		// SendAwait needs; the wait for the head begins in the write.
		c.setReadDeadline(req.HeaderTimeout)
		if rest := c.send.SendAwait(req.Head); len(rest) > 0 {
			if _, err := c.nc.Write(rest); err != nil {
				return ioError(ctx, "write request", c.canceled.Load(), err)
			}
		}
		return nil
	}
	if _, err := c.bw.Write(req.Head); err != nil {
		return ioError(ctx, "write request", c.canceled.Load(), err)
	}
	if req.Body != nil && req.BodyLength != 0 {
		if err := c.writeBody(ctx, req); err != nil {
			return err
		}
	}
	if err := c.bw.Flush(); err != nil {
		return ioError(ctx, "write request", c.canceled.Load(), err)
	}
	return nil
}

// writeBody streams req.Body to c: BodyLength bytes exactly, or chunked
// until EOF followed by the trailers; each read of Body is flushed at once
// so the server sees a slow body as it comes.
func (c *conn) writeBody(ctx context.Context, req *Request) error {
	buf := bodyBufs.Get().(*[bodyBufSize]byte)
	defer bodyBufs.Put(buf)
	chunked := req.BodyLength < 0
	if chunked {
		c.cw.Reset(c.bw)
	}
	for remain := req.BodyLength; remain != 0; {
		b := buf[:]
		if remain > 0 && remain < int64(len(b)) {
			b = b[:remain]
		}
		n, rerr := req.Body.Read(b)
		if n > 0 {
			if err := c.writeChunk(ctx, req, b[:n], chunked); err != nil {
				return err
			}
			if remain > 0 {
				remain -= int64(n)
			}
		}
		if rerr == io.EOF {
			if remain > 0 {
				return &Error{Kind: KindRequestBody, Op: "read request body", Err: ErrBodyTooShort}
			}
			break
		}
		if rerr != nil {
			return &Error{Kind: KindRequestBody, Op: "read request body", Err: rerr}
		}
	}
	if !chunked {
		return nil
	}
	var trailers []httpwire.Field
	if req.Trailers != nil {
		trailers = req.Trailers()
	}
	c.setWriteDeadline(req.WriteTimeout)
	if err := c.cw.Close(trailers); err != nil {
		return ioError(ctx, "write request", c.canceled.Load(), err)
	}
	return nil
}

// writeChunk writes one read of the body (as a chunk when chunked) and
// flushes it.
func (c *conn) writeChunk(ctx context.Context, req *Request, b []byte, chunked bool) error {
	c.setWriteDeadline(req.WriteTimeout)
	var err error
	if chunked {
		_, err = c.cw.Write(b)
	} else {
		_, err = c.bw.Write(b)
	}
	if err == nil {
		err = c.bw.Flush()
	}
	if err != nil {
		return ioError(ctx, "write request", c.canceled.Load(), err)
	}
	return nil
}

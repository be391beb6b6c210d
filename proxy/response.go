package proxy

import (
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spillwayhq/spillway/httpwire"
)

// copyBufs are the 32 KiB buffers bodies are streamed through: one per
// exchange in progress, none per idle connection.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// copyResponse writes the upstream's response head and streams its body
// to the client. It reports whether the connection may serve another
// request.
func (c *h1conn) copyResponse(rt *Route, m int, hasBody bool) bool {
	r := c.resp
	h := &r.Head
	c.sent = false
	keep := c.head.KeepAlive && (!hasBody || c.body.done) && h.KeepAlive && c.mayKeep()
	c.rec.upstream(h.Status)
	noBody := httpwire.NoBody(c.method[:m], h.Status)
	chunked, dated := false, false
	b := httpwire.AppendStatusLine(c.wbuf[:0], h.Status, h.Reason)
	for i := range h.Fields {
		f := &h.Fields[i]
		if h.HopByHop(f.Name) || isFraming(f.Name) || removed(f.Name, rt.ResponseRemove) {
			continue
		}
		dated = dated || httpwire.EqualFold(f.Name, "date")
		b = httpwire.AppendField(b, f.Name, f.Value)
	}
	if !dated {
		b = appendDate(b) // RFC 9110 6.6.1: a recipient with a clock adds one
	}
	if c.out.pass != nil {
		b = appendRateLimit(b, c.out.pass)
	}
	for _, f := range rt.ResponseAdd {
		b = append(append(append(append(b, f.Name...), ": "...), f.Value...), "\r\n"...)
	}
	switch {
	case noBody:
		if h.ContentLength >= 0 && h.Status != 204 && h.Status != 304 && h.Status >= 200 {
			b = strconv.AppendInt(append(b, "Content-Length: "...), h.ContentLength, 10)
			b = append(b, "\r\n"...)
		}
	case h.ContentLength >= 0:
		b = strconv.AppendInt(append(b, "Content-Length: "...), h.ContentLength, 10)
		b = append(b, "\r\n"...)
	case c.head.Minor >= 1:
		chunked = true
		b = appendTE(b, h.TransferEncoding)
	default:
		keep = false // HTTP/1.0 client, no length: the body ends with the connection
	}
	// (c.head's scalars stay valid after the body was read; only its byte
	// slices, which point into the read buffer, do not.)
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
		c.sent = c.finish(keep) == nil
		return keep && c.sent
	}
	c.sent = c.copyBody(chunked, keep)
	return keep && c.sent
}

// copyBody streams the response body, re-framed as chunks when chunked.
// It flushes whenever the upstream has nothing more at hand, so a stream
// (server-sent events, a long poll) reaches the client as it is produced.
func (c *h1conn) copyBody(chunked, keep bool) bool {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	cw := &c.cw
	if chunked {
		cw.Reset(c.bw)
	}
	armed := true // copyResponse armed the write deadline for the head
	for {
		n, err := c.resp.Body.Read(buf)
		if n > 0 {
			if !armed {
				c.armSend()
			}
			armed = false // re-armed before every later write: an inactivity bound
			var werr error
			if chunked {
				_, werr = cw.Write(buf[:n])
			} else {
				_, werr = c.bw.Write(buf[:n])
			}
			c.rec.bytesOut += int64(n)
			if werr == nil && n < len(buf) && err == nil {
				werr = c.bw.Flush()
			}
			if werr != nil {
				return false
			}
		}
		if err == io.EOF {
			if chunked {
				if cw.Close(c.resp.Trailers()) != nil {
					return false
				}
			}
			if c.bw.Buffered() == 0 {
				return true // flushed after the last read
			}
			return c.finish(keep) == nil
		}
		if err != nil {
			// The upstream failed mid-body: the head is gone, so the only
			// honest signal left is to cut the connection (no last chunk).
			c.rec.upErr = err
			_ = c.flush()
			return false
		}
	}
}

func (c *h1conn) flush() error {
	c.armSend()
	return c.bw.Flush()
}

// appendTE writes the Transfer-Encoding of a re-chunked body: chunked,
// after the upstream's other codings (gzip, …), which the body still has.
func appendTE(b, te []byte) []byte {
	b = append(b, "Transfer-Encoding: "...)
	for len(te) > 0 {
		var tok []byte
		tok, te = nextToken(te)
		if len(tok) > 0 && !httpwire.EqualFold(tok, "chunked") {
			b = append(append(b, tok...), ", "...)
		}
	}
	return append(b, "chunked\r\n"...)
}

// dates caches the Date field's value for the current second.
var dates atomic.Pointer[dateValue]

type dateValue struct {
	unix int64
	text []byte
}

// appendDate appends "Date: <now>" in the IMF-fixdate format.
func appendDate(b []byte) []byte {
	now := time.Now()
	d := dates.Load()
	if d == nil || d.unix != now.Unix() {
		d = &dateValue{unix: now.Unix(), text: now.UTC().AppendFormat(nil, http.TimeFormat)}
		dates.Store(d)
	}
	b = append(append(b, "Date: "...), d.text...)
	return append(b, "\r\n"...)
}

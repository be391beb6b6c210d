package h2wire

import (
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/spillwayhq/spillway/httpwire"
)

// WriteHeaders writes the response's headers: status (1xx, any number of
// times, before the final one: 100-599 and up to 999) and fields (names
// are lowercased; connection-specific fields are left out). endStream
// ends the response with them. Headers are buffered like the body; a 1xx
// and the end of the response are flushed.
func (st *Stream) WriteHeaders(status int, fields []httpwire.Field, endStream bool) error {
	switch {
	case st.ended:
		return ErrStreamEnded
	case st.wroteHeaders:
		return ErrHeadersWritten
	case status < 100 || status > 999 || status == 101 || status < 200 && endStream:
		return ErrBadStatus
	}
	if endStream {
		st.endLocal()
	}
	c := st.c
	c.lockWrite()
	err := c.writeHeaderBlock(st, status, fields, endStream)
	if e := c.unlockWrite(endStream || status < 200); err == nil {
		err = e
	}
	if status >= 200 {
		st.wroteHeaders = true
	}
	return err
}

// writeHeaderBlock encodes and writes one header block on st (status 0:
// trailers). wmu held.
func (c *Conn) writeHeaderBlock(st *Stream, status int, fields []httpwire.Field, end bool) error {
	if c.werr != nil {
		return c.werr
	}
	if st.reset.Load() {
		return ErrStreamReset
	}
	c.hbuf.Reset()
	if status > 0 {
		c.enc.WriteField(hpack.HeaderField{Name: ":status", Value: statusText(status)})
	}
	for i := range fields {
		c.encodeField(fields[i].Name, fields[i].Value)
	}
	c.writeBlock(st.id, c.hbuf.Bytes(), end)
	return c.werr
}

// Write writes response body bytes as DATA frames no larger than the
// client's frame size and windows, waiting (up to WriteTimeout) while a
// window is shut. Writes are buffered: Flush sends them, as does the end
// of the response. Without WriteHeaders first, the status is 200.
func (st *Stream) Write(p []byte) (int, error) {
	if st.ended {
		return 0, ErrStreamEnded
	}
	if !st.wroteHeaders {
		if err := st.WriteHeaders(200, nil, false); err != nil {
			return 0, err
		}
	}
	c, written := st.c, 0
	for len(p) > 0 {
		n, err := st.reserve(len(p))
		if err != nil {
			return written, err
		}
		c.lockWrite()
		err = c.writeData(st, p[:n], false)
		if e := c.unlockWrite(false); err == nil {
			err = e
		}
		if err != nil {
			return written, err
		}
		written += n
		p = p[n:]
	}
	return written, nil
}

// writeData writes one DATA frame on st. wmu held.
func (c *Conn) writeData(st *Stream, p []byte, end bool) error {
	if c.werr != nil {
		return c.werr
	}
	if st.reset.Load() {
		return ErrStreamReset
	}
	c.werr = c.fr.WriteData(st.id, end, p)
	return c.werr
}

// reserve takes up to want bytes of send window, waiting while the
// stream's or the connection's is shut.
func (st *Stream) reserve(want int) (int, error) {
	c := st.c
	c.mu.Lock()
	flushed := false
	for {
		if st.err != nil {
			c.mu.Unlock()
			return 0, st.err
		}
		n := min(want, int(st.sendWindow), int(c.sendWindow), int(c.peerMaxFrame.Load()))
		if n > 0 {
			st.sendWindow -= int32(n)
			c.sendWindow -= int32(n)
			c.mu.Unlock()
			return n, nil
		}
		if c.sendWindow <= 0 && !st.waitingConn {
			st.waitingConn = true
			c.connWaiters++
		}
		if !flushed {
			// The client opens windows for what it has received.
			c.mu.Unlock()
			c.flush()
			c.mu.Lock()
			flushed = true
			continue
		}
		d, own := st.waitFor(c.cfg.WriteTimeout, &st.writeDL)
		if d <= 0 || !st.waitLocked(st.wwake, &st.wtimer, d) && st.err == nil &&
			min(int(st.sendWindow), int(c.sendWindow)) <= 0 {
			c.mu.Unlock()
			err := ErrWriteTimeout
			if own {
				err = ErrDeadline
			}
			st.resetCode(http2.ErrCodeCancel, err)
			return 0, err
		}
		flushed = false // what others wrote meanwhile may wait in the buffer
	}
}

// Flush sends the buffered response bytes (with those of other streams).
func (st *Stream) Flush() error { return st.c.flush() }

// WriteTrailers ends the response with trailer fields (after a 200 if no
// headers were written).
func (st *Stream) WriteTrailers(fields []httpwire.Field) error {
	if st.ended {
		return ErrStreamEnded
	}
	if !st.wroteHeaders {
		if err := st.WriteHeaders(200, nil, false); err != nil {
			return err
		}
	}
	st.endLocal()
	c := st.c
	c.lockWrite()
	err := c.writeHeaderBlock(st, 0, fields, true)
	if e := c.unlockWrite(true); err == nil {
		err = e
	}
	return err
}

// Close ends the response (an empty 200 without WriteHeaders first) and
// flushes it.
func (st *Stream) Close() error {
	if st.ended {
		return nil
	}
	if !st.wroteHeaders {
		return st.WriteHeaders(200, nil, true)
	}
	st.endLocal()
	c := st.c
	c.lockWrite()
	err := c.writeData(st, nil, true)
	if e := c.unlockWrite(true); err == nil {
		err = e
	}
	return err
}

// endLocal notes that our END_STREAM is about to go: once both sides have
// ended, the stream's place is given back before the client can learn of
// the end, so that a client opening its next stream at once is not
// refused.
func (st *Stream) endLocal() {
	st.ended = true
	c := st.c
	c.mu.Lock()
	st.localEnded = true
	c.releaseLocked(st)
	c.mu.Unlock()
}

// Reset ends the stream with RST_STREAM code (http2.ErrCodeCancel, say).
func (st *Stream) Reset(code http2.ErrCode) { st.resetCode(code, ErrStreamReset) }

// resetCode resets st, unless it was already; Read and Write return err.
func (st *Stream) resetCode(code http2.ErrCode, err error) {
	c := st.c
	c.lockWrite()
	if !st.reset.Swap(true) && c.werr == nil {
		c.werr = c.fr.WriteRSTStream(st.id, code)
	}
	c.unlockWrite(true)
	c.mu.Lock()
	cinc := c.giveBackLocked(st.failLocked(err))
	st.remoteEnded = true
	c.mu.Unlock()
	c.writeWindowUpdates(0, 0, cinc)
}

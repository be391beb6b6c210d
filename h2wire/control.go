package h2wire

import "time"

// SetReadDeadline bounds the waits of Read for body bytes: past t, a Read
// that would wait returns ErrDeadline and the stream stays open (the
// zero t removes the bound). Config.ReadTimeout still bounds each wait.
// Safe from any goroutine, as net/http's ResponseController deadlines.
func (st *Stream) SetReadDeadline(t time.Time) { setDeadline(&st.readDL, t) }

// SetWriteDeadline bounds the waits of Write for the client's window:
// past t the stream is reset (CANCEL) and the write returns ErrDeadline.
// Config.WriteTimeout still bounds each wait and every write to the
// connection.
func (st *Stream) SetWriteDeadline(t time.Time) { setDeadline(&st.writeDL, t) }

func setDeadline(dl interface{ Store(int64) }, t time.Time) {
	if t.IsZero() {
		dl.Store(0)
		return
	}
	dl.Store(max(t.UnixNano(), 1))
}

// CloseRead ends the request body for the handler: a Read in progress
// returns, and later ones return ErrBodyClosed. What the client still
// sends is discarded when the stream ends (a client that has not ended
// its body by then is asked to stop with RST_STREAM NO_ERROR).
func (st *Stream) CloseRead() {
	c := st.c
	c.mu.Lock()
	st.readClosed = true
	st.wakeRead()
	c.mu.Unlock()
}

// NoBody reports whether the request came without a body: END_STREAM on
// its HEADERS.
func (st *Stream) NoBody() bool { return st.noBody }

// AfterDone arranges for f to run, on a goroutine of its own, when the
// stream ends early — the client resets it, it is reset, or the
// connection ends — the moment Done would close; at once if that has
// happened. A stream holds one f: a later call replaces it, and nil
// removes it. f does not run for a stream whose handler ended it
// normally.
func (st *Stream) AfterDone(f func()) {
	c := st.c
	c.mu.Lock()
	if f != nil && st.err != nil {
		c.mu.Unlock()
		go f()
		return
	}
	st.afterDone = f
	c.mu.Unlock()
}

// GoAway starts the connection's graceful shutdown and returns at once:
// GOAWAY NO_ERROR with the last stream id taken, new streams refused, the
// open ones finished, then the connection closed (Shutdown waits for
// that). Called before the connection's SETTINGS went out, the GOAWAY
// follows them. Calls after the first do nothing.
func (c *Conn) GoAway() { c.goAway() }

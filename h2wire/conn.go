package h2wire

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Conn is one HTTP/2 server connection.
type Conn struct {
	nc    net.Conn
	cfg   Config
	h     Handler
	fr    *http2.Framer
	br    *bufio.Reader
	dec   *hpack.Decoder
	hb    headerBlock // the header block being decoded; the reader's own
	trail reqHead     // trailers being decoded; the reader's own
	rate  resetBucket // the reader's own

	peerMaxFrame atomic.Uint32

	mu          sync.Mutex
	streams     map[uint32]*Stream
	active      int    // streams registered whose handler has not finished
	open        int    // streams holding a place (see releaseLocked)
	connWaiters int    // streams waiting for the connection's send window
	lastID      uint32 // highest client stream id seen
	sendWindow  int32  // connection send window (the client's)
	peerInitial int32  // the client's SETTINGS_INITIAL_WINDOW_SIZE
	recvWindow  int32  // DATA bytes the client may still send on the connection
	recvUnacked int32  // bytes read or discarded, not yet given back
	acked       bool   // the client has acknowledged our SETTINGS
	shutdown    bool   // GOAWAY sent: no new streams
	dead        bool
	drained     chan struct{} // closed when shut down with no stream left
	served      chan struct{} // closed when Serve has returned
	wg          sync.WaitGroup

	writer // the shared write path (write.go)
}

// NewConn returns a connection serving nc; preRead holds bytes already
// read from nc (the preface sniffed for h2c, or nothing). Call Serve.
func NewConn(nc net.Conn, preRead []byte, cfg *Config, h Handler) *Conn {
	c := &Conn{nc: nc, cfg: cfg.resolve(), h: h, streams: make(map[uint32]*Stream), drained: make(chan struct{}), served: make(chan struct{})}
	var r io.Reader = nc
	if len(preRead) > 0 {
		r = io.MultiReader(bytes.NewReader(preRead), nc)
	}
	c.br = bufio.NewReaderSize(r, 16<<10)
	c.initWriter()
	c.fr = http2.NewFramer(c.bw, c.br)
	c.fr.SetReuseFrames()
	c.fr.SetMaxReadFrameSize(c.cfg.MaxFrameSize)
	c.dec = hpack.NewDecoder(4096, c.onField)
	c.dec.SetMaxStringLength(int(2 * c.cfg.MaxHeaderListSize))
	c.peerMaxFrame.Store(16384)
	c.sendWindow, c.peerInitial = minWindow, minWindow
	c.recvWindow = c.cfg.ConnWindow
	c.rate = resetBucket{tokens: c.cfg.ResetBurst, burst: c.cfg.ResetBurst, rate: c.cfg.MaxResetsPerSecond, last: c.cfg.Clock.Now()}
	return c
}

// NetConn returns the connection's net.Conn.
func (c *Conn) NetConn() net.Conn { return c.nc }

// Serve serves the HTTP/2 connection nc until it ends (see NewConn).
func Serve(nc net.Conn, preRead []byte, cfg *Config, h Handler) error {
	return NewConn(nc, preRead, cfg, h).Serve()
}

// Serve reads and dispatches frames until the connection ends, then waits
// for its handlers to return. It closes nc. It returns nil when the
// client closed the connection or it was shut down, the connection error
// otherwise.
func (c *Conn) Serve() error {
	defer close(c.served)
	err := c.serve()
	code, goaway := http2.ErrCodeNo, false
	var ce http2.ConnectionError
	switch {
	case errors.As(err, &ce):
		code, goaway = http2.ErrCode(ce), true
	case errors.Is(err, http2.ErrFrameTooLarge):
		code, goaway = http2.ErrCodeFrameSize, true
	case isTimeout(err):
		goaway = true // idle
	}
	c.mu.Lock()
	shut := c.shutdown
	c.mu.Unlock()
	c.teardown(code, goaway && !(shut && code == http2.ErrCodeNo))
	if code == http2.ErrCodeNo && (shut || isClosed(err) || isTimeout(err)) {
		return nil
	}
	return err
}

// serve is the reader: the connection's only reading goroutine.
func (c *Conn) serve() error {
	c.nc.SetReadDeadline(time.Now().Add(c.cfg.SettingsTimeout))
	if err := c.writePreface(); err != nil {
		return err
	}
	var pre [len(http2.ClientPreface)]byte
	if _, err := io.ReadFull(c.br, pre[:]); err != nil {
		return c.timeoutCode(err)
	}
	if string(pre[:]) != http2.ClientPreface {
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	first := true
	for {
		f, err := c.fr.ReadFrame()
		if err == nil && first {
			if sf, ok := f.(*http2.SettingsFrame); !ok || sf.IsAck() {
				return http2.ConnectionError(http2.ErrCodeProtocol)
			}
			first = false
		}
		if err == nil {
			err = c.process(f)
		}
		if err == nil {
			continue
		}
		var se http2.StreamError
		if errors.As(err, &se) {
			c.resetID(se.StreamID, se.Code)
			continue
		}
		return c.timeoutCode(err)
	}
}

// timeoutCode turns a read timeout into the connection error it means.
func (c *Conn) timeoutCode(err error) error {
	if !isTimeout(err) {
		return err
	}
	c.mu.Lock()
	acked := c.acked
	c.mu.Unlock()
	if !acked {
		return http2.ConnectionError(http2.ErrCodeSettingsTimeout)
	}
	return err // idle: GOAWAY NO_ERROR
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// isClosed reports whether err only says the client went away.
func isClosed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed)
}

// process handles one frame.
func (c *Conn) process(f http2.Frame) error {
	switch f := f.(type) {
	case *http2.DataFrame:
		return c.processData(f)
	case *http2.HeadersFrame:
		return c.processHeaders(f)
	case *http2.SettingsFrame:
		return c.processSettings(f)
	case *http2.PingFrame:
		return c.processPing(f)
	case *http2.WindowUpdateFrame:
		return c.processWindowUpdate(f)
	case *http2.RSTStreamFrame:
		return c.processReset(f)
	case *http2.GoAwayFrame:
		c.goAway()
		return nil
	case *http2.PushPromiseFrame:
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	return nil // PRIORITY, PRIORITY_UPDATE and unknown frames are ignored
}

// teardown ends the connection: every stream fails, GOAWAY with code is
// sent when goaway is set, nc is closed after the client has had a bounded
// chance to read it, and the handlers are waited for.
func (c *Conn) teardown(code http2.ErrCode, goaway bool) {
	c.mu.Lock()
	c.dead = true
	for _, st := range c.streams {
		st.failLocked(ErrConnClosed)
	}
	last := c.lastID
	select {
	case <-c.drained:
	default:
		close(c.drained)
	}
	c.mu.Unlock()
	if goaway {
		c.lockWrite()
		if c.werr == nil {
			c.werr = c.fr.WriteGoAway(last, code, nil)
		}
		c.unlockWrite(true)
	}
	c.lockWrite()
	if c.werr == nil {
		c.werr = ErrConnClosed
	}
	c.unlockWrite(false)
	if goaway {
		c.lingerClose()
	}
	c.nc.Close()
	c.wg.Wait()
}

// lingerClose half-closes nc and reads what the client still sends for up
// to a second (at most 1 MiB), so that its kernel does not answer our
// GOAWAY's arrival with a reset that discards it unread.
func (c *Conn) lingerClose() {
	cw, ok := c.nc.(interface{ CloseWrite() error })
	if !ok || cw.CloseWrite() != nil {
		return
	}
	c.nc.SetReadDeadline(time.Now().Add(time.Second))
	io.CopyN(io.Discard, c.nc, 1<<20)
}

// Shutdown sends GOAWAY NO_ERROR with the last stream id taken, lets the
// open streams finish and refuses new ones, then closes the connection and
// returns once Serve has. When ctx ends first it closes the connection at once (the handlers see
// Done) and returns ctx.Err().
func (c *Conn) Shutdown(ctx context.Context) error {
	c.goAway()
	select {
	case <-c.served:
		return nil
	case <-ctx.Done():
		c.nc.Close()
		return ctx.Err()
	}
}

// goAway starts a graceful shutdown, once.
func (c *Conn) goAway() {
	c.mu.Lock()
	if c.shutdown || c.dead {
		c.mu.Unlock()
		return
	}
	c.shutdown = true
	last := c.lastID
	c.mu.Unlock()
	c.lockWrite()
	if !c.prefaced {
		c.lateGoAway = true // writePreface sends it after our SETTINGS
	} else if c.werr == nil {
		c.werr = c.fr.WriteGoAway(last, http2.ErrCodeNo, nil)
	}
	c.unlockWrite(true)
	c.mu.Lock()
	c.streamEndedLocked()
	c.mu.Unlock()
}

// streamEndedLocked keeps the deadlines and the shutdown in step with the
// number of open streams. c.mu held.
func (c *Conn) streamEndedLocked() {
	if c.active > 0 {
		return
	}
	if c.shutdown {
		select {
		case <-c.drained:
		default:
			close(c.drained)
			// The reader sees EOF (the client closes after our GOAWAY) or
			// this deadline.
			c.nc.SetReadDeadline(time.Now().Add(time.Second))
		}
		return
	}
	c.readDeadlineLocked()
}

// readDeadlineLocked sets the idle deadline when no stream is open and
// clears it when one is, once the client has acknowledged our SETTINGS
// (until then the settings deadline stands). c.mu held.
func (c *Conn) readDeadlineLocked() {
	if !c.acked || c.shutdown || c.dead {
		return
	}
	if c.active == 0 {
		c.nc.SetReadDeadline(time.Now().Add(c.cfg.IdleTimeout))
	} else {
		c.nc.SetReadDeadline(time.Time{})
	}
}

// giveBackLocked counts n bytes the connection window may get back and
// returns the increment to send, once a quarter of the window has
// gathered. c.mu held.
func (c *Conn) giveBackLocked(n int32) int32 {
	c.recvUnacked += n
	if c.recvUnacked < c.cfg.ConnWindow/4 {
		return 0
	}
	inc := c.recvUnacked
	c.recvUnacked = 0
	c.recvWindow += inc
	return inc
}

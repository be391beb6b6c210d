package h2wire

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"

	"github.com/spillwayhq/spillway/httpwire"
)

// Errors a Stream's methods return.
var (
	// ErrStreamReset: the client reset the stream (RST_STREAM), or we did.
	ErrStreamReset = errors.New("h2wire: stream reset")
	// ErrConnClosed: the connection ended.
	ErrConnClosed = errors.New("h2wire: connection closed")
	// ErrReadTimeout: no DATA came within Config.ReadTimeout.
	ErrReadTimeout = errors.New("h2wire: request body read timeout")
	// ErrWriteTimeout: the client's window stayed shut for Config.WriteTimeout.
	ErrWriteTimeout = errors.New("h2wire: flow-control window wait timeout")
	// ErrBodyLength: the DATA did not add up to the request's content-length.
	ErrBodyLength = errors.New("h2wire: request body does not match content-length")
	// ErrDeadline: a deadline set by SetReadDeadline or SetWriteDeadline
	// passed; it wraps os.ErrDeadlineExceeded.
	ErrDeadline = fmt.Errorf("h2wire: stream deadline: %w", os.ErrDeadlineExceeded)
	// ErrBodyClosed: a Read after CloseRead.
	ErrBodyClosed = errors.New("h2wire: read of a closed request body")
	// ErrStreamEnded: a write after the response's end.
	ErrStreamEnded = errors.New("h2wire: write after the end of the response")
	// ErrHeadersWritten: WriteHeaders after the final headers.
	ErrHeadersWritten = errors.New("h2wire: final headers already written")
	// ErrBadStatus: a status outside 100-999, or a 1xx that ends the stream.
	ErrBadStatus = errors.New("h2wire: invalid status for WriteHeaders")
)

// Handler serves streams. ServeStream runs on a pooled worker goroutine;
// the Stream and every slice it returns are valid only until ServeStream
// returns (the Stream is then reused). A response the handler has not
// ended is ended for it (an empty 200 if nothing was written).
type Handler interface {
	ServeStream(st *Stream)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(st *Stream)

// ServeStream calls f(st).
func (f HandlerFunc) ServeStream(st *Stream) { f(st) }

// Stream is one request and its response. The request side (Method to
// Trailers, Read, Done) and the response side (WriteHeaders to Reset) are
// each for one goroutine at a time; Reset and Done may be used from any.
type Stream struct {
	c  *Conn
	id uint32

	// The request, written by the reader before the handler starts;
	// trailers before Read returns io.EOF.
	reqHead
	trailers []httpwire.Field

	// Guarded by c.mu.
	buf         []byte // received body bytes not yet read: buf[off:]
	off         int
	recvWindow  int32 // DATA bytes the client may still send
	unacked     int32 // bytes read by the handler, not yet given back
	received    int64 // DATA bytes received
	remoteEnded bool  // END_STREAM received
	err         error // why the stream ended early
	sendWindow  int32
	waitingConn bool // blocked on the connection's send window
	localEnded  bool // our END_STREAM is written (or about to be)
	slot        bool // counts among the concurrent streams
	doneCh      chan struct{}
	doneClosed  bool
	readClosed  bool   // CloseRead was called
	afterDone   func() // see AfterDone
	noBody      bool   // END_STREAM came with the request's HEADERS (set before the handler runs)

	reset atomic.Bool // no frame may be written on the stream any more

	// Deadlines of SetReadDeadline and SetWriteDeadline, in Unix
	// nanoseconds (0: none).
	readDL, writeDL atomic.Int64

	// The worker's own.
	wroteHeaders, ended bool
	// A Read and a Write may wait at the same time (a request body read by
	// one goroutine while another writes the response): each has its own
	// wakeup (capacity 1) and timer.
	rwake, wwake   chan struct{}
	rtimer, wtimer *time.Timer
}

var streamPool = sync.Pool{New: func() any {
	return &Stream{rwake: make(chan struct{}, 1), wwake: make(chan struct{}, 1)}
}}

// newStream returns a clean Stream for id on c.
func newStream(c *Conn, id uint32) *Stream {
	st := streamPool.Get().(*Stream)
	st.c, st.id = c, id
	st.contentLength, st.host = -1, -1
	return st
}

// recycle clears st and puts it back; nothing may use it afterwards.
func (st *Stream) recycle() {
	if cap(st.buf) > 64<<10 {
		st.buf = nil
	}
	if cap(st.arena) > 64<<10 {
		st.arena = nil
	}
	clear(st.fields)
	clear(st.trailers)
	fields, arena := st.fields[:0], st.arena[:0]
	ch := st.doneCh
	if st.doneClosed {
		ch = nil
	}
	drain(st.rwake)
	drain(st.wwake)
	rw, ww, rt, wt := st.rwake, st.wwake, st.rtimer, st.wtimer
	st.readDL.Store(0)
	st.writeDL.Store(0)
	*st = Stream{
		reqHead:  reqHead{fields: fields, arena: arena},
		trailers: st.trailers[:0], buf: st.buf[:0], doneCh: ch, rwake: rw, wwake: ww, rtimer: rt, wtimer: wt,
	}
	streamPool.Put(st)
}

// Conn returns the stream's connection.
func (st *Stream) Conn() *Conn { return st.c }

// ID returns the stream identifier.
func (st *Stream) ID() uint32 { return st.id }

// Method returns the :method pseudo-header.
func (st *Stream) Method() []byte { return st.method }

// Scheme returns :scheme (empty for CONNECT).
func (st *Stream) Scheme() []byte { return st.scheme }

// Authority returns :authority, or the host field when there is none.
func (st *Stream) Authority() []byte {
	if st.authority == nil && st.host >= 0 {
		return st.fields[st.host].Value
	}
	return st.authority
}

// Path returns :path (empty for CONNECT).
func (st *Stream) Path() []byte { return st.path }

// Fields returns the regular fields: lowercase names, the cookie crumbs
// joined into one field with "; " (RFC 9113 8.2.3).
func (st *Stream) Fields() []httpwire.Field { return st.fields }

// ContentLength returns the request's content-length, or -1 without one.
func (st *Stream) ContentLength() int64 { return st.contentLength }

// Trailers returns the request's trailer fields, once Read has returned
// io.EOF.
func (st *Stream) Trailers() []httpwire.Field { return st.trailers }

// Done returns a channel closed when the client resets the stream, the
// stream is reset, or the connection ends.
func (st *Stream) Done() <-chan struct{} {
	c := st.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if st.doneCh == nil {
		st.doneCh = make(chan struct{})
		if st.err != nil {
			close(st.doneCh)
			st.doneClosed = true
		}
	}
	return st.doneCh
}

// Read reads the request body. It returns io.EOF at its end; the flow
// control window given back as it reads keeps at most Config.StreamWindow
// bytes buffered.
func (st *Stream) Read(p []byte) (int, error) {
	c := st.c
	c.mu.Lock()
	for {
		if st.err != nil || st.readClosed {
			err := st.err
			if err == nil {
				err = ErrBodyClosed
			}
			c.mu.Unlock()
			return 0, err
		}
		if st.off < len(st.buf) || len(p) == 0 {
			break
		}
		if st.remoteEnded {
			c.mu.Unlock()
			return 0, io.EOF
		}
		d, own := st.waitFor(c.cfg.ReadTimeout, &st.readDL)
		if d <= 0 || !st.waitLocked(st.rwake, &st.rtimer, d) && st.err == nil && !st.readClosed &&
			st.off == len(st.buf) && !st.remoteEnded {
			c.mu.Unlock()
			if own { // the caller's deadline: the stream stays
				return 0, ErrDeadline
			}
			st.resetCode(http2.ErrCodeCancel, ErrReadTimeout)
			return 0, ErrReadTimeout
		}
	}
	n := copy(p, st.buf[st.off:])
	st.off += n
	if st.off == len(st.buf) {
		st.off, st.buf = 0, st.buf[:0]
	}
	var sinc int32
	st.unacked += int32(n)
	if !st.remoteEnded && st.unacked >= c.cfg.StreamWindow/4 {
		sinc, st.unacked = st.unacked, 0
		st.recvWindow += sinc
	}
	cinc := c.giveBackLocked(int32(n))
	c.mu.Unlock()
	if st.reset.Load() {
		sinc = 0
	}
	c.writeWindowUpdates(st.id, sinc, cinc)
	return n, nil
}

// waitLocked waits, c.mu unlocked meanwhile, until wake is signalled or d
// has passed (on *timer, made on first use); it reports false on the
// timeout.
func (st *Stream) waitLocked(wake chan struct{}, timer **time.Timer, d time.Duration) bool {
	c := st.c
	c.mu.Unlock()
	if *timer == nil {
		*timer = time.NewTimer(d)
	} else {
		(*timer).Reset(d)
	}
	ok := true
	select {
	case <-wake:
	case <-(*timer).C:
		ok = false
	}
	(*timer).Stop()
	c.mu.Lock()
	return ok
}

// waitFor returns how long a wait may last: limit, or less when the
// deadline dl is nearer (own true then; d <= 0 once it has passed).
func (st *Stream) waitFor(limit time.Duration, dl *atomic.Int64) (d time.Duration, own bool) {
	at := dl.Load()
	if at == 0 {
		return limit, false
	}
	if left := time.Duration(at - time.Now().UnixNano()); left < limit {
		return left, true
	}
	return limit, false
}

// wakeRead wakes st's waiting Read, wakeWrite its waiting Write, wakeUp
// both (any of them that waits).
func (st *Stream) wakeRead()  { signal(st.rwake) }
func (st *Stream) wakeWrite() { signal(st.wwake) }
func (st *Stream) wakeUp()    { signal(st.rwake); signal(st.wwake) }

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func drain(ch chan struct{}) {
	select {
	case <-ch:
	default:
	}
}

// failLocked ends the stream early with err: Read and Write return it,
// Done closes, the waiting handler wakes. It returns the buffered bytes
// the connection window gets back. c.mu held.
func (st *Stream) failLocked(err error) int32 {
	if st.err != nil {
		return 0
	}
	st.err = err
	st.reset.Store(true)
	if st.doneCh != nil && !st.doneClosed {
		close(st.doneCh)
		st.doneClosed = true
	}
	n := int32(len(st.buf) - st.off)
	st.off, st.buf = 0, st.buf[:0]
	st.wakeUp()
	if f := st.afterDone; f != nil {
		st.afterDone = nil
		go f()
	}
	return n
}

// serve runs the handler and ends the stream; on a worker.
func (st *Stream) serve() {
	defer st.finish()
	defer func() {
		if recover() != nil {
			st.resetCode(http2.ErrCodeInternal, ErrStreamReset)
		}
	}()
	st.c.h.ServeStream(st)
}

// finish ends what the handler left open, then forgets the stream.
func (st *Stream) finish() {
	c := st.c
	if !st.ended && !st.reset.Load() {
		st.Close()
	}
	c.mu.Lock()
	st.afterDone = nil // the handler is done: nothing to tell it
	early := !st.remoteEnded && st.err == nil
	if early && st.slot {
		// The reset below ends the stream for the client: its place is
		// free before the client learns it.
		st.slot = false
		c.open--
	}
	c.mu.Unlock()
	if early {
		// The response is complete before the request: ask the client to
		// stop sending (RFC 9113 8.1).
		st.resetCode(http2.ErrCodeNo, ErrStreamReset)
	}
	c.mu.Lock()
	if st.slot {
		st.slot = false
		c.open--
	}
	cinc := c.giveBackLocked(int32(len(st.buf) - st.off))
	delete(c.streams, st.id)
	c.active--
	c.streamEndedLocked()
	c.mu.Unlock()
	c.writeWindowUpdates(0, 0, cinc)
	st.recycle()
	c.wg.Done()
}

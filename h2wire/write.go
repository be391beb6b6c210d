package h2wire

import (
	"bufio"
	"bytes"
	"hash/maphash"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// writer is a connection's write path: frames go into one bufio.Writer
// under wmu, by whichever goroutine has them (a stream's worker or the
// reader). The buffer is flushed when a writer asked for it and no other
// writer is queued behind it: the last one out flushes for all, so streams
// answering together share a syscall.
type writer struct {
	queued    atomic.Int32 // writers holding or waiting for wmu
	wmu       sync.Mutex
	bw        *bufio.Writer
	dw        deadlineWriter
	enc       *hpack.Encoder // writes into hbuf
	hbuf      bytes.Buffer
	needFlush bool
	werr      error // sticky: the connection is unusable for writes
	// prefaced: our SETTINGS are written; lateGoAway: a GoAway came
	// before, and is written right after them (a GOAWAY may not lead).
	prefaced, lateGoAway bool

	// Field strings for the encoder (see interned).
	seed   maphash.Seed
	seen   [256]uint64
	intern map[string]string
	lower  []byte
}

// Bounds of the interned strings of a connection.
const (
	maxInterned   = 256
	maxInternSize = 128
)

func (c *Conn) initWriter() {
	c.dw = deadlineWriter{nc: c.nc, timeout: c.cfg.WriteTimeout}
	c.bw = bufio.NewWriterSize(&c.dw, 32<<10)
	c.enc = hpack.NewEncoder(&c.hbuf)
	c.seed = maphash.MakeSeed()
	c.intern = make(map[string]string)
}

func (c *Conn) lockWrite() {
	c.queued.Add(1)
	c.wmu.Lock()
}

// unlockWrite releases wmu, flushing first if flush was asked for (now or
// by an earlier writer) and nobody is queued. A write error closes nc, so
// that the reader ends too; it is returned from then on.
func (c *Conn) unlockWrite(flush bool) error {
	if flush {
		c.needFlush = true
	}
	if c.queued.Add(-1) == 0 && c.needFlush && c.werr == nil {
		c.needFlush = false
		c.werr = c.bw.Flush()
	}
	err := c.werr
	c.wmu.Unlock()
	if err != nil && err != ErrConnClosed {
		c.nc.Close()
	}
	return err
}

// flush sends what is buffered.
func (c *Conn) flush() error {
	c.lockWrite()
	return c.unlockWrite(true)
}

// deadlineWriter renews the write deadline before a write once an eighth
// of WriteTimeout has passed since it last did: every write has between
// 7/8 of the timeout and all of it.
type deadlineWriter struct {
	nc      net.Conn
	timeout time.Duration
	set     time.Time
}

func (d *deadlineWriter) Write(p []byte) (int, error) {
	if now := time.Now(); now.Sub(d.set) > d.timeout/8 {
		d.nc.SetWriteDeadline(now.Add(d.timeout))
		d.set = now
	}
	return d.nc.Write(p)
}

// writePreface sends our SETTINGS and opens the connection window.
func (c *Conn) writePreface() error {
	c.lockWrite()
	c.werr = c.fr.WriteSettings(
		http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: c.cfg.MaxConcurrentStreams},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: uint32(c.cfg.StreamWindow)},
		http2.Setting{ID: http2.SettingMaxFrameSize, Val: c.cfg.MaxFrameSize},
		http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: c.cfg.MaxHeaderListSize},
		http2.Setting{ID: http2.SettingEnablePush, Val: 0},
	)
	if inc := c.cfg.ConnWindow - minWindow; inc > 0 && c.werr == nil {
		c.werr = c.fr.WriteWindowUpdate(0, uint32(inc))
	}
	c.prefaced = true
	if c.lateGoAway && c.werr == nil {
		c.werr = c.fr.WriteGoAway(0, http2.ErrCodeNo, nil)
	}
	return c.unlockWrite(true)
}

// writeWindowUpdates gives back window: sinc on stream id (0: none), cinc
// on the connection.
func (c *Conn) writeWindowUpdates(id uint32, sinc, cinc int32) {
	if sinc <= 0 && cinc <= 0 {
		return
	}
	c.lockWrite()
	if id != 0 && sinc > 0 && c.werr == nil {
		c.werr = c.fr.WriteWindowUpdate(id, uint32(sinc))
	}
	if cinc > 0 && c.werr == nil {
		c.werr = c.fr.WriteWindowUpdate(0, uint32(cinc))
	}
	c.unlockWrite(true)
}

// writeReset sends RST_STREAM on id and gives back cinc bytes of the
// connection window.
func (c *Conn) writeReset(id uint32, code http2.ErrCode, cinc int32) {
	c.lockWrite()
	if c.werr == nil {
		c.werr = c.fr.WriteRSTStream(id, code)
	}
	if cinc > 0 && c.werr == nil {
		c.werr = c.fr.WriteWindowUpdate(0, uint32(cinc))
	}
	c.unlockWrite(true)
}

// resetID is the reader's stream error: the stream (if open) fails and
// RST_STREAM with code goes out.
func (c *Conn) resetID(id uint32, code http2.ErrCode) {
	c.mu.Lock()
	var cinc int32
	if st := c.streams[id]; st != nil {
		cinc = c.giveBackLocked(st.failLocked(ErrStreamReset))
	}
	c.mu.Unlock()
	c.writeReset(id, code, cinc)
}

// writeRefusal answers a stream the handler will never see with status
// and no body (the reader's 431); if the request is not over, RST_STREAM
// NO_ERROR asks the client to stop sending it.
func (c *Conn) writeRefusal(id uint32, status int, ended bool) error {
	c.lockWrite()
	if c.werr == nil {
		c.hbuf.Reset()
		c.enc.WriteField(hpack.HeaderField{Name: ":status", Value: statusText(status)})
		c.writeBlock(id, c.hbuf.Bytes(), true)
	}
	if !ended && c.werr == nil {
		c.werr = c.fr.WriteRSTStream(id, http2.ErrCodeNo)
	}
	return c.unlockWrite(true)
}

// writeBlock writes an encoded header block as HEADERS and CONTINUATION
// frames no larger than the client's frame size. wmu held.
func (c *Conn) writeBlock(id uint32, b []byte, end bool) {
	limit := int(c.peerMaxFrame.Load())
	first := b[:min(len(b), limit)]
	c.werr = c.fr.WriteHeaders(http2.HeadersFrameParam{
		StreamID: id, BlockFragment: first, EndStream: end, EndHeaders: len(first) == len(b),
	})
	for b = b[len(first):]; len(b) > 0 && c.werr == nil; {
		n := min(len(b), limit)
		c.werr = c.fr.WriteContinuation(id, n == len(b), b[:n])
		b = b[n:]
	}
}

// encodeField encodes a response field into hbuf: the name lowercased,
// connection-specific fields (RFC 9113 8.2.2) left out. wmu held.
func (c *Conn) encodeField(name, value []byte) {
	name = c.lowered(name)
	switch bstr(name) {
	case "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te", "":
		return
	}
	n, nok := c.interned(name)
	v, vok := c.interned(value)
	c.enc.WriteField(hpack.HeaderField{Name: n, Value: v, Sensitive: !nok || !vok})
}

// lowered returns name in lowercase (in a scratch buffer if it had to
// change). wmu held.
func (c *Conn) lowered(name []byte) []byte {
	for i, b := range name {
		if 'A' <= b && b <= 'Z' {
			c.lower = append(c.lower[:0], name...)
			for j := i; j < len(c.lower); j++ {
				if b := c.lower[j]; 'A' <= b && b <= 'Z' {
					c.lower[j] = b + 'a' - 'A'
				}
			}
			return c.lower
		}
	}
	return name
}

// interned returns b as a string for the HPACK encoder. The encoder keeps
// the strings it indexes in its dynamic table, so only a string of our
// own may be indexed: a short string seen for the second time is copied
// once into the connection's intern map (at most maxInterned; the map is
// cleared when full) and reported true. Any other is returned as a view of
// b, reported false, for the caller to encode it never-indexed (Sensitive)
// so that the encoder does not keep it: a value unique to one response
// costs no allocation. wmu held.
func (c *Conn) interned(b []byte) (string, bool) {
	if s, ok := c.intern[string(b)]; ok {
		return s, true
	}
	if len(b) <= maxInternSize {
		h := maphash.Bytes(c.seed, b)
		slot := &c.seen[h%uint64(len(c.seen))]
		if *slot == h {
			if len(c.intern) >= maxInterned {
				clear(c.intern)
			}
			s := string(b)
			c.intern[s] = s
			return s, true
		}
		*slot = h
	}
	return bstr(b), false
}

// bstr views b as a string, without a copy; b must not change while the
// string is in use.
func bstr(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

var statusTexts [1000]string

func init() {
	for i := 100; i < len(statusTexts); i++ {
		statusTexts[i] = strconv.Itoa(i)
	}
}

func statusText(code int) string { return statusTexts[code] }

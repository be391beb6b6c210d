package h2wire

import (
	"math"

	"golang.org/x/net/http2"
)

// processData buffers a DATA frame's bytes for the stream's handler,
// within the windows we advertised.
func (c *Conn) processData(f *http2.DataFrame) error {
	id, size, end := f.StreamID, int32(f.Length), f.StreamEnded()
	data := f.Data()
	c.mu.Lock()
	c.recvWindow -= size
	if c.recvWindow < 0 {
		c.mu.Unlock()
		return http2.ConnectionError(http2.ErrCodeFlowControl)
	}
	st := c.streams[id]
	if st == nil || st.remoteEnded || st.err != nil {
		idle, ignore := id > c.lastID, st != nil && st.err != nil
		cinc := c.giveBackLocked(size)
		c.mu.Unlock()
		c.writeWindowUpdates(0, 0, cinc)
		switch {
		case idle:
			return http2.ConnectionError(http2.ErrCodeProtocol)
		case ignore: // reset by us: what was in flight
			return nil
		}
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeStreamClosed}
	}
	st.recvWindow -= size
	st.received += int64(len(data))
	code, cause := http2.ErrCodeNo, error(nil)
	switch {
	case st.recvWindow < 0:
		code, cause = http2.ErrCodeFlowControl, ErrStreamReset
	case st.contentLength >= 0 && (st.received > st.contentLength || end && st.received != st.contentLength):
		code, cause = http2.ErrCodeProtocol, ErrBodyLength
	}
	if code != http2.ErrCodeNo {
		cinc := c.giveBackLocked(size + st.failLocked(cause))
		c.mu.Unlock()
		c.writeReset(id, code, cinc)
		return nil
	}
	if st.off > 0 && len(st.buf)+len(data) > cap(st.buf) {
		// Compact before growing: the bytes read stay out of the buffer,
		// whose size the window then bounds (a body that never drains
		// completely would otherwise grow it with every frame).
		st.buf = st.buf[:copy(st.buf, st.buf[st.off:])]
		st.off = 0
	}
	st.buf = append(st.buf, data...)
	pad := size - int32(len(data))
	st.unacked += pad
	cinc := c.giveBackLocked(pad)
	if end {
		st.remoteEnded = true
		c.releaseLocked(st)
	}
	st.wakeRead()
	c.mu.Unlock()
	c.writeWindowUpdates(0, 0, cinc)
	return nil
}

// processWindowUpdate opens a send window.
func (c *Conn) processWindowUpdate(f *http2.WindowUpdateFrame) error {
	id, inc := f.StreamID, int32(f.Increment)
	c.mu.Lock()
	defer c.mu.Unlock()
	if id == 0 {
		if c.sendWindow > math.MaxInt32-inc {
			return http2.ConnectionError(http2.ErrCodeFlowControl)
		}
		c.sendWindow += inc
		if c.connWaiters > 0 {
			for _, st := range c.streams {
				if st.waitingConn {
					st.waitingConn = false
					st.wakeWrite()
				}
			}
			c.connWaiters = 0
		}
		return nil
	}
	st := c.streams[id]
	if st == nil {
		if id > c.lastID {
			return http2.ConnectionError(http2.ErrCodeProtocol)
		}
		return nil
	}
	if st.sendWindow > math.MaxInt32-inc {
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeFlowControl}
	}
	st.sendWindow += inc
	st.wakeWrite()
	return nil
}

// processReset handles the client's RST_STREAM: the handler sees Done.
// The stream keeps its place among the concurrent ones until its handler
// returns, and each such reset spends a token of the rapid-reset bucket.
func (c *Conn) processReset(f *http2.RSTStreamFrame) error {
	id := f.StreamID
	c.mu.Lock()
	if id > c.lastID {
		c.mu.Unlock()
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	st := c.streams[id]
	if st == nil || st.err != nil {
		c.mu.Unlock()
		return nil
	}
	calm := c.rate.take(c.cfg.Clock.Now())
	cinc := c.giveBackLocked(st.failLocked(ErrStreamReset))
	st.remoteEnded = true
	c.mu.Unlock()
	c.writeWindowUpdates(0, 0, cinc)
	if !calm {
		return http2.ConnectionError(http2.ErrCodeEnhanceYourCalm)
	}
	return nil
}

// takeReset spends a token of the rapid-reset bucket for a refused stream.
func (c *Conn) takeReset() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rate.take(c.cfg.Clock.Now())
}

// releaseLocked gives back st's place among the concurrent streams once
// both sides have ended it, unless it was reset (its place is then kept
// until its handler returns). c.mu held.
func (c *Conn) releaseLocked(st *Stream) {
	if st.slot && st.localEnded && st.remoteEnded && st.err == nil {
		st.slot = false
		c.open--
	}
}

// processSettings applies the client's SETTINGS and acknowledges them.
func (c *Conn) processSettings(f *http2.SettingsFrame) error {
	if f.IsAck() {
		c.mu.Lock()
		if !c.acked {
			c.acked = true
			c.readDeadlineLocked()
		}
		c.mu.Unlock()
		return nil
	}
	for i := 0; i < f.NumSettings(); i++ {
		s := f.Setting(i)
		if err := s.Valid(); err != nil {
			return err
		}
		if err := c.applySetting(s); err != nil {
			return err
		}
	}
	c.lockWrite()
	if c.werr == nil {
		c.werr = c.fr.WriteSettingsAck()
	}
	return c.unlockWrite(true)
}

func (c *Conn) applySetting(s http2.Setting) error {
	switch s.ID {
	case http2.SettingHeaderTableSize:
		c.lockWrite()
		c.enc.SetMaxDynamicTableSizeLimit(min(s.Val, 4096))
		c.unlockWrite(false)
	case http2.SettingMaxFrameSize:
		c.peerMaxFrame.Store(s.Val)
	case http2.SettingInitialWindowSize:
		c.mu.Lock()
		defer c.mu.Unlock()
		delta := int32(s.Val) - c.peerInitial
		for _, st := range c.streams {
			if int64(st.sendWindow)+int64(delta) > math.MaxInt32 {
				return http2.ConnectionError(http2.ErrCodeFlowControl)
			}
		}
		for _, st := range c.streams {
			st.sendWindow += delta
			st.wakeWrite()
		}
		c.peerInitial = int32(s.Val)
	}
	return nil
}

// processPing answers a PING.
func (c *Conn) processPing(f *http2.PingFrame) error {
	if f.IsAck() {
		return nil
	}
	c.lockWrite()
	if c.werr == nil {
		c.werr = c.fr.WritePing(true, f.Data)
	}
	return c.unlockWrite(true)
}

package l4

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Buffer sizes of a pump.
const (
	smallBuf = 2 << 10  // each direction's own buffer
	bigBuf   = 32 << 10 // pooled, taken while data keeps coming
)

// bigBufs holds idle 32 KiB buffers; a sync.Pool, so it keeps about one per
// P between garbage collections.
var bigBufs = sync.Pool{New: func() any { return new([bigBuf]byte) }}

// pump copies one direction of a connection, src to dst.
type pump struct {
	c        *conn
	src, dst net.Conn
	count    *atomic.Uint64 // the Proxy's byte counter for this direction
	small    [smallBuf]byte
}

// run copies until src ends or fails. At src's end it shuts down dst's
// write side (or closes the connection when dst cannot half-close); on an
// error or an idle timeout it closes the connection, which ends the other
// direction too.
func (d *pump) run() {
	err := d.copy()
	switch {
	case err == nil:
		if cw, ok := d.dst.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
			return
		}
		d.c.close()
	case errors.Is(err, errIdle):
		d.c.closeIdle()
	default:
		d.c.close()
	}
}

// copy moves bytes from src to dst until src's EOF (nil) or an error.
func (d *pump) copy() error {
	buf := d.small[:]
	var big *[bigBuf]byte
	defer func() {
		if big != nil {
			bigBufs.Put(big)
		}
	}()
	idle := &d.c.idle
	idle.armRead(d.src)
	idle.armWrite(d.dst)
	for {
		n, err := d.src.Read(buf)
		if n > 0 {
			idle.touch()
			if werr := d.write(buf[:n]); werr != nil {
				return werr
			}
			d.count.Add(uint64(n))
		}
		switch {
		case big == nil && n == len(buf):
			big = bigBufs.Get().(*[bigBuf]byte)
			buf = big[:]
		case big != nil && n < bigBuf/2:
			bigBufs.Put(big)
			big, buf = nil, d.small[:]
		}
		switch {
		case err == nil:
		case err == io.EOF:
			return nil
		case !errors.Is(err, os.ErrDeadlineExceeded):
			return err
		case idle.expired():
			return errIdle
		default:
			idle.armRead(d.src) // the other direction moved bytes meanwhile
		}
	}
}

// write writes all of b to dst, re-arming dst's write deadline while bytes
// move in either direction.
func (d *pump) write(b []byte) error {
	for {
		n, err := d.dst.Write(b)
		if n > 0 {
			d.c.idle.touch()
		}
		switch {
		case err == nil:
			return nil
		case !errors.Is(err, os.ErrDeadlineExceeded):
			return err
		case d.c.idle.expired():
			return errIdle
		}
		b = b[n:]
		d.c.idle.armWrite(d.dst)
	}
}

// idleClock is a connection's last activity, shared by its two pumps: each
// read or write that moves bytes stamps it, and each side's deadline is the
// stamp plus the idle timeout. A deadline that passes while the other
// direction was busy is moved on from the newer stamp; only one that finds
// no byte moved for the whole timeout ends the connection. Deadlines are
// re-armed only when they pass, not on every read.
type idleClock struct {
	p    *Proxy       // for its epoch and timeout; set by start
	last atomic.Int64 // time since p.epoch of the last byte moved
}

// start begins the clock at now.
func (k *idleClock) start(p *Proxy) {
	k.p = p
	k.touch()
}

// touch records activity now.
func (k *idleClock) touch() { k.last.Store(int64(time.Since(k.p.epoch))) }

// expired reports whether the idle timeout has run out since the last
// activity; never when there is no timeout.
func (k *idleClock) expired() bool {
	return k.p.idle > 0 && time.Since(k.p.epoch)-time.Duration(k.last.Load()) >= k.p.idle
}

// deadline is when the connection turns idle if nothing moves before.
func (k *idleClock) deadline() time.Time {
	return k.p.epoch.Add(time.Duration(k.last.Load()) + k.p.idle)
}

func (k *idleClock) armRead(c net.Conn) {
	if k.p.idle > 0 {
		_ = c.SetReadDeadline(k.deadline())
	}
}

func (k *idleClock) armWrite(c net.Conn) {
	if k.p.idle > 0 {
		_ = c.SetWriteDeadline(k.deadline())
	}
}

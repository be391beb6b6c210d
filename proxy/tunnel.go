package proxy

import (
	"bufio"
	"io"
	"net"
	"time"

	"github.com/spillwayhq/spillway/httpwire"
)

// tunnel completes a protocol switch (101, e.g. WebSocket): it forwards
// the 101 head, then copies bytes both ways until both sides are done,
// the route's idle timeout passes with no byte in either direction, or
// the connection is past its max age and AgeGrace.
func (c *h1conn) tunnel(rt *Route) {
	h := &c.uresp.Head
	b := httpwire.AppendStatusLine(c.wbuf[:0], h.Status, h.Reason)
	for i := range h.Fields {
		b = httpwire.AppendField(b, h.Fields[i].Name, h.Fields[i].Value)
	}
	b = append(b, "\r\n"...)
	c.wbuf = b
	c.armSend()
	if _, err := c.bw.Write(b); err != nil || c.bw.Flush() != nil {
		c.uresp.Close()
		return
	}
	uc, ubr := c.uresp.Hijack()
	if uc == nil {
		return
	}
	defer uc.Close()
	idle := rt.IdleTimeout
	if idle <= 0 {
		idle = time.Hour
	}
	c.dl.Clear(c.c)
	c.tunneling.Store(true) // past its age and AgeGrace, the sweeper closes c.c
	defer c.tunneling.Store(false)
	done := make(chan struct{})
	go func() {
		pipe(uc, c.br, c.c, idle) // client → upstream
		close(done)
	}()
	pipe(c.c, ubr, uc, idle) // upstream → client
	<-done
}

// pipe copies from r (reading conn src) to dst until EOF or an error,
// then half-closes dst. Every read and write re-arms an idle deadline.
func pipe(dst net.Conn, r *bufio.Reader, src net.Conn, idle time.Duration) {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	for {
		_ = src.SetReadDeadline(time.Now().Add(idle))
		n, err := r.Read(buf)
		if n > 0 {
			_ = dst.SetWriteDeadline(time.Now().Add(idle))
			if _, werr := dst.Write(buf[:n]); werr != nil {
				_ = src.Close()
				return
			}
		}
		if err != nil {
			if err == io.EOF {
				closeWrite(dst)
			} else {
				_ = dst.Close()
				_ = src.Close()
			}
			return
		}
	}
}

// closeWrite half-closes c when it can, else closes it.
func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}

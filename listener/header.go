package listener

import (
	"bufio"
	"errors"
	"io"
	"net"
	"time"

	"github.com/pires/go-proxyproto"
)

// headerBuf is the read buffer of a PROXY header: a v1 line (at most 107
// bytes) must fit it whole (go-proxyproto reads a v1 line only from what
// one read brought); v2 headers are read through it in as many reads as
// they take.
const headerBuf = 256

// Why a PROXY header was refused.
var (
	errNoHeader     = errors.New("listener: no PROXY header from a peer that must send one")
	errPartial      = errors.New("listener: PROXY header incomplete at the header timeout")
	errHeaderSilent = errors.New("listener: nothing received within the header timeout")
)

// readHeader reads c's PROXY header within timeout and returns the
// connection to serve: c itself when nothing was read past the peer's
// silence, else a conn that replays the bytes read after the header and
// reports the header's addresses. read says whether there was a header.
func readHeader(c net.Conn, timeout time.Duration, required bool) (_ net.Conn, read bool, _ error) {
	cr := &countReader{r: c}
	br := bufio.NewReaderSize(cr, headerBuf)
	_ = c.SetReadDeadline(time.Now().Add(timeout))
	h, err := proxyproto.Read(br)
	_ = c.SetReadDeadline(time.Time{})
	var ne net.Error
	switch {
	case err == nil:
		return wrap(c, br, h), true, nil
	case errors.Is(err, proxyproto.ErrNoProxyProtocol) && required:
		return nil, false, errNoHeader
	case errors.Is(err, proxyproto.ErrNoProxyProtocol):
		return wrap(c, br, nil), false, nil
	case errors.As(err, &ne) && ne.Timeout() && cr.n > 0:
		return nil, false, errPartial
	case errors.As(err, &ne) && ne.Timeout() && required:
		return nil, false, errHeaderSilent
	case errors.As(err, &ne) && ne.Timeout():
		return c, false, nil
	}
	return nil, false, err // malformed, or the connection failed
}

// countReader counts the bytes read through it.
type countReader struct {
	r io.Reader
	n int
}

func (c *countReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += n
	return n, err
}

// wrap returns c with br's buffered bytes replayed first and, when h
// carries TCP addresses of a PROXY command, those addresses.
func wrap(c net.Conn, br *bufio.Reader, h *proxyproto.Header) net.Conn {
	hc := &hdrConn{Conn: c, remote: c.RemoteAddr(), local: c.LocalAddr()}
	if br.Buffered() > 0 {
		hc.br = br
	}
	addrs := false
	if h != nil && h.Command.IsProxy() {
		if src, dst, ok := h.TCPAddrs(); ok && src != nil && dst != nil {
			hc.remote, hc.local, addrs = src, dst, true
		}
	}
	if hc.br == nil && !addrs {
		return c // nothing to replay, nothing to change
	}
	return hc
}

// hdrConn is a connection whose PROXY header has been read.
type hdrConn struct {
	net.Conn
	br            *bufio.Reader // bytes read past the header; nil once drained
	remote, local net.Addr      // immutable
}

// Read returns the bytes read past the header first, then reads c.
func (c *hdrConn) Read(b []byte) (int, error) {
	if c.br != nil {
		n, _ := c.br.Read(b) // buffered bytes only: no read of c, no error
		if c.br.Buffered() == 0 {
			c.br = nil
		}
		return n, nil
	}
	return c.Conn.Read(b)
}

// RemoteAddr is the client's address from the header, or the peer's.
func (c *hdrConn) RemoteAddr() net.Addr { return c.remote }

// LocalAddr is the destination address from the header, or the socket's.
func (c *hdrConn) LocalAddr() net.Addr { return c.local }

// CloseWrite shuts down the writing side (l4's half-close).
func (c *hdrConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.New("listener: connection cannot half-close")
}

// NetConn returns the connection underneath, as tls.Conn's does.
func (c *hdrConn) NetConn() net.Conn { return c.Conn }

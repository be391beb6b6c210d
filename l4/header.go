package l4

import (
	"net"
	"time"

	"github.com/pires/go-proxyproto"
)

// sendHeader writes the PROXY protocol header (Config.ProxyProtocol) first
// on up, within the connect timeout: the client connection's RemoteAddr as
// the source and its LocalAddr as the destination (go-proxyproto's
// HeaderProxyFromAddrs: TCP4 when both are IPv4, else TCP6; an address that
// is not TCP makes v1's UNKNOWN and v2's LOCAL). It reports whether the
// connection may go on; a failed write is counted and closes it.
func (c *conn) sendHeader(up net.Conn) bool {
	p := c.p
	if p.ppVer == 0 {
		return true
	}
	h := proxyproto.HeaderProxyFromAddrs(p.ppVer, c.client.RemoteAddr(), c.client.LocalAddr())
	_ = up.SetWriteDeadline(time.Now().Add(p.dialer.Timeout))
	_, err := h.WriteTo(up)
	_ = up.SetWriteDeadline(time.Time{})
	if err != nil {
		p.headerFailed.Add(1)
		p.log.Debug("l4: PROXY header not written; connection closed", "client", c.client.RemoteAddr().String(), "err", err)
		return false
	}
	return true
}

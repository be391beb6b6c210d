//go:build unix

package upstream

import "syscall"

// peek looks at the socket without blocking or consuming (RawConn.Read's
// callback; it never asks to wait).
func (c *conn) peek(fd uintptr) bool {
	n, _, err := syscall.Recvfrom(int(fd), c.peekB[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	switch {
	case err == syscall.EAGAIN || err == syscall.EWOULDBLOCK:
		c.peeked = peekIdle
	case err == nil && n == 0:
		c.peeked = peekClosed
	case err == nil:
		c.peeked = peekBytes
	default:
		c.peeked = peekClosed
	}
	return true
}

//go:build !unix

package upstream

// peek cannot look at the socket here: the connection counts as idle and a
// stale one is found when the exchange fails (and retried when replayable).
func (c *conn) peek(fd uintptr) bool {
	c.peeked = peekIdle
	return true
}

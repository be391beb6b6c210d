package proxy

// Server-wide modes that end keep-alive, in Server.flags: each response
// reads them once (an atomic load, no lock).
const (
	flagDrain    = 1 << iota // Drain was called
	flagKeepOff              // SetKeepAlive(false)
	flagShutdown             // Shutdown was called
)

// Drain makes the Server wind its connections down while it still serves
// them (the gateway's drain delay, when the listener keeps accepting while
// load balancers take the instance out): from now on every HTTP/1.1
// response carries "Connection: close" and its connection closes after it
// (a connection opened during the drain still gets its request answered),
// and every HTTP/2 connection gets a graceful GOAWAY: the streams it
// started finish, and the client opens new ones elsewhere. An HTTP/2
// connection that has not started a stream yet gets its GOAWAY after its
// first stream ends, not at once (a client told "no stream of yours will
// be served" before sending any would retry on a new connection to the
// same place, and get the same answer). Drain cannot be undone.
func (s *Server) Drain() {
	s.flags.Or(flagDrain)
	s.mu.Lock()
	defer s.mu.Unlock()
	for hc := range s.h2conns {
		if hc.streams.Load() > 0 {
			hc.goAway()
		}
	}
}

// SetKeepAlive turns keep-alive on and off for HTTP/1.1: while it is off,
// every response carries "Connection: close" and its connection closes
// after it (the overload guard turns it off under memory pressure, so
// that clients spread over fresh connections). HTTP/2 is not affected.
// It is on at start.
func (s *Server) SetKeepAlive(on bool) {
	if on {
		s.flags.And(^uint32(flagKeepOff))
	} else {
		s.flags.Or(flagKeepOff)
	}
}

// mayKeep reports whether an HTTP/1.1 connection may stay open after the
// response being written: no server-wide mode ends keep-alive and the
// connection is not past its max age.
func (c *h1conn) mayKeep() bool {
	return c.s.flags.Load() == 0 && !c.aged.Load()
}

package proxy

import (
	"context"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"

	"github.com/spillwayhq/spillway/h2wire"
)

// h2conn is one HTTP/2 connection's server. On the h2wire engine it is
// the h2wire.Conn. On x/net's, a copy of the Server's http2.Server
// configured together with an http.Server of its own (used as x/net's
// BaseConfig), so that Shutdown on that http.Server — through the hook
// http2.ConfigureServer registers — sends a graceful GOAWAY on this
// connection only. It costs a few allocations per connection, none per
// stream.
type h2conn struct {
	wire *h2wire.Conn // nil on x/net's engine
	hs   http.Server
	srv  http2.Server
	c    net.Conn

	streams atomic.Int64 // streams begun
	asked   atomic.Bool  // GOAWAY was asked for
	resent  atomic.Bool  // and asked again once a stream showed the connection registered

	ageTimer, cutTimer *time.Timer // see armAge; nil when none
}

func (s *Server) newH2Conn(c net.Conn) *h2conn {
	hc := &h2conn{c: c, srv: *s.h2}
	hc.hs.MaxHeaderBytes = s.cfg.Limits.MaxHeaderBytes
	if err := http2.ConfigureServer(&hc.hs, &hc.srv); err != nil {
		// Only a TLSConfig with unfit cipher suites fails, and hs has none.
		panic("proxy: http2.ConfigureServer: " + err.Error())
	}
	return hc
}

// goAway starts the connection's graceful shutdown: the engine sends
// GOAWAY (its last stream id covers the streams it has seen), lets them
// finish, then closes the connection. Calls after the first do nothing.
func (hc *h2conn) goAway() {
	if !hc.asked.CompareAndSwap(false, true) {
		return
	}
	if hc.wire != nil {
		hc.wire.GoAway()
		return
	}
	_ = hc.hs.Shutdown(context.Background()) // returns at once: hs serves nothing itself
}

// streamBegun counts a stream. On x/net's engine a GOAWAY asked for
// before x/net registered the connection (its first microseconds) would
// have been lost: a stream proves it registered, so the request is made
// again, once (x/net sends one GOAWAY per connection however often it is
// asked). h2wire keeps a GOAWAY asked for early.
func (hc *h2conn) streamBegun() {
	hc.streams.Add(1)
	if hc.wire == nil && hc.asked.Load() && hc.resent.CompareAndSwap(false, true) {
		_ = hc.hs.Shutdown(context.Background())
	}
}

// streamEnded sends the GOAWAY a drain or shutdown asked for once a
// stream has ended (a connection opened during the drain gets its first
// request answered first).
func (s *Server) streamEnded(hc *h2conn) {
	if s.flags.Load()&(flagDrain|flagShutdown) != 0 {
		hc.goAway()
	}
}

// trackH2 registers hc for Drain, Shutdown and Stats; a connection that
// starts while the Server shuts down gets its GOAWAY at once.
func (s *Server) trackH2(hc *h2conn) {
	s.mu.Lock()
	s.h2conns[hc] = struct{}{}
	s.mu.Unlock()
	if s.flags.Load()&flagShutdown != 0 {
		hc.goAway()
	}
}

func (s *Server) untrackH2(hc *h2conn) {
	s.mu.Lock()
	delete(s.h2conns, hc)
	s.mu.Unlock()
}

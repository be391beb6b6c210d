package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"time"
)

// Serve accepts connections on ln until it is closed or Shutdown is called;
// it returns nil then. Each connection is served by ServeConn on its own
// goroutine. A *tls.Config listener (tls.NewListener) gets TLS terminated
// per connection, after Accept, bounded by HeaderTimeout.
func (s *Server) Serve(ln net.Listener) error {
	var delay time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || s.isClosed() {
				return nil
			}
			// EMFILE, ECONNABORTED and the like: back off and go on,
			// as net/http does, logging once per backoff step.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			s.cfg.Logger.Warn("proxy: accept", "err", err, "retry_in", delay)
			time.Sleep(delay)
			continue
		}
		delay = 0
		if s.isClosed() {
			_ = c.Close()
			return nil
		}
		go s.ServeConn(c)
	}
}

// ServeConn serves one accepted connection in the caller's goroutine and
// returns when the connection is done; c is closed then. A *tls.Conn gets
// its handshake first (bounded by HeaderTimeout), and HTTP/2 when ALPN
// chose h2; a plaintext connection gets h2c when it opens with the HTTP/2
// preface and Config.HTTP2 is set. When the Server is shut down, or
// MaxConns connections are open (counted in Stats.Refused), c is closed
// at once, before any byte is read or written.
func (s *Server) ServeConn(c net.Conn) {
	if s.track(c) != trackServe {
		return
	}
	defer s.untrack(c)
	s.serveConn(c, s.ageDeadline())
}

// What track decided for an accepted connection.
const (
	trackServe  = iota // tracked: serve it
	trackRefuse        // MaxConns are open: it was closed
	trackClosed        // the Server is shut down: it was closed
)

func (s *Server) track(c net.Conn) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		_ = c.Close()
		return trackClosed
	}
	if s.cfg.MaxConns > 0 && len(s.conns) >= s.cfg.MaxConns {
		s.refused.Add(1)
		_ = c.Close()
		return trackRefuse
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	return trackServe
}

// Stats are a Server's counters.
type Stats struct {
	Active  int   // connections open now
	Idle    int   // HTTP/1.1 connections waiting for a request now
	H2      int   // HTTP/2 connections open now
	Refused int64 // connections closed at once because MaxConns were open
}

// Stats returns the Server's counters (it visits every HTTP/1.1
// connection: for a metrics scrape, not for the request path).
func (s *Server) Stats() Stats {
	idle := s.countIdle()
	s.mu.Lock()
	defer s.mu.Unlock()
	return Stats{Active: len(s.conns), Idle: idle, H2: len(s.h2conns), Refused: s.refused.Load()}
}

func (s *Server) untrack(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.wg.Done()
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Shutdown stops the Server: connections handed to it from now on are
// closed at once (the caller closes the listeners), HTTP/1.1 connections
// waiting for a request are closed, and HTTP/2 connections get a graceful
// GOAWAY. Requests in flight, and upgraded connections (WebSocket
// tunnels), run on until ctx ends; an HTTP/1.1 response written after
// Shutdown started carries "Connection: close" and its connection closes
// after it. When ctx ends first, every connection still open is closed
// and Shutdown returns ctx.Err(); nil when all ended by themselves.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.flags.Or(flagShutdown)
	defer s.wireCfg.Pool.Close() // once every connection has ended: no stream is left
	s.closeIdle()
	s.mu.Lock()
	for hc := range s.h2conns {
		hc.goAway()
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	<-done
	return ctx.Err()
}

// serveConn terminates TLS if needed and picks the engine.
func (s *Server) serveConn(c net.Conn, ageAt int64) {
	defer c.Close()
	secure := false
	if tc, ok := c.(*tls.Conn); ok {
		secure = true
		_ = tc.SetDeadline(time.Now().Add(s.cfg.HeaderTimeout))
		if err := tc.Handshake(); err != nil {
			return
		}
		_ = tc.SetDeadline(time.Time{})
		if tc.ConnectionState().NegotiatedProtocol == "h2" && s.cfg.HTTP2 {
			s.serveHTTP2(c, nil, true, ageAt)
			return
		}
	}
	if h2c := s.serveH1(c, secure, ageAt); h2c != nil {
		s.serveHTTP2(c, h2c, false, ageAt)
	}
}

// serveHTTP2 serves an HTTP/2 connection with the configured engine;
// replay, for h2c, replays the bytes the HTTP/1.1 engine read.
func (s *Server) serveHTTP2(c net.Conn, replay *prefaceConn, secure bool, ageAt int64) {
	if s.cfg.H2Engine == H2Std {
		s.serveH2(c, replay, secure, ageAt)
		return
	}
	var pre []byte
	if replay != nil {
		pre = replay.pending
	}
	s.serveWire(c, pre, secure, ageAt)
}

// serveH1 serves c with the HTTP/1.1 engine, unless its client opens with
// the HTTP/2 preface (and Config.HTTP2): it then returns the connection
// replaying what was read, for the HTTP/2 engine.
func (s *Server) serveH1(c net.Conn, secure bool, ageAt int64) *prefaceConn {
	hc := newH1Conn(s, c, secure, ageAt)
	defer hc.release()
	s.register(hc)
	defer s.unregister(hc)
	if !hc.awaitRequest() {
		return nil
	}
	if !secure && s.cfg.HTTP2 {
		if h2c, ok := hc.sniffPreface(); ok {
			return h2c
		}
	}
	hc.serve()
	return nil
}

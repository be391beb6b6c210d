package proxy

import (
	"math/rand/v2"
	"time"
)

// Max connection age. A connection's bound is drawn once, when it is
// accepted, as a deadline in the watchers' monotonic clock (ns since
// epoch; 0: none). HTTP/1.1 connections are checked by the server's
// sweeper (no timer per connection); HTTP/2 connections get one timer for
// the GOAWAY, and one for AgeGrace.

// ageDeadline returns the deadline of a connection accepted now.
func (s *Server) ageDeadline() int64 {
	if s.cfg.MaxConnAge <= 0 {
		return 0
	}
	return int64(time.Since(epoch) + jittered(s.cfg.MaxConnAge, s.cfg.MaxConnAgeJitter, rand.Float64()))
}

// jittered maps u, uniform in [0, 1), to a duration uniform in
// [age·(1−j), age·(1+j)).
func jittered(age time.Duration, j, u float64) time.Duration {
	return time.Duration(float64(age) * (1 - j + 2*j*u))
}

// ageTime returns an age deadline as a time (for socket deadlines).
func ageTime(at int64) time.Time { return epoch.Add(time.Duration(at)) }

// checkAge is the sweeper's visit at ns: it marks a connection past its
// age (its next response closes it) and closes a tunnel past its age and
// AgeGrace. Run under the sweeper's lock: the close happens on its own
// goroutine (a TLS close may wait to send its alert).
func (c *h1conn) checkAge(ns int64) {
	if c.ageAt == 0 || ns < c.ageAt {
		return
	}
	c.aged.Store(true)
	if g := c.s.cfg.AgeGrace; g > 0 && ns >= c.ageAt+int64(g) && c.tunneling.CompareAndSwap(true, false) {
		conn := c.c
		go conn.Close()
	}
}

// ageQuiet is how long a connection past its age must have been idle
// before it is closed. Closing the instant it turns idle would race the
// next request of a busy client (sent before the close reaches it, then
// lost: a POST is not retried); a busy connection instead learns of its
// age from its next response's "Connection: close", and a quiet one is
// closed after ageQuiet, when a request arriving at that moment is as
// unlikely as at an idle timeout.
const ageQuiet = time.Second

// idleDeadline is the end of the wait for a request: IdleTimeout from
// now, or, if that comes first, the connection's age (at the earliest
// ageQuiet from now).
func (c *h1conn) idleDeadline() time.Time {
	now := time.Now()
	var d time.Time
	if idle := c.s.cfg.IdleTimeout; idle > 0 {
		d = now.Add(idle)
	}
	if c.ageAt != 0 {
		at := ageTime(c.ageAt)
		if q := now.Add(ageQuiet); at.Before(q) {
			at = q
		}
		if d.IsZero() || at.Before(d) {
			d = at
		}
	}
	return d
}

// armAge starts an HTTP/2 connection's age timers: GOAWAY at its age, and
// the connection closed AgeGrace later if its streams still hold it.
func (hc *h2conn) armAge(at int64, grace time.Duration) {
	if at == 0 {
		return
	}
	d := time.Until(ageTime(at))
	hc.ageTimer = time.AfterFunc(d, hc.goAway)
	if grace > 0 {
		conn := hc.c
		hc.cutTimer = time.AfterFunc(d+grace, func() { _ = conn.Close() })
	}
}

// stopAge stops the age timers of a connection that ended.
func (hc *h2conn) stopAge() {
	if hc.ageTimer != nil {
		hc.ageTimer.Stop()
	}
	if hc.cutTimer != nil {
		hc.cutTimer.Stop()
	}
}

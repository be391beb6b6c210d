// Package conndeadline arms a connection's read and write deadlines
// lazily, so that a busy keep-alive connection does not pay a runtime
// timer update for every request and every write.
//
// A connection's inactivity bounds (wait for the next request, send the
// answer, read the upstream's head) are renewed on every exchange, but
// an exchange takes microseconds while the bound is seconds. Deadlines
// armed here take a slack: an inactivity bound d armed at now is set to
// now+d+Slack(d), and renewing it is skipped while the armed deadline
// still lies between now+d and now+d+Slack(d). A deadline therefore never
// fires before d of inactivity, and at most Slack(d) after it. (nginx
// keeps an armed timer when the new one is within 300 ms of it,
// NGX_TIMER_LAZY_DELAY, for the same reason.)
//
// A Conn is not safe for concurrent use: it belongs to the goroutine that
// serves the connection, and every deadline set on the connection must go
// through it (or be followed by Forget), or it no longer knows what is
// armed.
package conndeadline

import (
	"net"
	"time"
)

// MaxSlack bounds Slack.
const MaxSlack = 250 * time.Millisecond

// Slack is how much later than d a lazily armed bound of d may fire: an
// eighth of it, at most MaxSlack.
func Slack(d time.Duration) time.Duration { return min(d/8, MaxSlack) }

// Conn tracks the deadlines armed on one connection.
type Conn struct {
	r, w time.Time // armed; zero: none
}

// longAgo marks a deadline nobody knows: a past time, so that the next
// Arm sets one and the next Clear clears.
var longAgo = time.Unix(1, 0)

// Forget says a deadline may have been set without c: the next call of
// each kind sets the connection's deadline.
func (c *Conn) Forget() { c.r, c.w = longAgo, longAgo }

// Reset is for a new connection, which has no deadline.
func (c *Conn) Reset() { c.r, c.w = time.Time{}, time.Time{} }

// ArmRead bounds the next reads of nc to d of inactivity from now (d <= 0:
// no bound).
func (c *Conn) ArmRead(nc net.Conn, now time.Time, d time.Duration) {
	if t, ok := arm(&c.r, now, d); ok {
		_ = nc.SetReadDeadline(t)
	}
}

// ArmWrite bounds the next writes of nc to d of inactivity from now (d <=
// 0: no bound).
func (c *Conn) ArmWrite(nc net.Conn, now time.Time, d time.Duration) {
	if t, ok := arm(&c.w, now, d); ok {
		_ = nc.SetWriteDeadline(t)
	}
}

// SetRead sets nc's read deadline to exactly t (zero: none).
func (c *Conn) SetRead(nc net.Conn, t time.Time) {
	if set(&c.r, t) {
		_ = nc.SetReadDeadline(t)
	}
}

// SetWrite sets nc's write deadline to exactly t (zero: none).
func (c *Conn) SetWrite(nc net.Conn, t time.Time) {
	if set(&c.w, t) {
		_ = nc.SetWriteDeadline(t)
	}
}

// Clear removes both deadlines.
func (c *Conn) Clear(nc net.Conn) {
	r, w := set(&c.r, time.Time{}), set(&c.w, time.Time{})
	switch {
	case r && w:
		_ = nc.SetDeadline(time.Time{})
	case r:
		_ = nc.SetReadDeadline(time.Time{})
	case w:
		_ = nc.SetWriteDeadline(time.Time{})
	}
}

// ReadArmed returns the read deadline armed (zero: none).
func (c *Conn) ReadArmed() time.Time { return c.r }

// arm returns the deadline to set for a bound of d from now, or false when
// the one armed at *at will do.
func arm(at *time.Time, now time.Time, d time.Duration) (time.Time, bool) {
	if d <= 0 {
		return time.Time{}, set(at, time.Time{})
	}
	want := now.Add(d)
	slack := Slack(d)
	if !at.Before(want) && at.Sub(want) <= slack {
		return *at, false
	}
	*at = want.Add(slack)
	return *at, true
}

// set records t at *at and reports whether it differs from what was armed.
func set(at *time.Time, t time.Time) bool {
	if at.Equal(t) {
		return false
	}
	*at = t
	return true
}

// Package clock is where real time enters Spillway. Policy code never reads a
// clock: every decision takes the current time as a parameter, `now`, in
// float64 seconds on a monotonic timeline chosen by the caller. Adapters
// (HTTP middleware, proxy, load generator) read it from a Clock; the simulator
// and the tests pass virtual time.
//
// Why float64 seconds rather than time.Time: the simulator replays the seed
// experiments bit for bit, and those do their arithmetic in float64 seconds;
// integer nanoseconds round differently and change results (CoDel's drop
// decisions, for one). A float64 keeps nanosecond resolution for 104 days of
// uptime and sub-4 ns resolution for years, since Real counts from its own
// creation.
package clock

import "time"

// Clock tells the time in seconds.
type Clock interface {
	Now() float64
}

// Real reads the monotonic wall clock, in seconds since the Real was made.
// It is safe for concurrent use.
type Real struct {
	epoch time.Time
}

// NewReal returns a clock whose zero is now.
func NewReal() *Real { return &Real{epoch: time.Now()} }

// Now returns the seconds elapsed since the clock was made.
func (r *Real) Now() float64 { return time.Since(r.epoch).Seconds() }

// At converts t to the clock's timeline.
func (r *Real) At(t time.Time) float64 { return t.Sub(r.epoch).Seconds() }

// Time converts a time on the clock's timeline back to a time.Time.
func (r *Real) Time(now float64) time.Time { return r.epoch.Add(Duration(now)) }

// Manual is a clock that moves only when told; for tests. Not safe for
// concurrent use.
type Manual struct {
	T float64
}

// Now returns the manual time.
func (m *Manual) Now() float64 { return m.T }

// Advance moves the clock forward by d seconds.
func (m *Manual) Advance(d float64) { m.T += d }

// Seconds converts a duration to seconds.
func Seconds(d time.Duration) float64 { return d.Seconds() }

// Duration converts seconds to a duration, rounded to the nanosecond.
func Duration(s float64) time.Duration {
	return time.Duration(s*1e9 + copysignHalf(s))
}

func copysignHalf(s float64) float64 {
	if s < 0 {
		return -0.5
	}
	return 0.5
}

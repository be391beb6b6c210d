package shed

import (
	"math"
	"strconv"
)

// Law is CoDel's control law: when, once a queue is standing, to drop.
type Law uint8

const (
	// RFC8289 is CoDel as RFC 8289 §5 specifies it. Each dequeued entry's
	// sojourn time s = now − enqueuedAt is checked:
	//
	//   - s < Target resets the clock; so does the queue going idle. The
	//     first entry with s ≥ Target arms it: firstAbove = now + Interval.
	//   - Once now ≥ firstAbove, CoDel enters the dropping state: it drops
	//     that entry, serves the next one, and schedules the next drop at
	//     now + Interval/√count, where count = 1 — or, if the previous
	//     dropping state ended less than about 16 intervals ago and raised
	//     count by more than 1 (count − the count it started with), that
	//     rise, so a queue that stands again soon resumes near its last
	//     drop rate.
	//   - In the dropping state, the first entry dequeued at or after the
	//     scheduled time is dropped, count grows by one, and if the next
	//     entry is still above target the following drop is scheduled
	//     Interval/√count after the previous schedule — so drops come faster
	//     the longer the queue stands (Interval, then Interval/√2,
	//     Interval/√3, …).
	//   - An entry with ok-to-drop false (s < Target, or the clock newly
	//     armed) ends the dropping state, and is served.
	//
	// RFC 8289's "fewer than one MTU in the queue" exemption has no
	// counterpart: the dropper sees only times, not the queue's length.
	RFC8289 Law = iota

	// Cutoff is the simpler rule of seed 000's "CoDel-like" experiment. For
	// each dequeued entry with sojourn s = now − enqueuedAt:
	//
	//   - s > Target, clock not running: start it (since = now); serve.
	//   - s > Target, now − since ≥ Interval: drop.
	//   - s > Target otherwise: serve.
	//   - s ≤ Target: stop the clock; serve. The queue going idle stops it too.
	//
	// Once the queue has stood above Target for an Interval, every entry
	// above Target is dropped until one at or below Target is served.
	Cutoff
)

// String returns "RFC 8289" or "cutoff".
func (l Law) String() string {
	switch l {
	case RFC8289:
		return "RFC 8289"
	case Cutoff:
		return "cutoff"
	}
	return "Law(" + strconv.Itoa(int(l)) + ")"
}

// Defaults of RFC 8289 (§4.2, §4.3), which Facebook also used for request
// queues (Maurer 2015: 5 ms and 100 ms).
const (
	DefaultTarget   = 0.005 // seconds
	DefaultInterval = 0.100 // seconds
)

// CoDelConfig configures a CoDel dropper. The zero value is RFC 8289 with
// its default target and interval.
type CoDelConfig struct {
	// Target, in seconds, is the acceptable standing sojourn time. 0 means
	// DefaultTarget (5 ms). Request queues usually want more (tens of ms).
	Target float64
	// Interval, in seconds, is how long the sojourn time must stay above
	// Target before dropping starts; it should cover a round trip or the
	// time a normal burst takes to drain. 0 means DefaultInterval (100 ms).
	Interval float64
	// Law is the control law; the zero value is RFC8289.
	Law Law
}

// CoDel decides at dequeue which entries of a queue to drop so that a
// standing queue drains, judging by sojourn time. It is a small state
// machine: call Drop for each entry taken from the queue, in order, and Idle
// whenever the queue is found empty. An entry Drop rejects should be
// refused (503) and the next one taken at once: RFC8289 assumes the entry
// after a drop is dequeued at the same instant.
//
// A CoDel is not safe for concurrent use; it belongs to one queue and lives
// under that queue's lock. Create it with NewCoDel.
type CoDel struct {
	target, interval float64 // immutable
	law              Law     // immutable

	// Cutoff and RFC8289: is the sojourn clock running, and since/until when.
	armed bool
	since float64 // Cutoff: when the sojourn rose above target
	until float64 // RFC8289: firstAbove, when dropping may start

	// RFC8289 dropping state.
	dropping  bool
	count     int     // drops in the current dropping state (with carry-over)
	lastCount int     // count when the dropping state was last entered
	dropNext  float64 // time of the next scheduled drop
	after     afterDrop
}

// afterDrop records what RFC 8289's dequeue loop does with the entry that
// follows a drop, since Drop sees one entry per call.
type afterDrop uint8

const (
	afterNone  afterDrop = iota
	afterEnter           // the drop entered the dropping state: serve the next entry
	afterDrop1           // a drop in the dropping state: reschedule if the next entry is still above
)

// NewCoDel returns a dropper, or a *ConfigError naming the bad field.
func NewCoDel(cfg CoDelConfig) (*CoDel, error) {
	if err := checkSeconds("Target", cfg.Target); err != nil {
		return nil, err
	}
	if err := checkSeconds("Interval", cfg.Interval); err != nil {
		return nil, err
	}
	if cfg.Law > Cutoff {
		return nil, badConfig("Law", "unknown law "+strconv.Itoa(int(cfg.Law)))
	}
	if cfg.Target == 0 {
		cfg.Target = DefaultTarget
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultInterval
	}
	return &CoDel{target: cfg.Target, interval: cfg.Interval, law: cfg.Law}, nil
}

// Target returns the target sojourn time in seconds.
func (c *CoDel) Target() float64 { return c.target }

// Interval returns the interval in seconds.
func (c *CoDel) Interval() float64 { return c.interval }

// Law returns the control law.
func (c *CoDel) Law() Law { return c.law }

// Drop is consulted for each entry taken from the queue at time now, with
// the time the entry was enqueued; it reports whether to drop the entry
// instead of serving it.
func (c *CoDel) Drop(now, enqueuedAt float64) bool {
	if c.law == Cutoff {
		return c.cutoff(now, now-enqueuedAt)
	}
	return c.rfc(now, now-enqueuedAt)
}

// Idle tells the dropper that the queue was found empty: the sojourn clock
// stops and an RFC 8289 dropping state ends (its count is kept for a quick
// re-entry).
func (c *CoDel) Idle() {
	c.armed = false
	c.dropping = false
	c.after = afterNone
}

// Dropping reports whether an RFC8289 dropper is in its dropping state.
// A Cutoff dropper reports whether its clock is running.
func (c *CoDel) Dropping() bool {
	if c.law == Cutoff {
		return c.armed
	}
	return c.dropping
}

func (c *CoDel) cutoff(now, sojourn float64) bool {
	if !(sojourn > c.target) {
		c.armed = false
		return false
	}
	if !c.armed {
		c.armed, c.since = true, now
		return false
	}
	return now-c.since >= c.interval
}

// okToDrop is RFC 8289's dodequeue test: has the sojourn time stayed at or
// above target for an interval?
func (c *CoDel) okToDrop(now, sojourn float64) bool {
	if sojourn < c.target {
		c.armed = false
		return false
	}
	if !c.armed {
		c.armed, c.until = true, now+c.interval
		return false
	}
	return now >= c.until
}

// controlLaw returns the time of the next drop after t.
func (c *CoDel) controlLaw(t float64) float64 {
	return t + c.interval/math.Sqrt(float64(c.count))
}

func (c *CoDel) rfc(now, sojourn float64) bool {
	ok := c.okToDrop(now, sojourn)
	after := c.after
	c.after = afterNone
	switch {
	case after == afterEnter:
		return false
	case after == afterDrop1:
		if !ok {
			c.dropping = false
			return false
		}
		c.dropNext = c.controlLaw(c.dropNext)
	case c.dropping:
		if !ok {
			c.dropping = false
			return false
		}
	case ok:
		c.dropping = true
		delta := c.count - c.lastCount
		c.count = 1
		if delta > 1 && now-c.dropNext < 16*c.interval {
			c.count = delta
		}
		c.dropNext = c.controlLaw(now)
		c.lastCount = c.count
		c.after = afterEnter
		return true
	default:
		return false
	}
	if now >= c.dropNext {
		c.count++
		c.after = afterDrop1
		return true
	}
	return false
}

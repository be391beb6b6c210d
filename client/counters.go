package client

import (
	"math"
	"sync/atomic"

	"github.com/spillwayhq/spillway/retry"
)

// Counters are one dependency's call counters and its moving average of
// attempt durations, shared by Transport and the gRPC interceptors
// (client/clientgrpc). All methods are safe for concurrent use, lock-free
// and allocation-free. The zero value is ready.
type Counters struct {
	srttBits                      atomic.Uint64 // moving average of successful attempt durations, seconds
	sent, retried, refused, hedge atomic.Uint64
	stops                         [8]atomic.Uint64 // by retry.Verdict
}

// Sent counts an attempt handed to the transport.
func (c *Counters) Sent() { c.sent.Add(1) }

// Retried counts a retry decided.
func (c *Counters) Retried() { c.retried.Add(1) }

// Refused counts a call or attempt refused locally.
func (c *Counters) Refused() { c.refused.Add(1) }

// Hedged counts a hedged attempt sent.
func (c *Counters) Hedged() { c.hedge.Add(1) }

// Stopped counts a retry not made, by verdict.
func (c *Counters) Stopped(v retry.Verdict) { c.stops[v&7].Add(1) }

// Observe folds a successful attempt's duration, in seconds, into the
// moving average (weight 1/8, as TCP's SRTT).
func (c *Counters) Observe(d float64) {
	for {
		old := c.srttBits.Load()
		v := math.Float64frombits(old)
		if v == 0 {
			v = d
		} else {
			v = float64(0.875*v) + float64(0.125*d)
		}
		if c.srttBits.CompareAndSwap(old, math.Float64bits(v)) {
			return
		}
	}
}

// Expected returns the moving average of attempt durations, in seconds (0
// before the first success): retry.Attempt.Expected.
func (c *Counters) Expected() float64 { return math.Float64frombits(c.srttBits.Load()) }

// Stats are a dependency's counters since they were made.
type Stats struct {
	Sent    uint64 // attempts sent to the inner transport
	Retried uint64 // retries decided (each is one more attempt)
	Refused uint64 // calls or attempts refused locally (throttle, breaker, bulkhead)
	Hedges  uint64 // hedged attempts sent
	// Stops counts retries not made, by retry.Verdict (index Retry stays 0).
	Stops [8]uint64
}

// Stats returns the counters.
func (c *Counters) Stats() Stats {
	s := Stats{Sent: c.sent.Load(), Retried: c.retried.Load(), Refused: c.refused.Load(), Hedges: c.hedge.Load()}
	for i := range s.Stops {
		s.Stops[i] = c.stops[i].Load()
	}
	return s
}

package chain

import (
	"sync/atomic"

	"github.com/spillwayhq/spillway/retry"
)

// Stats counts what a route's chain did.
type Stats struct {
	refused      atomic.Uint64
	retries      atomic.Uint64
	retryStopped [retry.StopServer + 1]atomic.Uint64
}

// Counts is a copy of a chain's counters.
type Counts struct {
	// Refused: requests answered by the chain's own stages (deadline,
	// rate limits, bulkhead, admission).
	Refused uint64
	// Retries sent; RetriesStopped by the retry policy's verdict
	// ("attempts", "budget", "deadline", "server").
	Retries        uint64
	RetriesStopped map[string]uint64
}

// Counts returns the chain's counters.
func (c *Chain) Counts() Counts {
	out := Counts{Refused: c.stats.refused.Load(), Retries: c.stats.retries.Load(), RetriesStopped: map[string]uint64{}}
	for v := retry.StopAttempts; v <= retry.StopServer; v++ {
		out.RetriesStopped[v.String()] = c.stats.retryStopped[v].Load()
	}
	return out
}

// InFlight is the number of the route's requests holding a bulkhead place.
func (c *Chain) InFlight() int64 { return c.inFlight.Load() }

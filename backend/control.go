package backend

import (
	"maps"
	"math"
	"time"

	"github.com/spillwayhq/spillway/clock"
)

// Stats is what a Backend has done since New. Health checks are counted
// in Health only. The JSON names are those of `spillway backend`'s /stats.
type Stats struct {
	Arrived  int64 `json:"arrived"`  // requests received
	Served   int64 `json:"served"`   // worked on to the end and answered 200, Late included
	Late     int64 `json:"late"`     // of Served: finished after the client had gone or its Spillway-Timeout budget ran out
	Errors   int64 `json:"errors"`   // answered at once with the injected error status
	Hung     int64 `json:"hung"`     // hung until the client left
	Rejected int64 `json:"rejected"` // refused with 503: every worker busy and the queue full
	// Cancelled counts requests given up because the client left
	// (HonorCancel), in the queue or at work.
	Cancelled   int64 `json:"cancelled"`
	InFlight    int   `json:"in_flight"`     // worked on now
	Queued      int   `json:"queued"`        // waiting for a worker now
	MaxInFlight int   `json:"max_in_flight"` // the most worked on at once so far
	Health      int64 `json:"health"`
	// ByHeader counts the requests received by the value of
	// Config.CountHeader ("" for those without it); nil without one.
	ByHeader map[string]int64 `json:"by_header,omitempty"`
}

// Stats returns a copy of the counts so far.
func (b *Backend) Stats() Stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.stats
	s.ByHeader = maps.Clone(b.stats.ByHeader)
	return s
}

// Capacity returns the number of workers now: the schedule's, inside one
// of its windows, or else the configured (or last set) number.
func (b *Backend) Capacity() int {
	now := b.clock.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.capacityLocked(now)
}

func (b *Backend) capacityLocked(now float64) int {
	t := now - b.start
	for _, w := range b.schedule {
		if t >= clock.Seconds(w.From) && t < clock.Seconds(w.To) {
			return w.Workers
		}
	}
	return b.workers
}

// SetCapacity sets the number of workers outside the schedule's windows
// (negative counts as 0). A rise starts queued requests at once; after a
// fall, requests at work finish and no new one starts until fewer than n
// are at work.
func (b *Backend) SetCapacity(n int) {
	now := b.clock.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.workers = max(n, 0)
	b.dispatchLocked(now)
}

// SetHealthy makes the health endpoint answer 200 (true) or 503 (false).
func (b *Backend) SetHealthy(ok bool) {
	b.mu.Lock()
	b.healthy = ok
	b.mu.Unlock()
}

// SetErrorRate sets the share of requests answered with the injected
// error; it is clamped so that it and the hang share add up to at most 1.
func (b *Backend) SetErrorRate(share float64) {
	b.mu.Lock()
	b.errorRate = clampShare(share, b.hangRate)
	b.mu.Unlock()
}

// SetHang sets the share of requests that hang until the client leaves;
// it is clamped so that it and the error share add up to at most 1.
func (b *Backend) SetHang(share float64) {
	b.mu.Lock()
	b.hangRate = clampShare(share, b.errorRate)
	b.mu.Unlock()
}

func clampShare(share, other float64) float64 {
	if !(share > 0) {
		return 0
	}
	return min(share, 1-other)
}

// SetSlowDown sets the factor on every service time drawn from now on
// (not positive counts as 1).
func (b *Backend) SetSlowDown(factor float64) {
	if !(factor > 0) {
		factor = 1
	}
	b.mu.Lock()
	b.slowDown = factor
	b.mu.Unlock()
}

// serviceLocked draws the service time of a request of the given cost.
func (b *Backend) serviceLocked(cost float64) time.Duration {
	m := clock.Seconds(b.dist.Mean)
	var s float64
	switch b.dist.Kind {
	case Exponential:
		s = b.rng.ExpFloat64() * m
	case LogNormal:
		// exp(μ + σZ) with μ = ln m − σ²/2 has mean m.
		sigma := b.dist.Sigma
		s = m * math.Exp(float64(sigma*b.rng.NormFloat64())-float64(sigma*sigma)/2)
	default:
		s = m
	}
	return clock.Duration(float64(s*cost) * b.slowDown)
}

package balancer

import (
	"math"
	"sync/atomic"
)

// EndpointState is the live state of one endpoint in a Set, shared by all
// snapshots while its address stays in the set: requests in flight and a
// peak-sensitive latency EWMA. Start and Done are lock-free (one atomic add;
// Done also a compare-and-swap loop) and allocation-free; safe for
// concurrent use. The hot counters fill a cache line of their own.
type EndpointState struct {
	inflight atomic.Int64
	ewma     atomic.Uint64 // packEWMA(estimate, instant); 0 = no sample
	_        [48]byte

	addr string                   // immutable
	tau  float64                  // immutable: SetConfig.LatencyDecay
	ep   atomic.Pointer[Endpoint] // current description, replaced by Update
}

// Addr returns the endpoint's address, its identity in the set.
func (e *EndpointState) Addr() string { return e.addr }

// Endpoint returns the endpoint's current description (weight and Meta as
// the last Update gave them). Do not modify the Meta map.
func (e *EndpointState) Endpoint() Endpoint { return *e.ep.Load() }

// InFlight returns the requests started and not yet done.
func (e *EndpointState) InFlight() int { return int(e.inflight.Load()) }

// Start counts a request sent to the endpoint. Pair it with exactly one Done;
// the count is not checked, so an unmatched Done makes it negative.
func (e *EndpointState) Start() { e.inflight.Add(1) }

// Done counts the completion of a request started at now − latency and
// feeds latency (seconds) into the endpoint's estimate, Finagle's peak EWMA:
// a sample above the stored estimate replaces it at once; otherwise the
// estimate moves toward the sample by 1 − exp(−Δt/τ), Δt the time since the
// last sample. A failed request (ok = false) may only raise the estimate —
// a fast failure does not make an endpoint look fast. A negative, NaN or
// infinite latency only decrements the count.
//
// The estimate is stored as a float32 with the instant of its last sample
// in milliseconds modulo 2³², packed in one atomic word: concurrent Dones
// never lose a sample, and intervals are exact up to 24.8 days (an endpoint
// with no sample for longer may decay wrongly once).
func (e *EndpointState) Done(now, latency float64, ok bool) {
	e.inflight.Add(-1)
	if !(latency >= 0) || math.IsInf(latency, 1) {
		return
	}
	t := msOf(now)
	for {
		old := e.ewma.Load()
		v, last := unpackEWMA(old)
		stamp := t
		if old != 0 && int32(t-last) < 0 {
			stamp = last // a concurrent caller's older instant: time does not go back
		}
		switch {
		case latency > v:
			v = latency
		case !ok:
			return
		default:
			d := elapsed(t, last)
			if d == 0 {
				return // no time since the last sample: weight 1 − e⁰ = 0, nothing moves
			}
			w := math.Exp(-d / e.tau)
			v = float64(v*w) + float64(latency*(1-w))
		}
		if e.ewma.CompareAndSwap(old, packEWMA(v, stamp)) {
			return
		}
	}
}

// Latency returns the latency estimate in seconds at now: the stored
// estimate decayed toward 0 by exp(−Δt/τ) since its last sample (so an
// endpoint that stopped receiving traffic looks better with time and is
// tried again), or 0 before any sample.
func (e *EndpointState) Latency(now float64) float64 {
	w := e.ewma.Load()
	if w == 0 {
		return 0
	}
	v, last := unpackEWMA(w)
	return v * math.Exp(-elapsed(msOf(now), last)/e.tau)
}

// msOf returns now in milliseconds modulo 2³².
func msOf(now float64) uint32 {
	if !(now > -1e15 && now < 1e15) {
		return 0
	}
	return uint32(int64(math.Floor(now * 1000)))
}

// elapsed returns the seconds from last to t (milliseconds modulo 2³²), 0
// when t is not after last (a concurrent caller's older instant).
func elapsed(t, last uint32) float64 {
	d := int32(t - last)
	if d <= 0 {
		return 0
	}
	return float64(d) / 1000
}

// packEWMA packs an estimate and its instant into a non-zero word.
func packEWMA(v float64, t uint32) uint64 {
	w := uint64(math.Float32bits(float32(v)))<<32 | uint64(t)
	if w == 0 {
		w = 1 // a zero estimate at instant 0: one millisecond off, not "no sample"
	}
	return w
}

// unpackEWMA returns the estimate and instant of w; (0, 0) for no sample.
func unpackEWMA(w uint64) (float64, uint32) {
	return float64(math.Float32frombits(uint32(w >> 32))), uint32(w)
}

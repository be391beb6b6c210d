package proxy

import (
	"math"
	"sync/atomic"

	"github.com/spillwayhq/spillway/balancer"
	"github.com/spillwayhq/spillway/health"
)

// Outlier is a cluster's passive health checking: the Detector sees every
// exchange's result and its ejections are applied to the cluster's Set.
type Outlier struct {
	Detector *health.Detector
	// TickEvery is how often, in seconds, ejections that ended are
	// returned to service (checked on the request path, one caller at a
	// time) [1].
	TickEvery float64
	nextTick  atomic.Uint64
}

// How an exchange ended, for the endpoint's counters and health.
const (
	endOK       = iota // the upstream answered (status says how)
	endClient          // the client's doing: went away, bad or slow body; no sample
	endUpstream        // the upstream failed: refused, reset, timeout, bad response
)

// finish completes an exchange on endpoint es that started at start:
// its in-flight count, latency sample and outlier result.
func (c *Cluster) finish(es *balancer.EndpointState, start, end float64, status, how int) {
	switch how {
	case endClient:
		es.Done(end, -1, false)
		return
	case endUpstream:
		es.Done(end, end-start, false)
		c.record(end, es.Addr(), health.GatewayFailure)
	default:
		es.Done(end, end-start, status < 500)
		c.record(end, es.Addr(), health.HTTPResult(status))
	}
}

// record feeds one result to the detector and applies its decisions.
func (c *Cluster) record(now float64, addr string, r health.Result) {
	o := c.Outlier
	if o == nil {
		return
	}
	if e := o.Detector.Record(now, addr, r); e.Ejected() {
		c.Set.Eject(now, addr, e.Until)
	}
	bits := o.nextTick.Load()
	if now < math.Float64frombits(bits) || !o.nextTick.CompareAndSwap(bits, math.Float64bits(now+o.every())) {
		return
	}
	for _, a := range o.Detector.Tick(now) {
		c.Set.Uneject(now, a)
	}
}

func (o *Outlier) every() float64 {
	if o.TickEvery > 0 {
		return o.TickEvery
	}
	return 1
}

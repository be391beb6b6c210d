package redisstore

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// tripBuckets are the upper bounds, in seconds, of the round-trip latency
// histogram: from a loopback Redis (well under a millisecond) to the
// store timeouts worth setting (tens of milliseconds) and past them.
var tripBuckets = [...]float64{0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1}

// tripLatency is the engine's histogram of pipeline round trips (one per
// batch sent, the script reload's included), kept in atomics: a worker
// adds to it without a lock, a scrape reads it.
type tripLatency struct {
	counts [len(tripBuckets) + 1]atomic.Uint64 // the last: above every bound
	sumNs  atomic.Uint64
}

// observe adds one round trip of d.
func (l *tripLatency) observe(d time.Duration) {
	s := d.Seconds()
	i := 0
	for i < len(tripBuckets) && s > tripBuckets[i] {
		i++
	}
	l.counts[i].Add(1)
	l.sumNs.Add(uint64(max(d, 0)))
}

// metricTripLatency is the engine's round-trip histogram: the time from
// sending a batch's pipeline to its last answer (or its error, or the
// deadline of its last caller).
var metricTripLatency = prometheus.NewDesc("spillway_ratelimit_redis_round_trip_seconds",
	"Time of each round trip to Redis (one pipeline of batched decisions), answered or failed.", nil, nil)

// histogram returns l as a constant Prometheus histogram.
func (l *tripLatency) histogram() prometheus.Metric {
	buckets := make(map[float64]uint64, len(tripBuckets))
	var n uint64
	for i, ub := range tripBuckets {
		n += l.counts[i].Load()
		buckets[ub] = n
	}
	n += l.counts[len(tripBuckets)].Load()
	sum := float64(l.sumNs.Load()) / float64(time.Second)
	if math.IsNaN(sum) {
		sum = 0
	}
	return prometheus.MustNewConstHistogram(metricTripLatency, n, sum, buckets)
}

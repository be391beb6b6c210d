package admit

import (
	"math"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spillwayhq/spillway/limit"
	"github.com/spillwayhq/spillway/shed"
)

// waitBuckets are the upper bounds, in seconds, of the queue wait
// histogram: 1 ms to 10 s.
var waitBuckets = [...]float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// waitHistogram counts the waits of queued requests that were granted a
// place: fixed buckets of atomics, read at scrape time.
type waitHistogram struct {
	counts  [len(waitBuckets) + 1]atomic.Uint64 // last: above the largest bound
	sumBits atomic.Uint64
}

func (h *waitHistogram) observe(v float64) {
	i := 0
	for i < len(waitBuckets) && v > waitBuckets[i] {
		i++
	}
	h.counts[i].Add(1)
	for {
		old := h.sumBits.Load()
		if h.sumBits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

// Collector exports the Gate's state and counters to Prometheus, read at
// scrape time (nothing is recorded per request beyond the Limiter's and the
// Gate's own atomic counters). Metric names, all with the label gate=Name:
//
//	spillway_admission_limit                         gauge: the adaptive limit
//	spillway_admission_in_flight                     gauge: places taken
//	spillway_admission_queue_length                  gauge: waiters queued
//	spillway_admission_queue_wait_seconds            histogram: waits of queued requests granted a place
//	spillway_admission_rtt_seconds                   gauge: smoothed RTT of successes
//	spillway_admission_admitted_total{class}         counter
//	spillway_admission_rejected_total{class,reason}  counter: reason is limit.Reason's label
//	spillway_admission_goodput_total{class}          counter: admitted requests that ended in Success
//	spillway_admission_brownout_level                gauge: share of requests given optional work (with a Dimmer)
//
// Labels are bounded: classes ≤ shed.MaxClasses, reasons limit.NumReasons.
func (g *Gate) Collector() prometheus.Collector { return (*collector)(g) }

type collector Gate

var (
	descLimit    = prometheus.NewDesc("spillway_admission_limit", "The adaptive concurrency limit now applied.", []string{"gate"}, nil)
	descInFlight = prometheus.NewDesc("spillway_admission_in_flight", "Places taken by requests in flight.", []string{"gate"}, nil)
	descQueueLen = prometheus.NewDesc("spillway_admission_queue_length", "Requests waiting in the queue (cancelled ones not yet reclaimed included).", []string{"gate"}, nil)
	descWait     = prometheus.NewDesc("spillway_admission_queue_wait_seconds", "Queue wait of requests granted a place after waiting.", []string{"gate"}, nil)
	descRTT      = prometheus.NewDesc("spillway_admission_rtt_seconds", "Smoothed latency of successful requests.", []string{"gate"}, nil)
	descAdmitted = prometheus.NewDesc("spillway_admission_admitted_total", "Requests given a place.", []string{"gate", "class"}, nil)
	descRejected = prometheus.NewDesc("spillway_admission_rejected_total", "Requests refused, by reason.", []string{"gate", "class", "reason"}, nil)
	descGoodput  = prometheus.NewDesc("spillway_admission_goodput_total", "Admitted requests that ended in success.", []string{"gate", "class"}, nil)
	descBrownout = prometheus.NewDesc("spillway_admission_brownout_level", "Share of requests given optional work.", []string{"gate"}, nil)
)

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLimit, descInFlight, descQueueLen, descWait, descRTT, descAdmitted, descRejected, descGoodput, descBrownout} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	g := (*Gate)(c)
	l := g.l
	ch <- prometheus.MustNewConstMetric(descLimit, prometheus.GaugeValue, float64(l.Limit()), g.name)
	ch <- prometheus.MustNewConstMetric(descInFlight, prometheus.GaugeValue, float64(l.InFlight()), g.name)
	ch <- prometheus.MustNewConstMetric(descQueueLen, prometheus.GaugeValue, float64(l.QueueLen()), g.name)
	ch <- prometheus.MustNewConstMetric(descRTT, prometheus.GaugeValue, l.RTT(), g.name)
	buckets := make(map[float64]uint64, len(waitBuckets))
	var cum uint64
	for i, ub := range waitBuckets {
		cum += g.waitH.counts[i].Load()
		buckets[ub] = cum
	}
	cum += g.waitH.counts[len(waitBuckets)].Load()
	ch <- prometheus.MustNewConstHistogram(descWait, cum, math.Float64frombits(g.waitH.sumBits.Load()), buckets, g.name)
	for ci := 0; ci < l.Classes(); ci++ {
		cl := shed.Class(ci)
		name := cl.String()
		k := l.Counts(cl)
		ch <- prometheus.MustNewConstMetric(descAdmitted, prometheus.CounterValue, float64(k.Admitted), g.name, name)
		ch <- prometheus.MustNewConstMetric(descGoodput, prometheus.CounterValue, float64(g.goodput[ci].Load()), g.name, name)
		for r := 1; r < limit.NumReasons; r++ {
			ch <- prometheus.MustNewConstMetric(descRejected, prometheus.CounterValue, float64(k.Rejects[r]), g.name, name, limit.Reason(r).String())
		}
	}
	if g.dimmer != nil {
		ch <- prometheus.MustNewConstMetric(descBrownout, prometheus.GaugeValue, g.dimmer.Stats().Level, g.name)
	}
}

package health

import "github.com/prometheus/client_golang/prometheus"

var (
	descChecks = prometheus.NewDesc("spillway_health_checks_total",
		"Active health checks completed, by result: passed or failed (cancelled checks are not counted).",
		[]string{"checker", "result"}, nil)
	descTransitions = prometheus.NewDesc("spillway_health_transitions_total",
		"Changes of a target's state found by active health checks, by the state entered.",
		[]string{"checker", "to"}, nil)
	descTargets = prometheus.NewDesc("spillway_health_targets",
		"Targets of the active health checker now, by state.",
		[]string{"checker", "state"}, nil)

	descEjections = prometheus.NewDesc("spillway_outlier_ejections_total",
		"Endpoints ejected by outlier detection, by reason.",
		[]string{"detector", "reason"}, nil)
	descRefused = prometheus.NewDesc("spillway_outlier_ejections_refused_total",
		"Ejections refused because the ejected share would exceed MaxEjectionPercent.",
		[]string{"detector"}, nil)
	descReturned = prometheus.NewDesc("spillway_outlier_returns_total",
		"Ejections ended (time served, or returned early).",
		[]string{"detector"}, nil)
	descEjected = prometheus.NewDesc("spillway_outlier_ejected",
		"Endpoints ejected now.", []string{"detector"}, nil)
	descHosts = prometheus.NewDesc("spillway_outlier_hosts",
		"Endpoints watched by outlier detection.", []string{"detector"}, nil)
)

// Collector exports the Checker's totals to Prometheus, read at scrape
// time, labelled checker=CheckerOptions.Name:
//
//	spillway_health_checks_total{result}   counter: passed, failed
//	spillway_health_transitions_total{to}  counter: healthy, unhealthy
//	spillway_health_targets{state}         gauge: healthy, unhealthy
//
// Six series per Checker whatever the number of targets: there are no
// per-target labels, since the target set is unbounded (discovery may
// bring any number of addresses); per-target counters are in Stats.
// Counts of removed targets stay in the totals. Safe for concurrent use.
func (c *Checker) Collector() prometheus.Collector { return (*checkerCollector)(c) }

type checkerCollector Checker

// Describe sends the three metric descriptions.
func (cc *checkerCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descChecks
	ch <- descTransitions
	ch <- descTargets
}

// Collect sends the current values.
func (cc *checkerCollector) Collect(ch chan<- prometheus.Metric) {
	c := (*Checker)(cc)
	c.mu.Lock()
	k := c.totals
	total, healthy := len(c.targets), 0
	for _, t := range c.targets {
		if t.tr.Healthy() {
			healthy++
		}
	}
	c.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(descChecks, prometheus.CounterValue, float64(k.passed), c.name, "passed")
	ch <- prometheus.MustNewConstMetric(descChecks, prometheus.CounterValue, float64(k.failed), c.name, "failed")
	ch <- prometheus.MustNewConstMetric(descTransitions, prometheus.CounterValue, float64(k.toHealthy), c.name, "healthy")
	ch <- prometheus.MustNewConstMetric(descTransitions, prometheus.CounterValue, float64(k.toUnhealth), c.name, "unhealthy")
	ch <- prometheus.MustNewConstMetric(descTargets, prometheus.GaugeValue, float64(healthy), c.name, "healthy")
	ch <- prometheus.MustNewConstMetric(descTargets, prometheus.GaugeValue, float64(total-healthy), c.name, "unhealthy")
}

// Collector exports the Detector's counters to Prometheus, read at scrape
// time, labelled detector=name:
//
//	spillway_outlier_ejections_total{reason}   counter: consecutive_5xx, consecutive_gateway_failure
//	spillway_outlier_ejections_refused_total   counter: refused by MaxEjectionPercent
//	spillway_outlier_returns_total             counter: ejections ended
//	spillway_outlier_ejected                   gauge: endpoints ejected now
//	spillway_outlier_hosts                     gauge: endpoints watched
//
// Six series per Detector, no per-endpoint labels. Nothing is added to
// Record's path. Safe for concurrent use.
func (d *Detector) Collector(name string) prometheus.Collector {
	return &detectorCollector{d: d, name: name}
}

type detectorCollector struct {
	d    *Detector
	name string
}

// Describe sends the five metric descriptions.
func (dc *detectorCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descEjections
	ch <- descRefused
	ch <- descReturned
	ch <- descEjected
	ch <- descHosts
}

// Collect sends the current values.
func (dc *detectorCollector) Collect(ch chan<- prometheus.Metric) {
	d := dc.d
	d.mu.Lock()
	counts, refused, returned, ejected, hosts := d.counts, d.refused, d.returned, d.ejected, len(*d.hosts.Load())
	d.mu.Unlock()
	for r := Consecutive5xx; r < NumReasons; r++ {
		ch <- prometheus.MustNewConstMetric(descEjections, prometheus.CounterValue, float64(counts[r]), dc.name, r.String())
	}
	ch <- prometheus.MustNewConstMetric(descRefused, prometheus.CounterValue, float64(refused), dc.name)
	ch <- prometheus.MustNewConstMetric(descReturned, prometheus.CounterValue, float64(returned), dc.name)
	ch <- prometheus.MustNewConstMetric(descEjected, prometheus.GaugeValue, float64(ejected), dc.name)
	ch <- prometheus.MustNewConstMetric(descHosts, prometheus.GaugeValue, float64(hosts), dc.name)
}

package metrics

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/spillwayhq/spillway/clock"
)

// DefaultBuckets are request_duration_seconds' upper bounds in seconds,
// from 0.5 ms (a loopback hop through the gateway) to 30 s (a slow
// upstream near the usual request timeouts), about ×2–2.5 apart.
var DefaultBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// DefaultMaxEndpoints is the default of Options.MaxEndpoints.
const DefaultMaxEndpoints = 1000

// Bounds of the /metrics handler: concurrent scrapes beyond maxScrapes are
// answered 503 at once, and a scrape is answered 503 after scrapeTimeout.
const (
	maxScrapes    = 4
	scrapeTimeout = 10 * time.Second
)

// Options configure a Metrics; the zero value is ready to use.
type Options struct {
	// Clock is the timeline of the clusters' balancer.Sets: endpoint
	// states are read at Clock.Now() when Prometheus scrapes. It must be
	// the clock the gateway passes to its Sets [clock.NewReal()].
	Clock clock.Clock
	// MaxEndpoints bounds, per cluster, the endpoints with series of their
	// own; the others share endpoint="other" [DefaultMaxEndpoints]. Must
	// not be negative.
	MaxEndpoints int
	// Buckets are request_duration_seconds' upper bounds, increasing
	// [DefaultBuckets].
	Buckets []float64
}

// Metrics holds one gateway process's registry and series. Safe for
// concurrent use.
type Metrics struct {
	reg     *prometheus.Registry
	handler http.Handler
	clk     clock.Clock
	maxEps  int

	requests  *prometheus.CounterVec   // route, cluster, code_class, source
	duration  *prometheus.HistogramVec // route, cluster
	inFlight  *prometheus.GaugeVec     // route
	upErrors  *prometheus.CounterVec   // cluster, endpoint, kind
	refusals  *prometheus.CounterVec   // route, reason, class
	reloadsOK prometheus.Counter
	reloadsKO prometheus.Counter

	sources atomic.Pointer[Sources]

	mu       sync.Mutex
	live     []*Gen                      // guarded by mu: not yet retired, oldest first
	clusters map[string]*ClusterObserver // guarded by mu: by cluster name, shared by generations
	next     uint64                      // guarded by mu: the last generation's number
}

// New returns a Metrics with its own registry, on which the process and Go
// runtime collectors are registered too.
func New(opts Options) (*Metrics, error) {
	if opts.MaxEndpoints < 0 {
		return nil, errors.New("metrics: Options.MaxEndpoints must not be negative, got " + strconv.Itoa(opts.MaxEndpoints))
	}
	if opts.MaxEndpoints == 0 {
		opts.MaxEndpoints = DefaultMaxEndpoints
	}
	if opts.Clock == nil {
		opts.Clock = clock.NewReal()
	}
	if opts.Buckets == nil {
		opts.Buckets = DefaultBuckets
	}
	if !increasing(opts.Buckets) {
		return nil, errors.New("metrics: Options.Buckets must be one or more strictly increasing numbers")
	}
	m := &Metrics{reg: prometheus.NewRegistry(), clk: opts.Clock, maxEps: opts.MaxEndpoints, clusters: map[string]*ClusterObserver{}}
	m.define(opts.Buckets)
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		Registry: m.reg, MaxRequestsInFlight: maxScrapes, Timeout: scrapeTimeout,
	})
	return m, nil
}

func increasing(b []float64) bool {
	for i := 1; i < len(b); i++ {
		if !(b[i] > b[i-1]) {
			return false
		}
	}
	return len(b) > 0 && !math.IsNaN(b[0])
}

// define creates and registers the series.
func (m *Metrics) define(buckets []float64) {
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "spillway_requests_total",
		Help: "Requests by route, cluster, status class (1xx..5xx) and source of the answer (gateway or upstream).",
	}, []string{"route", "cluster", "code_class", "source"})
	m.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "spillway_request_duration_seconds", Buckets: buckets,
		Help: "Time from the request's head to the end of its answer, by route and cluster.",
	}, []string{"route", "cluster"})
	m.inFlight = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "spillway_requests_in_flight",
		Help: "Requests (upgraded connections included) in flight, by route.",
	}, []string{"route"})
	m.upErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "spillway_upstream_errors_total",
		Help: "Exchanges that failed in the upstream, by cluster, endpoint (\"other\" beyond the per-cluster cap) and kind.",
	}, []string{"cluster", "endpoint", "kind"})
	m.refusals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "spillway_refusals_total",
		Help: "Answers the gateway gave itself instead of the upstream's (the policy chain's refusals, upstream failures, clients gone), by route, reason code (\"other\" beyond the per-route cap) and class (\"none\" when no policy chain ran).",
	}, []string{"route", "reason", "class"})
	reloads := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "spillway_reloads_total",
		Help: "Configuration reloads by result (ok or error).",
	}, []string{"result"})
	m.reloadsOK, m.reloadsKO = reloads.WithLabelValues("ok"), reloads.WithLabelValues("error")
	m.reg.MustRegister(m.requests, m.duration, m.inFlight, m.upErrors, m.refusals, reloads, (*collector)(m), (*policyCollector)(m),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), collectors.NewGoCollector())
}

// Handler serves the registry in the Prometheus exposition formats; at
// most 4 scrapes at once (503 beyond), each bounded to 10 s.
func (m *Metrics) Handler() http.Handler { return m.handler }

// Registry returns the process's registry, for collectors of other
// packages (admit's, the limiters').
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Reload counts one reload attempt: ok when err is nil, error otherwise.
func (m *Metrics) Reload(err error) {
	if err == nil {
		m.reloadsOK.Inc()
	} else {
		m.reloadsKO.Inc()
	}
}

// Sources are counts the gateway keeps elsewhere, read when Prometheus
// scrapes. Every field is optional; each function must be safe to call
// concurrently and report a bounded set of names (from the
// configuration), each name once.
type Sources struct {
	// OverloadActions calls add once per self-protection action (package
	// overload's Stats) with the times it was taken since the start:
	// overload_actions_total{action}.
	OverloadActions func(add func(action string, count uint64))
	// OverloadState returns self-protection's current level (0: normal):
	// overload_state.
	OverloadState func() float64
	// Connections calls add once per listener with its open connections
	// (proxy.Server.Stats().Active): connections_open{listener}.
	Connections func(add func(listener string, open int))
	// Routes calls add once per route of the running configuration with
	// its policy state: spillway_route_retries_total,
	// spillway_route_retries_stopped_total{verdict},
	// spillway_route_retry_budget_tokens, spillway_route_policies_bypassed,
	// spillway_route_ratelimit_decisions_total{rule, outcome} and, with
	// hot keys, spillway_route_ratelimit_hot_key_units{rule, key}.
	Routes func(add func(RoutePolicy))
	// Clusters calls add once per cluster with a guard: its admission's
	// and breaker's series (packages admit and breaker, labelled gate and
	// breaker with the cluster's name) and the overrides'.
	Clusters func(add func(ClusterPolicy))
	// Collectors calls add with more collectors to read at scrape time
	// (the Redis rate-limit stores'); their series must not be any other
	// source's.
	Collectors func(add func(prometheus.Collector))
}

// SetSources replaces the sources read at scrape time.
func (m *Metrics) SetSources(s Sources) { m.sources.Store(&s) }

package metrics

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spillwayhq/spillway/proxy"
	"github.com/spillwayhq/spillway/shed"
	"github.com/spillwayhq/spillway/upstream"
)

var (
	_ proxy.Observer        = (*RouteObserver)(nil)
	_ proxy.ClusterObserver = (*ClusterObserver)(nil)
)

// The values of code_class and source, indexed as RouteObserver's array.
var (
	classNames  = [...]string{"1xx", "2xx", "3xx", "4xx", "5xx"}
	sourceNames = [...]string{"gateway", "upstream"}
)

// RouteObserver is a route's proxy.Observer, its label children resolved
// when its generation was built — but for the gateway's answers by
// reason and class, resolved lazily once per pair. Begin and End take no
// lock and allocate nothing (after a pair's first answer).
type RouteObserver struct {
	info     RouteInfo
	requests [len(classNames)][len(sourceNames)]prometheus.Counter
	duration prometheus.Observer
	inFlight prometheus.Gauge
	refusals *lazyCounters // by reason (capped: "other") and classIndex
}

// MaxReasons bounds, per route, the reason codes with series of their
// own; further ones share reason="other". The chain's and the engines'
// codes are a fixed set of about twenty, and each rate-limit rule adds
// three ("ratelimit:", "ratelimit-unavailable:", "ratelimit-abandoned:").
const MaxReasons = 128

// requestClasses are the class label values: shed.Class's names, the last
// "none" for a request no policy chain classed.
var requestClasses = func() (out [shed.MaxClasses + 1]string) {
	for c := range shed.MaxClasses {
		out[c] = shed.Class(c).String()
	}
	out[shed.MaxClasses] = "none"
	return out
}()

// classIndex is e's index in requestClasses.
func classIndex(e *proxy.Ending) int {
	switch {
	case !e.Classed:
		return shed.MaxClasses
	case int(e.Class) >= shed.MaxClasses:
		return shed.MaxClasses - 1
	}
	return int(e.Class)
}

func (m *Metrics) newRouteObserver(r RouteInfo) *RouteObserver {
	o := &RouteObserver{
		info:     r,
		duration: m.duration.WithLabelValues(r.Name, r.Cluster),
		inFlight: m.inFlight.WithLabelValues(r.Name),
	}
	for c, class := range classNames {
		for s, src := range sourceNames {
			o.requests[c][s] = m.requests.WithLabelValues(r.Name, r.Cluster, class, src)
		}
	}
	o.refusals = newLazyCounters(MaxReasons, len(requestClasses), func(reason string, c int) prometheus.Counter {
		return m.refusals.WithLabelValues(r.Name, reason, requestClasses[c])
	})
	return o
}

// Begin counts a request in flight.
func (o *RouteObserver) Begin() { o.inFlight.Inc() }

// End counts a finished request under its status class — statuses below
// 100 or above 599 count as 5xx — and source, observes its duration,
// counts a gateway answer under its reason and class, and then (last, so
// that a reader who sees it gone sees it counted) takes it out of the
// in-flight gauge.
func (o *RouteObserver) End(e proxy.Ending) {
	c := e.Status/100 - 1
	if c < 0 || c >= len(classNames) {
		c = len(classNames) - 1
	}
	s := 0
	if e.FromUpstream {
		s = 1
	}
	o.requests[c][s].Inc()
	o.duration.Observe(e.Seconds)
	if e.Reason != "" {
		o.refusals.get(e.Reason, classIndex(&e)).Inc()
	}
	o.inFlight.Dec()
}

// kindNames are the kind label values, upstream.Kind's names with spaces
// as underscores ("pool full" → "pool_full"); index 0 is "unknown", also
// used for kinds beyond the table.
var kindNames = func() (out [upstream.KindRequestBody + 1]string) {
	for k := range out {
		out[k] = strings.ReplaceAll(upstream.Kind(k).String(), " ", "_")
	}
	return out
}()

// ClusterObserver is a cluster's proxy.ClusterObserver, shared by the
// generations that have a cluster of its name. Its children are resolved
// lazily, once per endpoint and kind: after the first error of a kind on
// an endpoint, UpstreamError takes no lock and allocates nothing.
type ClusterObserver struct {
	name   string
	errors *lazyCounters // by endpoint (capped: "other") and kind
}

func newClusterObserver(m *Metrics, name string) *ClusterObserver {
	o := &ClusterObserver{name: name}
	o.errors = newLazyCounters(m.maxEps, len(kindNames), func(ep string, k int) prometheus.Counter {
		return m.upErrors.WithLabelValues(name, ep, kindNames[k])
	})
	return o
}

// UpstreamError counts a failed exchange with endpoint addr.
func (o *ClusterObserver) UpstreamError(addr string, kind upstream.Kind) {
	k := int(kind)
	if k >= len(kindNames) {
		k = 0
	}
	o.errors.get(addr, k).Inc()
}

// retire marks o retired and deletes its series; a late error of a
// request of its last generation then creates none.
func (o *ClusterObserver) retire(m *Metrics) {
	o.errors.retire(func() { m.upErrors.DeletePartialMatch(map[string]string{"cluster": o.name}) })
}

// prune forgets the endpoints keep does not report and deletes their
// series. A request still holding a pruned endpoint's child counts into
// a deleted series (lost, as the endpoint is gone).
func (o *ClusterObserver) prune(m *Metrics, keep func(addr string) bool) {
	o.errors.prune(keep, func(addr string, k int) { m.upErrors.DeleteLabelValues(o.name, addr, kindNames[k]) })
}

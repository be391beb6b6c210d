package metrics

import (
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spillwayhq/spillway/proxy"
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
// when its generation was built. Begin and End take no lock and allocate
// nothing.
type RouteObserver struct {
	info     RouteInfo
	requests [len(classNames)][len(sourceNames)]prometheus.Counter
	duration prometheus.Observer
	inFlight prometheus.Gauge
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
	return o
}

// Begin counts a request in flight.
func (o *RouteObserver) Begin() { o.inFlight.Inc() }

// End counts a finished request under its status class — statuses below
// 100 or above 599 count as 5xx — and source, observes its duration, and
// then (last, so that a reader who sees it gone sees it counted) takes it
// out of the in-flight gauge.
func (o *RouteObserver) End(status int, fromUpstream bool, seconds float64) {
	c := status/100 - 1
	if c < 0 || c >= len(classNames) {
		c = len(classNames) - 1
	}
	s := 0
	if fromUpstream {
		s = 1
	}
	o.requests[c][s].Inc()
	o.duration.Observe(seconds)
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
	m     *Metrics
	name  string
	eps   atomic.Pointer[map[string]*endpointErrors] // copy on write, under mu
	other *endpointErrors                            // endpoints beyond the cap

	mu      sync.Mutex // serialises changes to eps and every child's creation
	retired bool       // guarded by mu: its series are deleted, create none
}

// discard counts what a retired cluster observer is still told.
var discard prometheus.Counter = prometheus.NewCounter(prometheus.CounterOpts{Name: "spillway_discarded"})

// endpointErrors holds one endpoint's children by kind; a nil entry is
// not resolved yet. Set under ClusterObserver.mu.
type endpointErrors struct {
	label string
	kinds [len(kindNames)]atomic.Pointer[prometheus.Counter]
}

func newClusterObserver(m *Metrics, name string) *ClusterObserver {
	o := &ClusterObserver{m: m, name: name, other: &endpointErrors{label: "other"}}
	empty := map[string]*endpointErrors{}
	o.eps.Store(&empty)
	return o
}

// UpstreamError counts a failed exchange with endpoint addr.
func (o *ClusterObserver) UpstreamError(addr string, kind upstream.Kind) {
	k := int(kind)
	if k >= len(kindNames) {
		k = 0
	}
	cur := *o.eps.Load()
	e := cur[addr]
	if e == nil && len(cur) >= o.m.maxEps {
		e = o.other
	}
	var c *prometheus.Counter
	if e != nil {
		c = e.kinds[k].Load()
	}
	if c == nil {
		c = o.resolve(addr, e, k)
	}
	(*c).Inc()
}

// resolve returns the child of addr (or of "other", e) and kind k,
// adding the endpoint and creating the series when they do not exist.
// Children are created only under mu and only for endpoints in eps (or
// other), so prune, which deletes under mu, never leaves a series behind.
func (o *ClusterObserver) resolve(addr string, e *endpointErrors, k int) *prometheus.Counter {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.retired {
		return &discard
	}
	if e != o.other {
		e = o.addLocked(addr)
	}
	if c := e.kinds[k].Load(); c != nil {
		return c
	}
	c := o.m.upErrors.WithLabelValues(o.name, e.label, kindNames[k])
	e.kinds[k].Store(&c)
	return &c
}

// addLocked returns addr's entry, adding it when the cap allows and
// returning other when it does not.
func (o *ClusterObserver) addLocked(addr string) *endpointErrors {
	cur := *o.eps.Load()
	if e := cur[addr]; e != nil {
		return e
	}
	if len(cur) >= o.m.maxEps {
		return o.other
	}
	next := make(map[string]*endpointErrors, len(cur)+1)
	for a, e := range cur {
		next[a] = e
	}
	e := &endpointErrors{label: addr}
	next[addr] = e
	o.eps.Store(&next)
	return e
}

// retire marks o retired and deletes its series; a late error of a
// request of its last generation then creates none.
func (o *ClusterObserver) retire() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.retired = true
	o.m.upErrors.DeletePartialMatch(map[string]string{"cluster": o.name})
}

// prune forgets the endpoints keep does not report and deletes their
// series. A request still holding a pruned endpoint's child counts into
// a deleted series (lost, as the endpoint is gone).
func (o *ClusterObserver) prune(keep func(addr string) bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	cur := *o.eps.Load()
	var next map[string]*endpointErrors
	for a, e := range cur {
		if keep(a) {
			continue
		}
		if next == nil {
			next = make(map[string]*endpointErrors, len(cur))
			for a2, e2 := range cur {
				next[a2] = e2
			}
		}
		delete(next, a)
		for k := range e.kinds {
			if e.kinds[k].Load() != nil {
				o.m.upErrors.DeleteLabelValues(o.name, a, kindNames[k])
			}
		}
	}
	if next != nil {
		o.eps.Store(&next)
	}
}

package timeline

import (
	"math"
	"slices"
	"sort"
	"sync"
	"time"
)

// Timeline is the rings of the last Points samples. Safe for concurrent
// use: Sample and Data take its lock.
type Timeline struct {
	mu        sync.Mutex
	times     [Points]int64 // guarded by mu: unix milliseconds per slot
	n         uint64        // guarded by mu: samples taken so far
	routes    []*routeTrack // guarded by mu: in order of first sight
	clusters  []*clusterTrack
	metrics   bool      // guarded by mu: the last sample had the request series
	untracked Untracked // guarded by mu: of the last sample
}

// Untracked counts the names of the last sample past the bounds.
type Untracked struct {
	Routes    int `json:"routes"`
	Clusters  int `json:"clusters"`
	Endpoints int `json:"endpoints"`
}

type routeTrack struct {
	name, cluster                                      string
	seen                                               uint64 // the last sample that had it
	offered, admitted, good, p50, p99, retries, budget *series
	cReq, cGood, cRefused, cRetries                    counter
	hist                                               histogram
	rejects                                            []*rejectTrack // at most MaxRejectKeys, "other" last
}

type rejectTrack struct {
	key string
	c   counter
	s   *series
}

type clusterTrack struct {
	name                                                 string
	seen                                                 uint64
	limit, inFlight, queueLen, queueWait, brownout, brkr *series
	endpoints                                            []*endpointTrack
}

type endpointTrack struct {
	addr   string
	seen   uint64
	states [Points]byte // stateCodes; 0: absent
}

// New returns an empty Timeline.
func New() *Timeline { return &Timeline{} }

// Sample records s as the point at now. Rates are over the time since the
// previous sample; a now not after the previous sample's (to the
// millisecond) is ignored and Sample returns false.
func (tl *Timeline) Sample(now time.Time, s Snapshot) bool {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	ms := now.UnixMilli()
	dt := 0.0
	if tl.n > 0 {
		last := tl.times[(tl.n-1)%Points]
		if ms <= last {
			return false
		}
		dt = float64(ms-last) / 1000
	}
	slot := tl.n % Points
	tl.times[slot] = ms
	tl.metrics, tl.untracked = s.Metrics, Untracked{}
	tl.sampleRoutes(slot, dt, s)
	tl.sampleClusters(slot, s.Clusters)
	tl.n++
	return true
}

func (tl *Timeline) sampleRoutes(slot uint64, dt float64, s Snapshot) {
	for i := range s.Routes {
		r := &s.Routes[i]
		rt := tl.route(r.Name)
		if rt == nil {
			tl.untracked.Routes++
			continue
		}
		rt.seen, rt.cluster = tl.n, r.Cluster
		rt.record(slot, dt, r, s.Metrics)
	}
	tl.routes = slices.DeleteFunc(tl.routes, func(rt *routeTrack) bool {
		if rt.seen == tl.n {
			return false
		}
		rt.absent(slot)
		return tl.n-rt.seen >= Points
	})
}

// route finds or makes name's track; nil past MaxRoutes.
func (tl *Timeline) route(name string) *routeTrack {
	for _, rt := range tl.routes {
		if rt.name == name {
			return rt
		}
	}
	if len(tl.routes) >= MaxRoutes {
		return nil
	}
	rt := &routeTrack{name: name, offered: newSeries(), admitted: newSeries(), good: newSeries(),
		p50: newSeries(), p99: newSeries(), retries: newSeries(), budget: newSeries()}
	tl.routes = append(tl.routes, rt)
	return rt
}

var nan = float32(math.NaN())

func (rt *routeTrack) record(slot uint64, dt float64, r *RouteSnap, withMetrics bool) {
	rt.retries[slot] = rt.cRetries.rate(r.Retries, dt)
	rt.budget[slot] = nan
	if r.HasBudget {
		rt.budget[slot] = float32(r.Budget)
	}
	refused := rt.cRefused.rate(r.Refused, dt)
	if !withMetrics {
		rt.offered[slot], rt.admitted[slot], rt.good[slot], rt.p50[slot], rt.p99[slot] = nan, nan, nan, nan, nan
		rt.cReq, rt.cGood, rt.hist = counter{}, counter{}, histogram{}
		return
	}
	offered := rt.cReq.rate(r.Requests, dt)
	rt.offered[slot], rt.admitted[slot] = offered, float32(math.Max(0, float64(offered-refused)))
	rt.good[slot] = rt.cGood.rate(r.Good, dt)
	q := rt.hist.quantiles(r.Bounds, r.Latency, 0.5, 0.99)
	rt.p50[slot], rt.p99[slot] = q[0], q[1]
	rt.recordRejects(slot, dt, r.Rejects)
}

// recordRejects adds the reject keys in name order while there is room,
// the rest summed under "other".
func (rt *routeTrack) recordRejects(slot uint64, dt float64, rejects map[string]uint64) {
	keys := make([]string, 0, len(rejects))
	for k := range rejects {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	sums := make([]uint64, len(rt.rejects), MaxRejectKeys)
	for _, k := range keys {
		i := slices.IndexFunc(rt.rejects, func(t *rejectTrack) bool { return t.key == k })
		if i < 0 {
			i = rt.addReject(k)
			for len(sums) < len(rt.rejects) {
				sums = append(sums, 0)
			}
		}
		sums[i] += rejects[k]
	}
	for i, t := range rt.rejects {
		t.s[slot] = t.c.rate(sums[i], dt)
	}
}

// addReject makes a track for key, or returns "other"'s index when the
// route has MaxRejectKeys−1 of them.
func (rt *routeTrack) addReject(key string) int {
	n := len(rt.rejects)
	if n > 0 && rt.rejects[n-1].key == "other" {
		return n - 1
	}
	if n == MaxRejectKeys-1 {
		key = "other"
	}
	rt.rejects = append(rt.rejects, &rejectTrack{key: key, s: newSeries()})
	return n
}

// absent writes no value for a sample without the route and forgets its
// previous counts (rates restart when it comes back).
func (rt *routeTrack) absent(slot uint64) {
	for _, s := range []*series{rt.offered, rt.admitted, rt.good, rt.p50, rt.p99, rt.retries, rt.budget} {
		s[slot] = nan
	}
	for _, t := range rt.rejects {
		t.s[slot], t.c = nan, counter{}
	}
	rt.cReq, rt.cGood, rt.cRefused, rt.cRetries, rt.hist = counter{}, counter{}, counter{}, counter{}, histogram{}
}

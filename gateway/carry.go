package gateway

import (
	"encoding/json"
	"time"

	"github.com/spillwayhq/spillway/balancer"
	"github.com/spillwayhq/spillway/config"
)

// clusterKeys identify the parts of a cluster by their definitions: two
// clusters whose keys of a part are equal can share that part's state.
type clusterKeys struct {
	name     string
	upstream string // protocol, TLS, pool, connect timeout: the pools
	active   string // the active check: the checker and its health states
	outlier  string // the passive check: the detector
	balance  string // picker, weights' use, slow start, panic mode, hashing: the Set
	source   string // endpoints or discovery
}

func keysOf(c *config.Cluster, connect time.Duration) clusterKeys {
	return clusterKeys{
		name:     c.Name,
		upstream: fingerprint(c.Protocol, c.TLS, c.Pool, c.ProxyProtocol, connect),
		active:   fingerprint(c.Health.Active),
		outlier:  fingerprint(c.Health.Outlier),
		balance: fingerprint(c.Picker, c.LeastRequest, c.RingHash, c.Maglev, c.HashKey,
			c.SlowStart, c.SlowStartMin, c.PanicThreshold, c.LatencyDecay),
		source: fingerprint(c.Endpoints, c.Discovery),
	}
}

// same reports whether only the endpoint source differs: the cluster is
// kept as it is and follows the new source.
func (k clusterKeys) same(o clusterKeys) bool {
	k.source, o.source = "", ""
	return k == o
}

// fingerprint is a value's identity for comparison within one process:
// its exported fields as JSON (unexported derived values, such as the
// compiled TLS configuration, follow from the exported ones).
func fingerprint(vs ...any) string {
	b, err := json.Marshal(vs)
	if err != nil {
		panic("gateway: fingerprint: " + err.Error()) // config types always marshal
	}
	return string(b)
}

// takeOver gives the new cluster next the parts of prev whose definitions
// are equal, and the drain and health state of every endpoint both have:
// the pools (no reconnection), the checker (no re-learning; it reports to
// next from now), the detector (ejections continue). The caller holds the
// gateway's mutex; prev stops following its source (next does).
func takeOver(next, prev *cluster) {
	now := next.clk.Now()
	if next.keys.upstream == prev.keys.upstream {
		prev.mu.Lock()
		next.pools, next.px.H2 = prev.pools, prev.px.H2
		prev.mu.Unlock()
		prev.gavePools = true
	}
	if next.keys.active == prev.keys.active && prev.checker != nil {
		if next.checker != nil {
			next.checker.Stop() // never started; the carried one replaces it
		}
		next.checker, next.moved = prev.checker, true
		prev.gaveChecker = true
		next.set = prev.set // the checker's reference: it reports to next's Set from now
	}
	if next.keys.outlier == prev.keys.outlier && prev.px.Outlier != nil {
		next.px.Outlier = prev.px.Outlier
	}
	next.carried = snapshotStates(prev, now)
	next.set.Store(next.px.Set)
}

// endpointState is what an endpoint keeps across a rebuilt Set.
type endpointState struct{ healthy, draining bool }

func snapshotStates(prev *cluster, now float64) map[string]endpointState {
	out := map[string]endpointState{}
	for _, m := range prev.px.Set.Members(now) {
		// Draining hides health (it wins in State): ask the checker.
		healthy := m.State != balancer.Unhealthy
		if prev.checker != nil {
			if h, ok := prev.checker.Healthy(m.Addr()); ok {
				healthy = h
			}
		}
		out[m.Addr()] = endpointState{healthy: healthy, draining: m.State == balancer.Draining}
	}
	return out
}

// applyCarried gives the endpoints of a rebuilt Set their carried state,
// once they are in it.
func (cl *cluster) applyCarried() {
	if cl.carried == nil {
		return
	}
	now := cl.clk.Now()
	for addr, st := range cl.carried {
		if cl.moved {
			// The carried checker may have changed its mind since the
			// snapshot: it is the authority.
			if h, ok := cl.checker.Healthy(addr); ok {
				st.healthy = h
			}
		}
		cl.px.Set.SetHealthy(now, addr, st.healthy)
		if st.draining {
			cl.px.Set.Drain(now, addr, true)
		}
	}
	cl.carried = nil
}

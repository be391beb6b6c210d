package timeline

import "slices"

func (tl *Timeline) sampleClusters(slot uint64, list []ClusterSnap) {
	for i := range list {
		c := &list[i]
		ct := tl.cluster(c.Name)
		if ct == nil {
			tl.untracked.Clusters++
			continue
		}
		ct.seen = tl.n
		ct.record(slot, c)
		tl.untracked.Endpoints += ct.recordEndpoints(tl.n, slot, c.Endpoints)
	}
	tl.clusters = slices.DeleteFunc(tl.clusters, func(ct *clusterTrack) bool {
		if ct.seen == tl.n {
			return false
		}
		for _, s := range ct.all() {
			s[slot] = nan
		}
		ct.recordEndpoints(tl.n, slot, nil)
		return tl.n-ct.seen >= Points
	})
}

// cluster finds or makes name's track; nil past MaxClusters.
func (tl *Timeline) cluster(name string) *clusterTrack {
	for _, ct := range tl.clusters {
		if ct.name == name {
			return ct
		}
	}
	if len(tl.clusters) >= MaxClusters {
		return nil
	}
	ct := &clusterTrack{name: name, limit: newSeries(), inFlight: newSeries(), queueLen: newSeries(),
		queueWait: newSeries(), brownout: newSeries(), brkr: newSeries()}
	tl.clusters = append(tl.clusters, ct)
	return ct
}

func (ct *clusterTrack) all() []*series {
	return []*series{ct.limit, ct.inFlight, ct.queueLen, ct.queueWait, ct.brownout, ct.brkr}
}

func (ct *clusterTrack) record(slot uint64, c *ClusterSnap) {
	for _, s := range ct.all() {
		s[slot] = nan
	}
	if c.HasAdmission {
		ct.limit[slot], ct.inFlight[slot] = float32(c.Limit), float32(c.InFlight)
		ct.queueLen[slot], ct.queueWait[slot] = float32(c.QueueLength), float32(c.QueueWait*1000)
	}
	if c.HasBrownout {
		ct.brownout[slot] = float32(c.Brownout)
	}
	if lv, ok := breakerLevel(c.Breaker); ok {
		ct.brkr[slot] = lv
	}
}

// recordEndpoints writes each endpoint's state at slot (sample n), adding
// endpoints while there is room, and returns how many did not fit.
// Endpoints absent from Points samples in a row are forgotten.
func (ct *clusterTrack) recordEndpoints(n, slot uint64, eps []EndpointSnap) int {
	over := 0
	for _, e := range eps {
		i := slices.IndexFunc(ct.endpoints, func(t *endpointTrack) bool { return t.addr == e.Address })
		if i < 0 {
			if len(ct.endpoints) >= MaxEndpoints {
				over++
				continue
			}
			i = len(ct.endpoints)
			ct.endpoints = append(ct.endpoints, &endpointTrack{addr: e.Address})
		}
		t := ct.endpoints[i]
		t.seen, t.states[slot] = n, stateCodes[e.State]
		if t.states[slot] == 0 {
			t.states[slot] = '?'
		}
	}
	ct.endpoints = slices.DeleteFunc(ct.endpoints, func(t *endpointTrack) bool {
		if t.seen == n {
			return false
		}
		t.states[slot] = 0
		return n-t.seen >= Points
	})
	return over
}

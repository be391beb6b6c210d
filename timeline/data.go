package timeline

// Data is the points after a given instant (GET /dashboard/data), column
// by column: T[i] is the time of every series' i-th value.
type Data struct {
	// Now is the last sample's time (unix milliseconds; 0: none yet): the
	// since of the next request.
	Now    int64 `json:"now"`
	StepMS int   `json:"step_ms"`
	// Metrics: the request series are measured (false: the gateway's
	// metrics are off, and they are all null).
	Metrics   bool      `json:"metrics"`
	T         []int64   `json:"t"`
	Routes    []Route   `json:"routes"`
	Clusters  []Cluster `json:"clusters"`
	Untracked Untracked `json:"untracked"`
}

// Route is one route's series: requests a second (offered: finished;
// admitted: not refused by the policy chain; goodput: 2xx/3xx from the
// upstream), latency quantiles in ms, retries a second, the retry
// budget's tokens, and the gateway's own answers a second by "reason
// class".
type Route struct {
	Name     string            `json:"name"`
	Cluster  string            `json:"cluster"`
	Offered  Values            `json:"offered"`
	Admitted Values            `json:"admitted"`
	Goodput  Values            `json:"goodput"`
	P50      Values            `json:"p50_ms"`
	P99      Values            `json:"p99_ms"`
	Retries  Values            `json:"retries"`
	Budget   Values            `json:"retry_budget"`
	Rejects  map[string]Values `json:"rejects"`
}

// Cluster is one cluster's guard series (admission limit, in flight,
// queue length, queue wait in ms, brownout level, breaker 0 closed, 0.5
// half-open, 1 open) and its endpoints.
type Cluster struct {
	Name        string     `json:"name"`
	Limit       Values     `json:"limit"`
	InFlight    Values     `json:"in_flight"`
	QueueLength Values     `json:"queue_length"`
	QueueWait   Values     `json:"queue_wait_ms"`
	Brownout    Values     `json:"brownout"`
	Breaker     Values     `json:"breaker"`
	Endpoints   []Endpoint `json:"endpoints"`
}

// Endpoint is one endpoint's state at the last sample ("" when it was
// absent) and its states at T, one letter each: h healthy, s slow
// starting, d draining, e ejected, u unhealthy, ? another, - absent.
type Endpoint struct {
	Address string `json:"address"`
	State   string `json:"state"`
	States  string `json:"states"`
}

var stateNames = func() map[byte]string {
	m := map[byte]string{'?': "unknown"} // a state the balancer added since
	for name, c := range stateCodes {
		m[c] = name
	}
	return m
}()

// Data returns the samples taken after since (unix milliseconds; 0 or
// less: all of them).
func (tl *Timeline) Data(since int64) Data {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	d := Data{StepMS: 1000, Metrics: tl.metrics, Untracked: tl.untracked, T: []int64{},
		Routes: []Route{}, Clusters: []Cluster{}}
	from, to := uint64(0), tl.n
	if tl.n > Points {
		from = tl.n - Points
	}
	if tl.n > 0 {
		d.Now = tl.times[(tl.n-1)%Points]
	}
	for from < to && tl.times[from%Points] <= since {
		from++
	}
	for n := from; n < to; n++ {
		d.T = append(d.T, tl.times[n%Points])
	}
	for _, rt := range tl.routes {
		r := Route{Name: rt.name, Cluster: rt.cluster, Offered: rt.offered.window(from, to),
			Admitted: rt.admitted.window(from, to), Goodput: rt.good.window(from, to),
			P50: rt.p50.window(from, to), P99: rt.p99.window(from, to),
			Retries: rt.retries.window(from, to), Budget: rt.budget.window(from, to),
			Rejects: map[string]Values{}}
		for _, t := range rt.rejects {
			r.Rejects[t.key] = t.s.window(from, to)
		}
		d.Routes = append(d.Routes, r)
	}
	for _, ct := range tl.clusters {
		d.Clusters = append(d.Clusters, ct.data(from, to, tl.n))
	}
	return d
}

func (ct *clusterTrack) data(from, to, n uint64) Cluster {
	c := Cluster{Name: ct.name, Limit: ct.limit.window(from, to), InFlight: ct.inFlight.window(from, to),
		QueueLength: ct.queueLen.window(from, to), QueueWait: ct.queueWait.window(from, to),
		Brownout: ct.brownout.window(from, to), Breaker: ct.brkr.window(from, to), Endpoints: []Endpoint{}}
	for _, t := range ct.endpoints {
		e := Endpoint{Address: t.addr}
		if n > 0 && t.seen == n-1 {
			e.State = stateNames[t.states[(n-1)%Points]]
		}
		states := make([]byte, 0, to-from)
		for i := from; i < to; i++ {
			b := t.states[i%Points]
			if b == 0 {
				b = '-'
			}
			states = append(states, b)
		}
		e.States = string(states)
		c.Endpoints = append(c.Endpoints, e)
	}
	return c
}

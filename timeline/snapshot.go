package timeline

// Snapshot is what the gateway reads once a second: counters since its
// start (they may restart from zero on a reload) and gauges now.
type Snapshot struct {
	// Metrics: the request series (offered, admitted, goodput, latency,
	// rejects) were read; false with the gateway's metrics off.
	Metrics  bool
	Routes   []RouteSnap
	Clusters []ClusterSnap
}

// RouteSnap is one route's counters.
type RouteSnap struct {
	Name, Cluster string
	// Requests finished (every answer), and those answered 2xx or 3xx by
	// the upstream (goodput).
	Requests, Good uint64
	// Refused: requests the policy chain answered itself (deadline, rate
	// limits, bulkhead, admission); the others were admitted.
	Refused uint64
	// Bounds are the latency histogram's upper bounds in seconds; Latency
	// its cumulative counts per bound, then the total (the +Inf bucket).
	Bounds  []float64
	Latency []uint64
	// Rejects are the gateway's own answers by "reason class".
	Rejects map[string]uint64
	// Retries sent; Budget the retry budget's tokens (HasBudget: it has one).
	Retries   uint64
	Budget    float64
	HasBudget bool
}

// ClusterSnap is one cluster's guard and endpoints.
type ClusterSnap struct {
	Name string
	// HasAdmission: Limit, InFlight, QueueLength and QueueWait (seconds)
	// are the admission limiter's.
	HasAdmission    bool
	Limit, InFlight int
	QueueLength     int
	QueueWait       float64
	HasBrownout     bool
	Brownout        float64 // share of requests running optional work
	Breaker         string  // "closed", "half-open", "open"; "": none
	Endpoints       []EndpointSnap
}

// EndpointSnap is one endpoint's health state: "healthy",
// "slow-starting", "draining", "ejected" or "unhealthy".
type EndpointSnap struct {
	Address, State string
}

// stateCodes are the one-letter codes of Endpoint.States.
var stateCodes = map[string]byte{
	"healthy": 'h', "slow-starting": 's', "draining": 'd', "ejected": 'e', "unhealthy": 'u',
}

// breakerLevel draws a breaker's state as a number: closed 0, half-open
// 0.5, open 1.
func breakerLevel(s string) (float32, bool) {
	switch s {
	case "closed":
		return 0, true
	case "half-open":
		return 0.5, true
	case "open":
		return 1, true
	}
	return 0, false
}

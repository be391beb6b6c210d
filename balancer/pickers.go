package balancer

import (
	"math"
	"strconv"
	"sync"
)

// SetPicker chooses an endpoint of a Set's snapshot for one request and
// returns its index in [0, s.Len()); ErrNoEndpoints when s is empty. now is
// the caller's instant in seconds, for pickers whose view decays with time
// (PeakEWMA); the others ignore it. Pick does not allocate or block, and
// takes no lock other than the picker's own (SmoothWeighted).
//
// The Loads pickers (Picker) choose over fixed or simulated sets and stay as
// they are for the simulator; wrap one in Loaded to use it on snapshots.
type SetPicker interface {
	Pick(s *Snapshot, now float64) (int, error)
}

// Compile-time guards.
var (
	_ SetPicker = Loaded{}
	_ SetPicker = (*WeightedRandom)(nil)
	_ SetPicker = (*LeastRequest)(nil)
	_ SetPicker = (*PeakEWMA)(nil)
	_ SetPicker = (*SmoothWeighted)(nil)
	_ Loads     = (*Snapshot)(nil)
)

// Loaded adapts a Loads picker to snapshots: it picks over the snapshot's
// in-flight counts (Snapshot.Load) and ignores weights and now. Use it with
// RoundRobin, Random, LeastOutstanding (the full-scan least request), P2C
// and PowerOfD; not with SmoothWRR, whose fixed weights cannot follow a
// changing set (use SmoothWeighted). Loaded is as safe for concurrent use
// as Picker.
type Loaded struct {
	Picker Picker
}

// Pick returns l.Picker's choice over s.
func (l Loaded) Pick(s *Snapshot, _ float64) (int, error) { return l.Picker.Pick(s) }

// WeightedRandom picks endpoint i with probability Weight(i) ÷
// TotalWeight(): one draw and one look-up in the alias table the snapshot
// built when it was published (Walker's alias method), O(1), or a plain
// draw when all weights are equal. Slow-starting
// endpoints thus receive their ramped share. No shared state: any number of
// balancers need no coordination, and traffic shares follow the weights at
// any load, but the short run is uneven and the picker is blind to
// busyness. The zero value uses the default Rand. Safe for concurrent use
// if Rand is (the default is).
type WeightedRandom struct {
	Rand Rand // nil: math/rand/v2's global generator
}

// Pick returns a random endpoint drawn in proportion to its weight.
func (p *WeightedRandom) Pick(s *Snapshot, _ float64) (int, error) {
	if len(s.eps) == 0 {
		return -1, ErrNoEndpoints
	}
	return s.weightedDraw(source(p.Rand)), nil
}

// LeastRequestWeight returns Envoy's dynamic weight of an endpoint with the
// given weight and active (in-flight) requests:
//
//	weight / (active + 1)^bias
//
// (Envoy, least_request.proto, active_request_bias: "the larger the active
// request bias is, the more aggressively active requests will lower the
// effective weight"). A negative active counts as 0; bias 0 returns weight.
func LeastRequestWeight(weight float64, active int, bias float64) float64 {
	a := float64(max(active, 0)) + 1
	switch bias {
	case 1:
		return weight / a
	case 0:
		return weight
	}
	return weight / math.Pow(a, bias)
}

// DefaultActiveRequestBias is LeastRequest's bias when Bias is 0 (Envoy's
// default active_request_bias).
const DefaultActiveRequestBias = 1.0

// LeastRequest is Envoy's least request with d choices, weighted as Envoy
// weights it (envoy.load_balancing_policies.least_request: choice_count
// default 2, active_request_bias default 1.0).
//
// When every eligible endpoint has the same effective weight it is the
// power of d choices over in-flight counts, exactly as P2C (d = 2: two
// distinct endpoints, the second winning only with strictly fewer requests
// in flight) or PowerOfD (d > 2: with replacement, earliest drawn among
// equals) — what Envoy does with equal weights.
//
// With unequal weights (different Endpoint weights, or slow start) Envoy
// schedules hosts by the dynamic weight weight / (active + 1)^bias
// (LeastRequestWeight). LeastRequest keeps d choices instead of Envoy's
// locked scheduler: it draws d candidates with replacement, each in
// proportion to its effective weight (as WeightedRandom), and the candidate
// with the highest dynamic weight wins, the earliest drawn among equals.
// Under load this equalises (active + 1)^bias / weight — with bias 1,
// in-flight counts in proportion to the weights. When all endpoints are idle
// the heaviest candidate wins, so heavy endpoints get more than their weight
// share of a light load (two endpoints of weights 2 and 1: 8/9 instead of
// 2/3); use WeightedRandom when shares must follow weights at every load.
//
// O(d): d draws and d reads of in-flight counters, no scan.
// The zero value is d = 2, bias 1, the default Rand. Safe for concurrent
// use if Rand is (the default is).
type LeastRequest struct {
	// Choices is d, the candidates per pick, 1 to MaxChoices; 0 means 2.
	// d = 1 is WeightedRandom.
	Choices int
	// Bias is Envoy's active_request_bias, finite and > 0; 0 means
	// DefaultActiveRequestBias. (Envoy's bias 0 — weights alone — is
	// WeightedRandom here.) It matters only with unequal weights.
	Bias float64
	Rand Rand // nil: math/rand/v2's global generator
}

// Validate reports Choices or Bias out of range as a *ConfigError.
func (p *LeastRequest) Validate() error {
	if p.Choices < 0 || p.Choices > MaxChoices {
		return &ConfigError{Field: "LeastRequest.Choices", Reason: "must be between 1 and " + strconv.Itoa(MaxChoices) + " (0 means 2), got " + strconv.Itoa(p.Choices)}
	}
	if !(p.Bias >= 0) || math.IsInf(p.Bias, 1) {
		return &ConfigError{Field: "LeastRequest.Bias", Reason: "must be finite and > 0 (0 means 1), got " + ftoa(p.Bias)}
	}
	return nil
}

// Pick returns the best of d candidates. It returns Validate's error when a
// field is out of range.
func (p *LeastRequest) Pick(s *Snapshot, _ float64) (int, error) {
	d, bias := p.Choices, p.Bias
	if d == 0 {
		d = 2
	}
	if bias == 0 {
		bias = DefaultActiveRequestBias
	}
	if d < 0 || d > MaxChoices || !(bias > 0) || math.IsInf(bias, 1) {
		return -1, p.Validate()
	}
	n := len(s.eps)
	switch {
	case n == 0:
		return -1, ErrNoEndpoints
	case n == 1:
		return 0, nil
	}
	r := source(p.Rand)
	if s.equal {
		if d == 2 {
			a := draw(r, n)
			b := draw(r, n-1)
			if b >= a {
				b++
			}
			if s.eps[b].inflight.Load() < s.eps[a].inflight.Load() {
				return b, nil
			}
			return a, nil
		}
		best := draw(r, n)
		bestLoad := s.eps[best].inflight.Load()
		for k := 1; k < d; k++ {
			c := draw(r, n)
			if l := s.eps[c].inflight.Load(); l < bestLoad {
				best, bestLoad = c, l
			}
		}
		return best, nil
	}
	best := s.weightedDraw(r)
	if d == 1 {
		return best, nil
	}
	bestKey := LeastRequestWeight(s.weight[best], s.eps[best].InFlight(), bias)
	for k := 1; k < d; k++ {
		c := s.weightedDraw(r)
		if key := LeastRequestWeight(s.weight[c], s.eps[c].InFlight(), bias); key > bestKey {
			best, bestKey = c, key
		}
	}
	return best, nil
}

// PeakEWMA is the peak-EWMA balancer of Finagle and Linkerd: each endpoint's
// cost is its latency estimate (EndpointState.Latency at now: a peak-
// sensitive EWMA that jumps up at once on a slow response and decays with
// time constant SetConfig.LatencyDecay) times its requests in flight plus
// one, divided by its effective weight (so slow start and weights count;
// equal weights change nothing). Two distinct endpoints are drawn as P2C
// draws them, and the second wins if its cost is strictly lower, or equal
// with strictly fewer requests in flight.
//
// Latency-aware where least request is only count-aware: an endpoint that
// answers slowly loses traffic after one slow response, before requests
// pile up on it. An endpoint without samples costs 0 and is tried first
// (the Set seeds endpoints joining a running set with the mean estimate);
// one that stopped receiving traffic decays toward 0 and is tried again.
// Like any latency signal it rewards fast failures, so Done lets failures
// only raise the estimate. The zero value uses the default Rand. Safe for
// concurrent use if Rand is (the default is).
type PeakEWMA struct {
	Rand Rand // nil: math/rand/v2's global generator
}

// Pick returns the cheaper of two random endpoints.
func (p *PeakEWMA) Pick(s *Snapshot, now float64) (int, error) {
	n := len(s.eps)
	switch {
	case n == 0:
		return -1, ErrNoEndpoints
	case n == 1:
		return 0, nil
	}
	r := source(p.Rand)
	a := draw(r, n)
	b := draw(r, n-1)
	if b >= a {
		b++
	}
	if s.cheaper(b, a, now) {
		return b, nil
	}
	return a, nil
}

// cheaper reports whether endpoint b's peak-EWMA cost at now is below a's,
// or equal with fewer requests in flight. The costs decay by exp(−Δt/τ)
// from each estimate's last sample; only the ratio of the two decays
// matters, so one exponential serves both.
func (s *Snapshot) cheaper(b, a int, now float64) bool {
	ea, eb := s.eps[a], s.eps[b]
	la, lb := ea.inflight.Load(), eb.inflight.Load()
	va, ta := unpackEWMA(ea.ewma.Load())
	vb, tb := unpackEWMA(eb.ewma.Load())
	ca := va * float64(max(la, 0)+1) / s.weight[a]
	cb := vb * float64(max(lb, 0)+1) / s.weight[b]
	if ca > 0 && cb > 0 {
		t := msOf(now)
		cb *= math.Exp((elapsed(t, ta) - elapsed(t, tb)) / ea.tau)
	}
	return cb < ca || (cb == ca && lb < la)
}

// SmoothWeighted is Nginx's smooth weighted round robin (see SmoothWRR) over
// a Set's snapshots, with their effective weights: slow-starting endpoints
// get their ramped share, interleaved. Current values carry over from one
// snapshot to the next while the membership stays the same (same endpoints,
// order and base weights, as for Snapshot.Table), so slow-start steps keep
// the rotation smooth; they restart from 0 when it changes. Each pick takes
// the picker's mutex for one pass over the weights, O(n); the current values
// are float64 (effective weights are fractional while ramping) and sum to 0
// up to rounding. The zero value is ready to use; must not be copied after
// use. Safe for concurrent use.
type SmoothWeighted struct {
	mu   sync.Mutex
	snap *Snapshot // guarded by mu: the snapshot cur belongs to
	cur  []float64 // guarded by mu
}

// Pick returns the next endpoint of the smooth weighted rotation. It
// allocates only when the membership grows beyond every earlier one.
func (p *SmoothWeighted) Pick(s *Snapshot, _ float64) (int, error) {
	n := len(s.eps)
	if n == 0 {
		return -1, ErrNoEndpoints
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.snap != s {
		if p.snap == nil || p.snap.tables != s.tables || len(p.cur) != n {
			if cap(p.cur) < n {
				p.cur = make([]float64, n)
			}
			p.cur = p.cur[:n]
			clear(p.cur)
		}
		p.snap = s
	}
	cur := p.cur
	best := 0
	for i, w := range s.weight {
		cur[i] += w
		if cur[i] > cur[best] {
			best = i
		}
	}
	cur[best] -= s.total
	return best, nil
}

package balancer

import (
	"strconv"
	"sync"
	"sync/atomic"
)

// RoundRobin picks endpoint k mod n for its k-th pick (k from 0), where n is
// the size of the set passed to that pick; when the set changes size the
// rotation continues from the same counter. The zero value is ready to use.
// Safe for concurrent use (one atomic counter); must not be copied after use.
type RoundRobin struct {
	next atomic.Uint64 // picks made so far
}

// Pick returns the next endpoint in rotation.
func (p *RoundRobin) Pick(set Loads) (int, error) {
	n := set.Len()
	if n <= 0 {
		return -1, ErrNoEndpoints
	}
	return int((p.next.Add(1) - 1) % uint64(n)), nil
}

// MaxTotalWeight bounds the sum of SmoothWRR weights. With total weight W and
// n endpoints every current value stays in (−W, n·W), so int64 arithmetic
// cannot overflow for any set that fits in memory.
const MaxTotalWeight = 1 << 31

// SmoothWRR is Nginx's smooth weighted round robin over a fixed list of
// weights, one per endpoint. On every pick each endpoint's current value
// grows by its weight, the highest current value wins (the earliest endpoint
// on ties), and the winner's current value drops by the total weight. Over
// any total-weight consecutive picks each endpoint is chosen exactly weight
// times, spread out rather than in runs. An endpoint of weight 0 is never
// picked (a way to drain it while keeping the indices); at least one weight
// must be positive.
//
// Safe for concurrent use: the current values are guarded by a mutex held for
// one pass over the weights (Nginx keeps them per worker process instead; see
// the package doc for sharding).
type SmoothWRR struct {
	weights []int // immutable
	total   int64 // immutable: sum of weights

	mu      sync.Mutex
	current []int64 // guarded by mu
}

// NewSmoothWRR returns a picker for len(weights) endpoints with the given
// weights, all current values 0. The weights are copied. It returns a
// *ConfigError when the list is empty, a weight is negative, all weights are
// zero, or their sum exceeds MaxTotalWeight.
func NewSmoothWRR(weights []int) (*SmoothWRR, error) {
	if len(weights) == 0 {
		return nil, &ConfigError{Field: "weights", Reason: "must list at least one endpoint"}
	}
	var total int64
	for i, w := range weights {
		if w < 0 {
			return nil, &ConfigError{Field: "weights[" + strconv.Itoa(i) + "]", Reason: "must not be negative, got " + strconv.Itoa(w)}
		}
		if total += int64(w); total > MaxTotalWeight {
			return nil, &ConfigError{Field: "weights", Reason: "sum must be at most " + strconv.Itoa(MaxTotalWeight)}
		}
	}
	if total == 0 {
		return nil, &ConfigError{Field: "weights", Reason: "at least one weight must be positive"}
	}
	return &SmoothWRR{
		weights: append([]int(nil), weights...),
		total:   total,
		current: make([]int64, len(weights)),
	}, nil
}

// Pick returns the next endpoint in the smooth weighted rotation. The set
// supplies only its size, which must equal the number of weights (otherwise
// ErrSetMismatch); pass Size(p.Len()) when there is no other set at hand.
func (p *SmoothWRR) Pick(set Loads) (int, error) {
	if set.Len() != len(p.weights) {
		return -1, ErrSetMismatch
	}
	p.mu.Lock()
	best := p.pickLocked()
	p.mu.Unlock()
	return best, nil
}

func (p *SmoothWRR) pickLocked() int {
	cur := p.current
	best := 0
	for i, w := range p.weights {
		cur[i] += int64(w)
		if cur[i] > cur[best] {
			best = i
		}
	}
	cur[best] -= p.total
	return best
}

// Len returns the number of endpoints.
func (p *SmoothWRR) Len() int { return len(p.weights) }

// Total returns the sum of the weights.
func (p *SmoothWRR) Total() int64 { return p.total }

// Current copies the current values, one per endpoint, into dst[:0] and
// returns the result; it allocates only when dst is too small. The values
// sum to 0 between picks. Before the last pick's winner i paid back the
// total, its value was Current()[i] + Total().
func (p *SmoothWRR) Current(dst []int64) []int64 {
	p.mu.Lock()
	dst = append(dst[:0], p.current...)
	p.mu.Unlock()
	return dst
}

package retry

import (
	"fmt"
	"math"
	"sync"

	"github.com/spillwayhq/spillway/ratelimit"
)

// Defaults used for zero BudgetConfig fields: the seed's budget, "retries at
// most 10% of new requests" with a reserve of 10 tokens.
const (
	DefaultBudgetMax   = 10  // tokens
	DefaultBudgetRatio = 0.1 // tokens per new request
)

// BudgetConfig configures a Budget. The zero value is the seed's budget.
type BudgetConfig struct {
	// Max is the bucket's capacity in tokens; the bucket starts full. It
	// bounds the burst of retries a client may send after a quiet period.
	// Zero means DefaultBudgetMax; negative, NaN or infinite is invalid.
	// Below 1 the proportional part can never pay for a retry.
	Max float64
	// Ratio is the number of tokens each new request deposits: the
	// long-run ceiling of retries per new request. Zero means
	// DefaultBudgetRatio; negative, NaN or infinite is invalid.
	Ratio float64
	// MinPerSecond is an optional floor, in retries per second, for clients
	// with so little traffic that Ratio alone would forbid every retry. It
	// is a ratelimit.TokenBucket of rate MinPerSecond and burst
	// max(1, ⌈MinPerSecond⌉) tokens (full at the start), driven by the times
	// passed to TryRetry; a retry that the proportional bucket cannot pay is
	// paid from it. Zero (the default) disables the floor; negative, NaN or
	// infinite is invalid.
	MinPerSecond float64
}

// Validate reports the first invalid field, wrapped around ErrConfig.
func (c BudgetConfig) Validate() error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"Max", c.Max}, {"Ratio", c.Ratio}, {"MinPerSecond", c.MinPerSecond}} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v < 0 {
			return fmt.Errorf("%w: BudgetConfig.%s = %v, want a finite number >= 0", ErrConfig, f.name, f.v)
		}
	}
	return nil
}

// Budget is a retry budget: a token bucket that lets a client's retries
// grow with its new requests but not with its failures. Call RecordRequest
// once for every new request (first attempts only) and TryRetry before every
// retry; retry only if TryRetry returned true.
//
// Over any run, the retries TryRetry allows from the proportional bucket are
// at most Max + Ratio × (new requests recorded), plus, with a floor, at most
// max(1, ⌈MinPerSecond⌉) + MinPerSecond × (seconds covered by the calls).
//
// A Budget is safe for concurrent use by many goroutines: a mutex guards the
// few float64 operations of each call (no allocation, no logging); share one
// Budget among all the calls a client makes to one dependency.
type Budget struct {
	// immutable after NewBudget
	max, ratio float64
	floor      *ratelimit.TokenBucket // nil: no floor

	mu         sync.Mutex
	tokens     float64                    // guarded by mu
	floorState ratelimit.TokenBucketState // guarded by mu
}

// NewBudget returns a full budget, or an error naming the bad field.
func NewBudget(c BudgetConfig) (*Budget, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.Max == 0 {
		c.Max = DefaultBudgetMax
	}
	if c.Ratio == 0 {
		c.Ratio = DefaultBudgetRatio
	}
	b := &Budget{max: c.Max, ratio: c.Ratio, tokens: c.Max}
	if c.MinPerSecond > 0 {
		burst := math.Max(1, math.Ceil(c.MinPerSecond))
		if burst > ratelimit.MaxBurst {
			return nil, fmt.Errorf("%w: BudgetConfig.MinPerSecond = %v, want at most %d", ErrConfig, c.MinPerSecond, ratelimit.MaxBurst)
		}
		floor, err := ratelimit.NewTokenBucket(ratelimit.Limit{Rate: c.MinPerSecond, Burst: int(burst)})
		if err != nil {
			return nil, fmt.Errorf("%w: BudgetConfig.MinPerSecond: %v", ErrConfig, err)
		}
		b.floor = floor
	}
	return b, nil
}

// RecordRequest deposits Ratio tokens for a new request at now (seconds;
// read only by a future time-based policy): tokens = min(Max, tokens + Ratio).
func (b *Budget) RecordRequest(now float64) {
	b.mu.Lock()
	// The float operations and their order are part of the contract: the
	// simulator reproduces the seed's experiment bit for bit with them.
	b.tokens = math.Min(b.max, b.tokens+b.ratio)
	b.mu.Unlock()
}

// TryRetry reports whether a retry at now (seconds) is within budget, and if
// so spends one token: from the proportional bucket when it holds at least
// one token (tokens >= 1, then tokens -= 1), else from the floor bucket.
func (b *Budget) TryRetry(now float64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tokens >= 1 {
		b.tokens -= 1
		return true
	}
	return b.floor != nil && b.floor.Decide(&b.floorState, now, 1).Allowed
}

// Tokens returns the proportional bucket's current tokens, for metrics.
func (b *Budget) Tokens() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.tokens
}

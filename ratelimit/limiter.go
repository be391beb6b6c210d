package ratelimit

import "sync"

// Limiter enforces one algorithm for one key, for callers that share it
// between goroutines: a mutex around the key's state, like
// golang.org/x/time/rate.Limiter but with time as a parameter. For many keys
// use a keyed store of states instead (one lock per shard, not per key).
//
//	g, err := ratelimit.NewGCRA(ratelimit.Limit{Rate: 100, Burst: 20})
//	...
//	lim := ratelimit.NewLimiter(g) // *Limiter[GCRAState]
//	if d := lim.AllowN(clk.Now(), 1); !d.Allowed { /* 429, Retry-After d.RetryAfter */ }
//
// A Limiter must not be copied after first use.
type Limiter[S any] struct {
	alg Decider[S] // immutable

	mu    sync.Mutex
	state S // guarded by mu
}

// NewLimiter returns a Limiter for alg (one of the constructors' results)
// whose key has never been seen. alg must not be nil.
func NewLimiter[S any](alg Decider[S]) *Limiter[S] {
	return &Limiter[S]{alg: alg}
}

// AllowN decides a request of cost units at now (seconds); see Decision.
func (l *Limiter[S]) AllowN(now float64, cost int) Decision {
	l.mu.Lock()
	d := l.alg.Decide(&l.state, now, cost)
	l.mu.Unlock()
	return d
}

// Allow is AllowN(now, 1).
func (l *Limiter[S]) Allow(now float64) Decision { return l.AllowN(now, 1) }

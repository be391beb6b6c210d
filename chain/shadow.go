package chain

import (
	"sync"
	"sync/atomic"

	"github.com/spillwayhq/spillway/limit"
	"github.com/spillwayhq/spillway/shed"
)

// shadowCounts are a route's shadow would-refusals: counted on the
// request path with atomics only, and what the last ShadowReport saw of
// them (the reporter's alone, under mu).
type shadowCounts struct {
	admit   [shed.MaxClasses][limit.NumReasons]atomic.Uint64
	breaker [shed.MaxClasses]atomic.Uint64

	mu          sync.Mutex
	seenAdmit   [shed.MaxClasses][limit.NumReasons]uint64
	seenBreaker [shed.MaxClasses]uint64
}

// ShadowCount is how many shadow would-refusals of one kind a route
// counted since the last report: admission's of one class and reason, or
// (Breaker) an open breaker's attempts of one class.
type ShadowCount struct {
	Breaker bool
	Class   shed.Class
	Reason  limit.Reason // admission's; unset for the breaker
	N       uint64
}

// ShadowReport calls fn for each kind of shadow would-refusal the route
// counted since the last call, and none else: admission's (by class,
// then reason), then the breaker's (by class). It locks and fn runs
// under the lock: it is for a periodic reporter, not the request path.
func (c *Chain) ShadowReport(fn func(ShadowCount)) {
	s := &c.stats.shadow
	s.mu.Lock()
	defer s.mu.Unlock()
	for cl := range shed.MaxClasses {
		for r := range limit.NumReasons {
			if n := s.admit[cl][r].Load(); n != s.seenAdmit[cl][r] {
				fn(ShadowCount{Class: shed.Class(cl), Reason: limit.Reason(r), N: n - s.seenAdmit[cl][r]})
				s.seenAdmit[cl][r] = n
			}
		}
	}
	for cl := range shed.MaxClasses {
		if n := s.breaker[cl].Load(); n != s.seenBreaker[cl] {
			fn(ShadowCount{Breaker: true, Class: shed.Class(cl), N: n - s.seenBreaker[cl]})
			s.seenBreaker[cl] = n
		}
	}
}

// classIndex is class c's index in arrays of shed.MaxClasses.
func classIndex(c shed.Class) int { return min(int(c), shed.MaxClasses-1) }

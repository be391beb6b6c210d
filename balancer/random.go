package balancer

import (
	"strconv"
	"sync/atomic"
)

// Random picks endpoint floor(u·n) for u drawn from Rand. The zero value uses
// the default Rand. Safe for concurrent use if Rand is (the default is).
type Random struct {
	Rand Rand // nil: math/rand/v2's global generator
}

// Pick returns a uniformly random endpoint.
func (p *Random) Pick(set Loads) (int, error) {
	n := set.Len()
	if n <= 0 {
		return -1, ErrNoEndpoints
	}
	return draw(source(p.Rand), n), nil
}

// LeastOutstanding scans the whole set for the least-loaded endpoint. Its
// k-th pick (k from 0) starts at endpoint k mod n and visits the others in
// order (k+1) mod n, (k+2) mod n, …; an endpoint wins only with a strictly
// smaller load, so ties go to the first one met, and rotating the start
// spreads ties over the set. O(n) loads read per pick. The zero value is ready
// to use. Safe for concurrent use (one atomic counter); must not be copied
// after use.
type LeastOutstanding struct {
	next atomic.Uint64 // picks made so far
}

// Pick returns an endpoint of minimal load.
func (p *LeastOutstanding) Pick(set Loads) (int, error) {
	n := set.Len()
	if n <= 0 {
		return -1, ErrNoEndpoints
	}
	start := int((p.next.Add(1) - 1) % uint64(n))
	best, bestLoad := start, set.Load(start)
	s := start
	for k := 1; k < n; k++ {
		if s++; s == n {
			s = 0
		}
		if l := set.Load(s); l < bestLoad {
			best, bestLoad = s, l
		}
	}
	return best, nil
}

// P2C is the power of two random choices: it draws two distinct endpoints,
// a = floor(u₁·n) and b = floor(u₂·(n−1)) with b incremented if b ≥ a, and
// picks b if its load is strictly smaller than a's, else a. With one endpoint
// it returns it without drawing. The zero value uses the default Rand. Safe
// for concurrent use if Rand is (the default is).
type P2C struct {
	Rand Rand // nil: math/rand/v2's global generator
}

// Pick returns the less loaded of two random endpoints.
func (p *P2C) Pick(set Loads) (int, error) {
	n := set.Len()
	switch {
	case n <= 0:
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
	if set.Load(b) < set.Load(a) {
		return b, nil
	}
	return a, nil
}

// MaxChoices bounds PowerOfD.D: beyond a few choices the maximum load hardly
// improves (it falls as 1/ln d) while every choice costs a draw and a load read.
const MaxChoices = 64

// PowerOfD is the power of d choices with replacement: best = floor(u·n),
// then D−1 more candidates c = floor(u·n), each replacing best if its load is
// strictly smaller. D = 1 is Random; D = 2 differs from P2C in that the two
// draws may coincide. The zero value means D = 2 with the default Rand. Safe
// for concurrent use if Rand is (the default is).
type PowerOfD struct {
	D    int  // choices per pick, 1 to MaxChoices; 0 means 2
	Rand Rand // nil: math/rand/v2's global generator
}

// Validate reports a D outside [0, MaxChoices] as a *ConfigError.
func (p *PowerOfD) Validate() error {
	if p.D < 0 || p.D > MaxChoices {
		return &ConfigError{Field: "PowerOfD.D", Reason: "must be between 1 and " + strconv.Itoa(MaxChoices) + " (0 means 2), got " + strconv.Itoa(p.D)}
	}
	return nil
}

// Pick returns the least loaded of D random endpoints, the earliest drawn
// among equals. It returns Validate's error when D is out of range.
func (p *PowerOfD) Pick(set Loads) (int, error) {
	d := p.D
	switch {
	case d == 0:
		d = 2
	case d < 0 || d > MaxChoices:
		return -1, p.Validate()
	}
	n := set.Len()
	if n <= 0 {
		return -1, ErrNoEndpoints
	}
	r := source(p.Rand)
	best := draw(r, n)
	if d == 1 {
		return best, nil
	}
	bestLoad := set.Load(best)
	for k := 1; k < d; k++ {
		c := draw(r, n)
		if l := set.Load(c); l < bestLoad {
			best, bestLoad = c, l
		}
	}
	return best, nil
}

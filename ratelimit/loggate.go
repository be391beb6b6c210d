package ratelimit

import "sync/atomic"

// LogGate lets at most a given number of log lines per second through (a
// GCRA limiter with a burst of that many lines, at least 1) and counts the
// lines it holds back, so that the next line let through can say how many
// were dropped. Package httplimit gates each rule's lines with one; package
// ratelimit/redisstore gates go-redis's own. Safe for concurrent use; the
// zero value lets nothing through.
type LogGate struct {
	lim        *Limiter[GCRAState] // nil: nothing passes
	suppressed atomic.Uint64
}

// NewLogGate returns a gate of perSecond lines per second; zero, negative
// or NaN means none.
func NewLogGate(perSecond float64) *LogGate {
	g := &LogGate{}
	if !(perSecond > 0) {
		return g
	}
	gcra, err := NewGCRA(Limit{Rate: perSecond, Burst: int(max(1, min(perSecond, MaxBurst)))})
	if err != nil {
		return g
	}
	g.lim = NewLimiter[GCRAState](gcra)
	return g
}

// Allow reports whether a line may be logged at now (seconds), and how
// many lines were held back since the last one let through.
func (g *LogGate) Allow(now float64) (ok bool, suppressed uint64) {
	if g.lim == nil {
		return false, 0
	}
	if !g.lim.Allow(now).Allowed {
		g.suppressed.Add(1)
		return false, 0
	}
	return true, g.suppressed.Swap(0)
}

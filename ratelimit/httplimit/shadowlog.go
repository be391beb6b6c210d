package httplimit

import (
	"sync/atomic"

	"github.com/spillwayhq/spillway/ratelimit"
)

// logGate lets at most Rate log lines per second through for one rule (a
// GCRA limiter with a burst of Rate lines, at least 1) and counts the
// lines it holds back, so the next line can say how many were dropped.
type logGate struct {
	lim        *ratelimit.Limiter[ratelimit.GCRAState] // nil: logging off
	suppressed atomic.Uint64
}

func newLogGate(perSecond float64) *logGate {
	g := &logGate{}
	if perSecond <= 0 {
		return g
	}
	gcra, err := ratelimit.NewGCRA(ratelimit.Limit{Rate: perSecond, Burst: max(1, int(perSecond))})
	if err != nil {
		return g
	}
	g.lim = ratelimit.NewLimiter[ratelimit.GCRAState](gcra)
	return g
}

// allow reports whether a line may be logged at now, and how many lines
// were suppressed since the last one logged.
func (g *logGate) allow(now float64) (ok bool, suppressed uint64) {
	if g.lim == nil {
		return false, 0
	}
	if !g.lim.Allow(now).Allowed {
		g.suppressed.Add(1)
		return false, 0
	}
	return true, g.suppressed.Swap(0)
}

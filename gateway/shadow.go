package gateway

import (
	"context"
	"log/slog"
	"time"

	"github.com/spillwayhq/spillway/chain"
)

// shadowLogEvery is how often the shadow would-refusals are logged: at
// most one line per route and kind (admission's class and reason, the
// breaker's class) each period, with the count since the last.
const shadowLogEvery = time.Second

// runShadowLog logs the routes' shadow would-refusals every
// shadowLogEvery until ctx ends. The request path only counts them (the
// chains' atomic counters); this reads and diffs the counts.
func (g *Gateway) runShadowLog(ctx context.Context) {
	tick := time.NewTicker(shadowLogEvery)
	defer tick.Stop()
	var last *generation
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			last = g.logShadow(last)
		}
	}
}

// logShadow logs what the current generation's routes counted since
// their last lines, and first what prev (the generation of the last
// call, when replaced since) counted after its last; it returns the
// current generation.
func (g *Gateway) logShadow(prev *generation) *generation {
	gen := g.cur.Load()
	if prev != nil && prev != gen {
		g.logShadowOf(prev)
	}
	if gen != nil {
		g.logShadowOf(gen)
	}
	return gen
}

// logShadowOf logs gen's routes' shadow would-refusals since the last
// report, one line per route and kind.
func (g *Gateway) logShadowOf(gen *generation) {
	if gen.pol == nil {
		return
	}
	for i := range gen.cfg.Routes {
		r := &gen.cfg.Routes[i]
		cc, ok := gen.pol.chains[r.Name]
		if !ok || cc.ch.Guard() == nil {
			continue
		}
		cc.ch.ShadowReport(func(s chain.ShadowCount) {
			attrs := []slog.Attr{slog.String("route", r.Name), slog.String("cluster", r.Cluster),
				slog.String("class", s.Class.String())}
			msg := "breaker shadow: would have refused"
			if !s.Breaker {
				msg = "admission shadow: would have refused"
				attrs = append(attrs, slog.String("reason", s.Reason.String()))
			}
			attrs = append(attrs, slog.Uint64("count", s.N))
			g.log.LogAttrs(context.Background(), slog.LevelInfo, msg, attrs...)
		})
	}
}

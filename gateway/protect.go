package gateway

import (
	"log/slog"

	"github.com/spillwayhq/spillway/clock"
	"github.com/spillwayhq/spillway/config"
	"github.com/spillwayhq/spillway/overload"
)

// overloadConfig maps the file's overload section onto the guard's.
func overloadConfig(cfg *config.Config, clk clock.Clock, log *slog.Logger) overload.Config {
	o := cfg.Overload
	return overload.Config{
		MaxConns: o.MaxConnections, HandshakeRate: o.HandshakeRate,
		HeapSoft: uint64(o.HeapSoft), HeapHard: uint64(o.HeapHard),
		GoroutinesSoft: o.GoroutinesSoft, GoroutinesHard: o.GoroutinesHard,
		Interval: o.Interval.D(), Clock: clk, Logger: log,
	}
}

// keepAlive is the guard's hook: keep-alive off (or back on) on every
// HTTP engine. It runs on the guard's sampler goroutine, which must not
// wait for g.mu (a reload holding it may be calling the guard): the
// engines are set from a goroutine that applies the latest value.
func (g *Gateway) keepAlive(on bool) {
	g.keepOn.Store(on)
	g.wg.Add(1) // the sampler runs on g.wg: the count is not zero
	go func() {
		defer g.wg.Done()
		g.mu.Lock()
		defer g.mu.Unlock()
		on := g.keepOn.Load()
		for _, s := range g.socks {
			if s.http != nil {
				s.http.SetKeepAlive(on)
			}
		}
	}()
}

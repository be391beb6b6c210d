package balancerhttp

import (
	"context"

	"github.com/spillwayhq/spillway/balancer"
	"github.com/spillwayhq/spillway/clock"
	"github.com/spillwayhq/spillway/discovery"
	"github.com/spillwayhq/spillway/health"
)

// HealthCallback returns a function to pass as health.CheckerOptions.OnChange
// that applies a Checker's verdicts to set: Set.SetHealthy(clk.Now(), addr,
// healthy) on every change of a target's state (and once per target added,
// with its initial state). Addresses not in set are ignored. clk nil means
// clock.NewReal(), made now; pass the clock of the Transport reading set, so
// that both speak of one timeline.
func HealthCallback(set *balancer.Set, clk clock.Clock) func(addr string, healthy bool, reason string) {
	if clk == nil {
		clk = clock.NewReal()
	}
	return func(addr string, healthy bool, _ string) {
		set.SetHealthy(clk.Now(), addr, healthy)
	}
}

// Follow runs src until ctx ends and applies every endpoint list it sends:
// set.Update(clk.Now(), eps), then d.SetHosts(addrs) when d is not nil, then
// c.SetTargets(addrs) when c is not nil (in that order, so that the
// Checker's first verdicts — reason "added", delivered to set through
// HealthCallback — find the endpoints in set). It neither starts nor stops
// c. It returns what src.Run returns: ctx.Err() once ctx ends, or a
// configuration error at once (and a *balancer.ConfigError when set or src
// is nil). clk nil means clock.NewReal(), made now; pass the clock of
// the Transport reading set.
//
// Follow blocks; run it on a goroutine of its own. Its memory per list is
// O(endpoints) (the address slice handed to d and c).
func Follow(ctx context.Context, set *balancer.Set, src discovery.Source, c *health.Checker, d *health.Detector, clk clock.Clock) error {
	if set == nil {
		return &balancer.ConfigError{Field: "balancerhttp.Follow set", Reason: "must not be nil"}
	}
	if src == nil {
		return &balancer.ConfigError{Field: "balancerhttp.Follow src", Reason: "must not be nil"}
	}
	if clk == nil {
		clk = clock.NewReal()
	}
	return src.Run(ctx, func(eps []balancer.Endpoint) {
		set.Update(clk.Now(), eps)
		if c == nil && d == nil {
			return
		}
		addrs := make([]string, len(eps))
		for i := range eps {
			addrs[i] = eps[i].Addr
		}
		if d != nil {
			d.SetHosts(addrs)
		}
		if c != nil {
			c.SetTargets(addrs)
		}
	})
}

package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/spillwayhq/spillway/config"
	"github.com/spillwayhq/spillway/ratelimit"
	"github.com/spillwayhq/spillway/ratelimit/httplimit"
	"github.com/spillwayhq/spillway/ratelimit/redisstore"
	"github.com/spillwayhq/spillway/ratelimit/rules"
)

// routeLimits are the routes' rate limiters over one store (memory, or
// one Redis deployment): one httplimit.Limiter per route with rules, kept
// across reloads by route name while the store's definition is the same,
// its rules updated in place (an unchanged rule keeps its counts).
type routeLimits struct {
	key    string // the top-level ratelimit section's definition
	client redis.UniversalClient
	stores *redisstore.Stores
	by     map[string]*httplimit.Limiter // by route name
	once   sync.Once                     // close
}

// of returns route name's limiter, nil when it has no rules.
func (l *routeLimits) of(name string) *httplimit.Limiter {
	if l == nil {
		return nil
	}
	return l.by[name]
}

// limitsFor builds or updates the limiters of cfg's routes. With the same
// store definition prev's limiters are updated and reused (prev itself is
// returned, grown or shrunk); otherwise a new set is built, and prev is
// closed once the generation using it retires (retireLimits).
func (g *Gateway) limitsFor(cfg *config.Config, prev *routeLimits) (*routeLimits, error) {
	key := fingerprint(cfg.RateLimit)
	if prev != nil && prev.key == key {
		return prev, g.updateLimits(cfg, prev)
	}
	out := &routeLimits{key: key, by: map[string]*httplimit.Limiter{}}
	if opts := cfg.RateLimit.RedisOptions(); opts != nil {
		out.client = redis.NewUniversalClient(opts)
		st, err := redisstore.NewStores(out.client, cfg.RateLimit.StoresConfig())
		if err != nil {
			_ = out.client.Close()
			return nil, fmt.Errorf("ratelimit: %w", err)
		}
		out.stores = st
		g.warm(cfg, st)
	}
	if err := g.updateLimits(cfg, out); err != nil {
		out.close()
		return nil, err
	}
	return out, nil
}

// warm readies Redis for the first decisions (the script loaded, a
// connection per worker), waiting at most the dial timeout: without it the
// first decisions of a fresh gateway on a loaded machine can pass the
// store timeout and open the store breaker while Redis is healthy. A Redis
// that is not ready is logged; the rules' fail modes then decide until it
// answers.
func (g *Gateway) warm(cfg *config.Config, st *redisstore.Stores) {
	ctx, cancel := context.WithTimeout(context.Background(), cfg.RateLimit.Redis.DialTimeout.D())
	defer cancel()
	if err := st.Warm(ctx); err != nil {
		g.log.Warn("ratelimit: Redis not ready; the rules' fail modes decide until it answers", slog.String("error", err.Error()))
	}
}

// updateLimits gives every route with rules its limiter in l (new, or
// updated), and closes those of routes that no longer have rules.
func (g *Gateway) updateLimits(cfg *config.Config, l *routeLimits) error {
	seen := map[string]bool{}
	for i := range cfg.Routes {
		r := &cfg.Routes[i]
		rl := r.Policies.RateLimit
		if rl == nil {
			continue
		}
		seen[r.Name] = true
		set := rl.RuleSet()
		if lim := l.by[r.Name]; lim != nil {
			if err := lim.Update(set); err != nil {
				return fmt.Errorf("route %q: ratelimit: %w", r.Name, err)
			}
			continue
		}
		lim, err := httplimit.New(set, g.limiterConfig(cfg, l))
		if err != nil {
			return fmt.Errorf("route %q: ratelimit: %w", r.Name, err)
		}
		l.by[r.Name] = lim
	}
	for name, lim := range l.by {
		if !seen[name] {
			_ = lim.Close()
			delete(l.by, name)
		}
	}
	return nil
}

// limiterConfig is every route limiter's configuration.
func (g *Gateway) limiterConfig(cfg *config.Config, l *routeLimits) httplimit.Config {
	rc := &cfg.RateLimit
	hc := httplimit.Config{
		Clock: g.clk, HotKeys: rc.HotKeysConfig(), Jitter: rc.RetryAfterJitter.D().Seconds(),
		Logger: g.log.With(slog.String("policy", "ratelimit")),
	}
	if l.stores != nil {
		hc.Store = l.stores.ForRule
	} else {
		mc := rc.MemoryConfig()
		hc.Store = func(r rules.Rule) (ratelimit.Keyed, error) { return ratelimit.NewMemory(r.Spec, mc) }
	}
	return hc
}

// close closes the limiters, the Redis stores and the client.
func (l *routeLimits) close() {
	if l == nil {
		return
	}
	l.once.Do(func() {
		for _, lim := range l.by {
			_ = lim.Close()
		}
		if l.stores != nil {
			_ = l.stores.Close()
		}
		if l.client != nil {
			_ = l.client.Close()
		}
	})
}

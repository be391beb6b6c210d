package config

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/spillwayhq/spillway/breaker"
	"github.com/spillwayhq/spillway/brownout"
	"github.com/spillwayhq/spillway/limit"
	"github.com/spillwayhq/spillway/ratelimit"
	"github.com/spillwayhq/spillway/ratelimit/redisstore"
	"github.com/spillwayhq/spillway/ratelimit/rules"
)

// policyChain checks the policy sections: the rate-limit store, each
// cluster's admission and breaker, each route's policies.
func (v *validator) policyChain(clusters map[string]int) {
	c := v.c
	v.rateLimit(&c.RateLimit)
	for i := range c.Clusters {
		cl := &c.Clusters[i]
		path := fmt.Sprintf("clusters[%d]", i)
		if cl.Admission != nil {
			v.admission(path+".admission", cl.Admission)
		}
		if cl.Breaker != nil {
			v.breaker(path+".breaker", cl, clusters)
		}
	}
	v.fallbackLoops()
	files := map[string]*rules.Set{}
	for i := range c.Routes {
		v.policies(fmt.Sprintf("routes[%d].policies", i), &c.Routes[i].Policies, files)
	}
	if c.RateLimit.Store == "redis" {
		v.sharedRuleIDs()
	}
}

// sharedRuleIDs refuses rules of one id with different limits on
// different routes: on Redis a rule's keys are prefix:{key}:id, so they
// would share their state, and the scripts of different limits cannot.
func (v *validator) sharedRuleIDs() {
	type first struct {
		route int
		spec  ratelimit.Spec
	}
	seen := map[string]first{}
	for i := range v.c.Routes {
		rl := v.c.Routes[i].Policies.RateLimit
		if rl == nil || rl.set == nil {
			continue
		}
		for _, r := range rl.set.Rules {
			f, dup := seen[r.ID]
			switch {
			case !dup:
				seen[r.ID] = first{i, r.Spec}
			case f.route != i && f.spec != r.Spec:
				v.at(&rl.Rules, &rl.File)("routes[%d].policies.ratelimit: rule %q: routes[%d] has a rule of this id with another limit; on Redis both would count in the same keys: give one another id", i, r.ID, f.route)
			}
		}
	}
}

// fieldPtr names a field of the file for the checks below.
type fieldPtr struct {
	name string
	ptr  any
}

// onlyWith reports each field given although cond is false.
func (v *validator) onlyWith(path string, cond bool, what string, fields ...fieldPtr) {
	for _, f := range fields {
		if !cond && v.given(f.ptr) {
			v.at(f.ptr)("%s.%s: only with %s", path, f.name, what)
		}
	}
}

// libraryError reports err, a library's configuration error, at the field
// it names (byField maps the library's field names to the file's values: a
// pointer, or a []any of them, the first written taken), else at the first
// of at written.
func (v *validator) libraryError(path string, err error, byField map[string]any, at ...any) {
	switch p := byField[libraryField(err)].(type) {
	case nil:
	case []any:
		at = append(p, at...)
	default:
		at = append([]any{p}, at...)
	}
	v.at(at...)("%s: %v", path, err)
}

// libraryField is the field a limit, brownout or breaker configuration
// error names, "" for another error.
func libraryField(err error) string {
	var le *limit.ConfigError
	var be *brownout.ConfigError
	var ce *breaker.ConfigError
	switch {
	case errors.As(err, &le):
		return le.Field
	case errors.As(err, &be):
		return be.Field
	case errors.As(err, &ce):
		return ce.Field
	}
	return ""
}

func (v *validator) rateLimit(r *RateLimit) {
	onRedis := r.Store == "redis"
	switch {
	case onRedis && r.Redis == nil:
		v.at(&r.Store)("ratelimit.store: redis needs a redis: section (its addresses at least)")
	case !onRedis && r.Redis != nil:
		v.at(r.Redis)("ratelimit.redis: only with store: redis (the store is %s)", r.Store)
	}
	v.onlyWith("ratelimit", !onRedis, "store: memory (Redis holds the keys of store: redis)", fieldPtr{"max_keys", &r.MaxKeys})
	v.onlyWith("ratelimit", onRedis, "store: redis", fieldPtr{"floor_factor", &r.FloorFactor},
		fieldPtr{"local_factor", &r.LocalFactor}, fieldPtr{"leasing", r.Leasing})
	if l := r.Leasing; l != nil && l.HotKeysOnly && r.HotKeys == nil {
		v.at(&l.HotKeysOnly)("ratelimit.leasing.hot_keys_only: needs hot_keys (which keys are hot: min_count within an interval)")
	}
	if r.HotKeys != nil && v.clean {
		if _, err := ratelimit.NewHeavyHitters(*sketchless(r.HotKeysConfig())); err != nil {
			v.at(r.HotKeys)("ratelimit.hot_keys: %v", err)
		}
	}
	if x := r.Redis; x != nil && onRedis {
		if len(x.Addresses) > 1 && x.MasterName == "" && x.DB != 0 {
			v.at(&x.DB)("ratelimit.redis.db: several addresses without master_name are a Redis Cluster, which has only db 0")
		}
		cfg := r.StoresConfig()
		if cfg.Lease != nil && cfg.Lease.HotKeys != nil {
			cfg.Lease.HotKeys = sketchless(cfg.Lease.HotKeys)
		}
		if _, err := redisstore.NewStores(noClient{}, cfg); err != nil && v.clean {
			v.at(storesField(err, r)...)("ratelimit: %v", err)
		}
	}
}

// sketchless returns h with the smallest sketch, for checking the other
// fields without allocating a large one at every load (width and depth are
// bounded by their tags).
func sketchless(h *ratelimit.HotKeysConfig) *ratelimit.HotKeysConfig {
	c := *h
	c.Width, c.Depth = 16, 1
	return &c
}

// noClient stands in for the Redis client while NewStores checks a
// configuration: NewStores neither calls it nor starts anything.
type noClient struct{ redis.UniversalClient }

// storesField is where a NewStores error points: the value it names.
func storesField(err error, r *RateLimit) []any {
	msg := err.Error()
	for _, f := range []struct {
		word string
		ptr  any
	}{{"Lease", r.Leasing}, {"Breaker", &r.Redis.Breaker}, {"FloorFactor", &r.FloorFactor},
		{"LocalFactor", &r.LocalFactor}, {"Prefix", &r.Redis.Prefix}, {"Timeout", &r.Redis.Timeout}} {
		if strings.Contains(msg, f.word) {
			return []any{f.ptr, r.Redis}
		}
	}
	return []any{r.Redis}
}

func (v *validator) admission(path string, a *Admission) {
	alg := a.AlgorithmName
	adaptive := alg != "fixed"
	v.onlyWith(path, adaptive, "an adaptive algorithm (not fixed)", fieldPtr{"min_limit", &a.MinLimit},
		fieldPtr{"max_limit", &a.MaxLimit}, fieldPtr{"backoff", &a.Backoff})
	v.onlyWith(path, slices.Contains([]string{"aimd", "gradient", "gradient2"}, alg), "algorithm aimd, gradient or gradient2",
		fieldPtr{"tolerance", &a.Tolerance})
	v.onlyWith(path, alg == "aimd", "algorithm aimd", fieldPtr{"baseline", &a.Baseline})
	q, qpath := &a.Queue, path+".queue"
	v.onlyWith(qpath, q.Discipline != "reject", "a queue (discipline fifo, adaptive-lifo or codel)",
		fieldPtr{"max_wait", &q.MaxWait}, fieldPtr{"max_length", &q.MaxLength})
	v.onlyWith(qpath, q.Discipline == "adaptive-lifo", "discipline adaptive-lifo", fieldPtr{"standing_wait", &q.StandingWait})
	v.onlyWith(qpath, q.Discipline == "codel", "discipline codel", fieldPtr{"target", &q.Target}, fieldPtr{"interval", &q.Interval})
	if !v.clean {
		return
	}
	byField := map[string]any{"InitialLimit": &a.InitialLimit, "MinLimit": &a.MinLimit, "MaxLimit": &a.MaxLimit,
		"Tolerance": &a.Tolerance, "Backoff": &a.Backoff, "Baseline": &a.Baseline,
		"Shares[0]": &a.Shares.Critical, "Shares[1]": &a.Shares.Default, "Shares[2]": &a.Shares.Sheddable,
		"Queue.MaxWait": &q.MaxWait, "Queue.MaxQueue": &q.MaxLength, "Queue.StandingWait": &q.StandingWait,
		"Queue.Target": &q.Target, "Queue.Interval": &q.Interval, "Fairness.Slots": a.Fairness, "Fairness.Pressure": a.Fairness}
	if _, err := a.Algorithm(); err != nil {
		v.libraryError(path, err, byField, a)
	}
	fixed, _ := limit.NewFixed(1)
	if _, err := limit.NewLimiter(fixed, a.LimiterConfig()); err != nil {
		v.libraryError(path, err, byField, a)
	}
	if cfg, ok := a.DimmerConfig(); ok {
		b := a.Brownout
		if _, err := brownout.New(cfg); err != nil {
			v.libraryError(path+".brownout", err, map[string]any{"TargetWait": &b.TargetWait, "TargetP99": &b.TargetP99,
				"Period": &b.Period, "Window": &b.Window}, b)
		}
	}
}

func (v *validator) breaker(path string, c *Cluster, clusters map[string]int) {
	b := c.Breaker
	windowed := b.Window != "consecutive"
	v.onlyWith(path, b.Window == "consecutive", "window consecutive", fieldPtr{"threshold", &b.Threshold})
	v.onlyWith(path, b.Window == "count", "window count", fieldPtr{"calls", &b.Calls})
	v.onlyWith(path, b.Window == "time", "window time", fieldPtr{"duration", &b.Duration}, fieldPtr{"bucket", &b.Bucket})
	v.onlyWith(path, windowed, "window count or time", fieldPtr{"min_calls", &b.MinCalls},
		fieldPtr{"failure_rate", &b.FailureRate}, fieldPtr{"slow_call", &b.SlowCall})
	v.onlyWith(path, b.SlowCall > 0, "slow_call", fieldPtr{"slow_call_rate", &b.SlowCallRate})
	if b.Window == "count" && !v.given(&b.MinCalls) && b.Calls < b.MinCalls {
		b.MinCalls = b.Calls
	}
	if err := b.BreakerConfig().Validate(); err != nil && v.clean {
		v.libraryError(path, err, map[string]any{"Threshold": &b.Threshold, "Recovery": &b.Open,
			"RecoveryMultiplier": &b.Multiplier, "MaxRecovery": []any{&b.MaxOpen, &b.Multiplier}, "Trials": &b.Trials, "WindowCalls": &b.Calls,
			"WindowSeconds": &b.Duration, "BucketSeconds": &b.Bucket, "MinCalls": &b.MinCalls}, b)
	}
	f := b.Fallback
	if f == nil {
		return
	}
	static := v.given(&f.Status) || v.given(&f.Body) || v.given(&f.ContentType) || v.given(&f.Headers)
	switch {
	case v.given(&f.Cluster) && static:
		v.at(&f.Cluster)("%s.fallback: give cluster or a static answer (status, body, content_type, headers), not both", path)
	case f.Cluster != "" && f.Cluster == c.Name:
		v.at(&f.Cluster)("%s.fallback.cluster: %q is this cluster itself", path, f.Cluster)
	default:
		v.ref(path+".fallback.cluster", &f.Cluster, "cluster", clusters)
	}
}

// fallbackLoops reports clusters whose fallback clusters lead back to
// them (each loop once, at its first cluster in the file).
func (v *validator) fallbackLoops() {
	c := v.c
	next := func(cl *Cluster) *Cluster {
		if cl.Breaker == nil || cl.Breaker.Fallback == nil || cl.Breaker.Fallback.Cluster == cl.Name {
			return nil
		}
		return c.Cluster(cl.Breaker.Fallback.Cluster)
	}
	reported := map[*Cluster]bool{}
	for i := range c.Clusters {
		start := &c.Clusters[i]
		chain := []string{start.Name}
		for x := next(start); x != nil && len(chain) <= len(c.Clusters); x = next(x) {
			chain = append(chain, x.Name)
			if x == start && !reported[start] {
				for _, n := range chain {
					reported[c.Cluster(n)] = true
				}
				v.at(&start.Breaker.Fallback.Cluster)("clusters[%d].breaker.fallback.cluster: the fallbacks go round in a loop (%s)", i, strings.Join(chain, " → "))
				break
			}
		}
	}
}

func (v *validator) policies(path string, p *Policies, files map[string]*rules.Set) {
	if d := &p.Deadline; d.Default > 0 && d.Max > 0 && d.Default > d.Max {
		v.at(&d.Default)("%s.deadline.default: %v is above max (%v)", path, d.Default, d.Max)
	}
	if p.RateLimit != nil {
		v.routeRules(path+".ratelimit", p.RateLimit, files)
	}
	v.retry(path+".retry", &p.Retry)
}

func (v *validator) retry(path string, r *Retry) {
	r.statuses, r.kinds = [10]uint64{}, 0
	for _, s := range r.On {
		if k, ok := retryKinds[s]; ok {
			r.kinds |= k
			continue
		}
		lo, hi, err := parseStatus(s)
		if err != nil {
			continue // reported
		}
		for code := lo; code <= hi; code++ {
			r.statuses[code>>6] |= 1 << (code & 63)
		}
	}
	if !v.clean {
		return
	}
	p := r.Policy()
	if err := p.Validate(); err != nil {
		v.at(&r.Backoff.Cap, &r.Backoff)("%s.backoff: %v", path, err)
	}
	if err := r.BudgetConfig().Validate(); err != nil {
		v.at(&r.Budget)("%s.budget: %v", path, err)
	}
	if h, ok := r.HedgeConfig(); ok {
		if err := h.Validate(); err != nil {
			v.at(r.Hedge)("%s.hedge: %v", path, err)
		}
		v.onlyWith(path+".hedge", r.Hedge.Delay == 0, "delay 0 (the tracked quantile)",
			fieldPtr{"quantile", &r.Hedge.Quantile}, fieldPtr{"samples", &r.Hedge.Samples}, fieldPtr{"max_age", &r.Hedge.MaxAge})
	}
}

package config

import (
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/spillwayhq/spillway/breaker"
	"github.com/spillwayhq/spillway/brownout"
	"github.com/spillwayhq/spillway/limit"
	"github.com/spillwayhq/spillway/ratelimit"
	"github.com/spillwayhq/spillway/ratelimit/redisstore"
	"github.com/spillwayhq/spillway/ratelimit/rules"
	"github.com/spillwayhq/spillway/retry"
	"github.com/spillwayhq/spillway/shed"
)

// The policy sections as the library's structs (see library.go). Where the
// file's 0 means "none" and the library's 0 means its default, the methods
// translate, as SetConfig does for panic_threshold.

// RedisOptions returns the go-redis options of store: redis (one address:
// standalone; several: Cluster; with master_name: Sentinel), or nil with
// memory. Commands are not retried by go-redis (MaxRetries -1) and obey
// their context's deadline: the store's timeout, breaker and fail modes
// decide what a slow or dead Redis costs.
func (r *RateLimit) RedisOptions() *redis.UniversalOptions {
	x := r.Redis
	if r.Store != "redis" || x == nil {
		return nil
	}
	return &redis.UniversalOptions{Addrs: slices.Clone(x.Addresses), MasterName: x.MasterName,
		Username: x.Username, Password: x.Password, DB: x.DB, PoolSize: x.PoolSize,
		DialTimeout: x.DialTimeout.D(), ContextTimeoutEnabled: true, MaxRetries: -1}
}

// StoresConfig returns the redisstore.StoresConfig of store: redis: key
// prefix and timeout, the store breaker, the floor and local factors,
// leasing (of every fail-open rule; with hot_keys_only, of hot keys only).
func (r *RateLimit) StoresConfig() redisstore.StoresConfig {
	cfg := redisstore.StoresConfig{FloorFactor: r.FloorFactor, LocalFactor: r.LocalFactor}
	if cfg.FloorFactor <= 0 {
		cfg.FloorFactor = -1 // 0 in the file: no floor (the library's 0 is its default)
	}
	if x := r.Redis; x != nil {
		cfg.Store = redisstore.Config{Prefix: x.Prefix, Timeout: x.Timeout.Seconds()}
		cfg.Breaker = breaker.Config{Threshold: x.Breaker.Threshold, Recovery: x.Breaker.Recovery.Seconds()}
	}
	if l := r.Leasing; l != nil {
		cfg.Lease = &redisstore.LeaseOptions{Config: ratelimit.LeaseConfig{Size: l.Size, TTL: l.TTL.Seconds()}}
		if l.HotKeysOnly {
			cfg.Lease.HotKeys = r.HotKeysConfig()
		}
	}
	return cfg
}

// HotKeysConfig returns the heavy-hitter tracker's configuration (each
// rule gets one), or nil when hot_keys is absent.
func (r *RateLimit) HotKeysConfig() *ratelimit.HotKeysConfig {
	h := r.HotKeys
	if h == nil {
		return nil
	}
	return &ratelimit.HotKeysConfig{Width: h.Width, Depth: h.Depth, TopK: h.Top, Shards: h.Shards,
		Interval: h.Interval.Seconds(), Decay: h.Decay, MinCount: uint64(h.MinCount)}
}

// MemoryConfig returns the configuration of each rule's store with store:
// memory.
func (r *RateLimit) MemoryConfig() ratelimit.MemoryConfig {
	return ratelimit.MemoryConfig{MaxKeys: r.MaxKeys}
}

// RuleSet returns the route's rules, parsed and validated by Load (inline
// or from their file). Its TrustedProxies and ForwardedHeader are empty: the
// gateway finds the client IP by the listener's trusted_proxies.
func (rl *RouteRateLimit) RuleSet() *rules.Set { return rl.set }

// Algorithm returns a new limit algorithm of the admission's kind and
// bounds (each call a fresh one: algorithms hold state), or the library's
// error for bounds it refuses.
func (a *Admission) Algorithm() (limit.Algorithm, error) {
	lo, hi, start := a.MinLimit, a.MaxLimit, a.InitialLimit
	switch a.AlgorithmName {
	case "fixed":
		return algorithm(limit.NewFixed(start))
	case "aimd":
		return algorithm(limit.NewAIMD(limit.AIMDConfig{InitialLimit: start, MinLimit: lo, MaxLimit: hi,
			Baseline: a.Baseline.Seconds(), LearnBaseline: a.Baseline == 0, Tolerance: a.Tolerance, Backoff: a.Backoff}))
	case "gradient":
		return algorithm(limit.NewGradient(limit.GradientConfig{InitialLimit: start, MinLimit: lo, MaxLimit: hi,
			Tolerance: a.Tolerance, Backoff: a.Backoff}))
	case "vegas":
		return algorithm(limit.NewVegas(limit.VegasConfig{InitialLimit: start, MinLimit: lo, MaxLimit: hi, Backoff: a.Backoff}))
	}
	return algorithm(limit.NewGradient2(limit.Gradient2Config{InitialLimit: start, MinLimit: lo, MaxLimit: hi,
		Tolerance: a.Tolerance, Backoff: a.Backoff}))
}

// algorithm returns x as a limit.Algorithm, nil (not a nil pointer in an
// interface) with an error.
func algorithm[T limit.Algorithm](x T, err error) (limit.Algorithm, error) {
	if err != nil {
		return nil, err
	}
	return x, nil
}

// LimiterConfig returns the limiter's class shares, wait queue and
// fairness.
func (a *Admission) LimiterConfig() limit.LimiterConfig {
	q := a.Queue
	d, _ := limit.ParseDiscipline(q.Discipline)
	cfg := limit.LimiterConfig{
		Shares: []float64{a.Shares.Critical, a.Shares.Default, a.Shares.Sheddable},
		Queue: limit.QueueConfig{Discipline: d, MaxWait: q.MaxWait.Seconds(), MaxQueue: q.MaxLength,
			StandingWait: q.StandingWait.Seconds(), Target: q.Target.Seconds(), Interval: q.Interval.Seconds()},
	}
	if f := a.Fairness; f != nil {
		cfg.Fairness = limit.FairnessConfig{Slots: f.Slots, Pressure: f.Pressure}
	}
	return cfg
}

// DimmerConfig returns the brownout dimmer's configuration; ok is false
// without brownout. The header is Brownout.Header.
func (a *Admission) DimmerConfig() (cfg brownout.Config, ok bool) {
	b := a.Brownout
	if b == nil {
		return cfg, false
	}
	return brownout.Config{TargetWait: b.TargetWait.Seconds(), TargetP99: b.TargetP99.Seconds(),
		Period: b.Period.Seconds(), Window: b.Window.Seconds(), Hysteresis: b.Hysteresis, Decrease: b.Decrease,
		Increase: b.Increase, Min: b.Min, MinSamples: b.MinSamples}, true
}

// BreakerConfig returns the breaker's configuration (OnStateChange left
// nil). Shadow and the fallback are the gateway's.
func (b *Breaker) BreakerConfig() breaker.Config {
	cfg := breaker.Config{Recovery: b.Open.Seconds(), RecoveryMultiplier: b.Multiplier,
		MaxRecovery: b.MaxOpen.Seconds(), Trials: b.Trials}
	switch b.Window {
	case "count":
		cfg.Window, cfg.WindowCalls = breaker.CountWindow, b.Calls
	case "time":
		cfg.Window, cfg.WindowSeconds, cfg.BucketSeconds = breaker.TimeWindow, b.Duration.Seconds(), b.Bucket.Seconds()
	default:
		cfg.Threshold = b.Threshold
		return cfg
	}
	cfg.MinCalls, cfg.FailureRate, cfg.SlowCall = b.MinCalls, b.FailureRate, b.SlowCall.Seconds()
	if cfg.SlowCall > 0 {
		cfg.SlowCallRate = b.SlowCallRate
	}
	return cfg
}

// ClassOf returns the class of the route's requests (when the request does
// not set one from a trusted peer).
func (p *Policies) ClassOf() shed.Class {
	c, ok := shed.ParseClass(p.Class)
	if !ok {
		return shed.Default
	}
	return c
}

// Policy returns the retry policy: attempts and backoff, with Budget nil
// (make one per route with retry.NewBudget(BudgetConfig())).
func (r *Retry) Policy() retry.Policy {
	j := retry.FullJitter
	for x := retry.FullJitter; x <= retry.NoJitter; x++ {
		if x.String() == r.Backoff.Jitter {
			j = x
		}
	}
	return retry.Policy{MaxAttempts: r.Attempts,
		Backoff: retry.Backoff{Base: r.Backoff.Base.Seconds(), Cap: r.Backoff.Cap.Seconds(), Jitter: j}}
}

// BudgetConfig returns the retry budget's configuration.
func (r *Retry) BudgetConfig() retry.BudgetConfig {
	return retry.BudgetConfig{Max: r.Budget.Max, Ratio: r.Budget.Ratio, MinPerSecond: r.Budget.MinPerSecond}
}

// HedgeConfig returns the hedging configuration, with Budget nil (the
// route's retry budget is set by the gateway); ok false without hedge.
func (r *Retry) HedgeConfig() (c retry.HedgeConfig, ok bool) {
	h := r.Hedge
	if h == nil {
		return c, false
	}
	return retry.HedgeConfig{Delay: h.Delay.Seconds(), Quantile: h.Quantile, MaxHedges: h.MaxHedges,
		Samples: h.Samples, MaxAge: h.MaxAge.Seconds()}, true
}

// The error kinds of retry.on.
const (
	retryConnect uint8 = 1 << iota
	retryReset
	retryTimeout
)

var retryKinds = map[string]uint8{"connect-failure": retryConnect, "reset": retryReset, "timeout": retryTimeout}

// RetryStatus reports whether an upstream answer with status code is
// retried (retry.on lists it or a range holding it). It does not allocate.
func (r *Retry) RetryStatus(code int) bool {
	return code >= 0 && code < 64*len(r.statuses) && r.statuses[code>>6]&(1<<(code&63)) != 0
}

// RetryKind reports whether failures of kind (connect-failure: no
// connection was made, nothing was sent; reset: the connection failed before
// a response; timeout: the attempt timed out) are retried.
func (r *Retry) RetryKind(kind string) bool { return r.kinds&retryKinds[kind] != 0 }

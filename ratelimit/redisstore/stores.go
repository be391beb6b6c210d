package redisstore

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/spillwayhq/spillway/breaker"
	"github.com/spillwayhq/spillway/ratelimit"
	"github.com/spillwayhq/spillway/ratelimit/rules"
)

// Defaults of StoresConfig.
const (
	// DefaultFloorFactor is StoresConfig.FloorFactor when zero: while Redis
	// is down, each node allows every key the rule's own limit.
	DefaultFloorFactor = 1.0
	// DefaultLocalMaxKeys is StoresConfig.LocalMaxKeys when zero.
	DefaultLocalMaxKeys = 1 << 16
	// MaxFactor bounds FloorFactor and LocalFactor.
	MaxFactor = 1e6
)

// StoresConfig configures NewStores. The zero value gives every rule a
// Redis store with the package defaults, its fail mode with a breaker of
// 3 failures and 1 s recovery, a floor at the rule's own limit for
// fail-open rules, no leasing and no local tier.
type StoresConfig struct {
	// Store is every rule's Store configuration (Prefix, Timeout,
	// TTLMargin, QueueSize, MaxBatch, Workers); its Rule is ignored: each
	// rule's Store gets the rule's id, so a rule's keys are
	// Prefix:{key}:id. The queue and the workers are shared by all the
	// rules (one of QueueSize and Workers for the Stores, not per rule),
	// and Timeout is also the wait of a joint decision (AllowJoint).
	Store Config
	// Breaker configures each rule's circuit breaker around Redis
	// (ratelimit.GuardConfig.Breaker): zero fields take their defaults
	// (Recovery: ratelimit.DefaultGuardRecovery).
	Breaker breaker.Config
	// FloorFactor sets how loose the local floor of a fail-open rule is:
	// while Redis cannot decide, each node decides the rule alone with an
	// in-memory store of the rule's algorithm, its Rate and Burst (the
	// window's Rate for window algorithms) multiplied by FloorFactor and
	// rounded up. 1, the default, never refuses a key more than the rule
	// itself would if the node saw all of the key's traffic; with N nodes
	// sharing a key's traffic the fleet then admits up to N times the
	// limit: the floor stops floods, it does not enforce the rule. A
	// factor of 1/N (with N the nodes) is about the rule's limit across
	// the fleet when traffic is spread evenly, and refuses more than it
	// when it is not. 0 means DefaultFloorFactor; negative means no floor
	// (a dead Redis lets everything through). At most MaxFactor.
	FloorFactor float64
	// LocalFactor, if positive, puts an in-memory tier in front of every
	// rule (ratelimit.Tiered): the rule's limit multiplied by LocalFactor,
	// as for the floor, refuses a key's flood on this node without a round
	// trip. With a factor of 1 or more it refuses only keys that already
	// sent this node the whole rule's limit. 0 means no local tier. At
	// most MaxFactor.
	LocalFactor float64
	// LocalMaxKeys bounds the keys of each rule's floor and of its local
	// tier (each an in-memory store: see ratelimit.Memory for eviction);
	// 0 means DefaultLocalMaxKeys.
	LocalMaxKeys int
	// Lease, if not nil, puts token leasing (ratelimit.Leased) between the
	// fail mode and Redis for the rules it selects.
	Lease *LeaseOptions

	// Health, if not nil, makes every rule's limit load-aware: Stores
	// calls it at most once per HealthInterval seconds of the decisions'
	// now, in a deciding goroutine (it must be fast and must not block),
	// and applies it as Stores.SetHealth does, so the whole rules set
	// scales together: each rule's Redis store, its fail-open floor and
	// its local tier, by the same curves (see Store.SetScale and
	// ratelimit.Memory.SetScale for the formulas). Without Health,
	// Stores.SetHealth alone scales the set. Store.Health,
	// Store.HealthInterval and Store.Classes must be left zero: these
	// fields replace them.
	Health func() float64
	// HealthInterval is the least time between two calls of Health, in
	// seconds; 0 means 1.
	HealthInterval float64
	// Classes are the load classes' curves, most important first (see
	// ratelimit.ClassCurve); empty means one class scaled in proportion to
	// health. At most ratelimit.MaxLoadClasses.
	Classes []ratelimit.ClassCurve
	// Class, if not nil, returns the load class of a rule's requests (an
	// index into Classes; beyond the last counts as the last, negative as
	// 0): rules guarding less important traffic can then lose their share
	// first (ratelimit.ClassCurve). nil puts every rule in class 0.
	Class func(*rules.Rule) int
}

// LeaseOptions configures leasing for Stores.
type LeaseOptions struct {
	// Config is each leased rule's lease configuration (zero fields:
	// NewLeased's defaults, 10 units for 1 s), except that Size is cut to
	// the rule's capacity (its Burst, or Rate for a window algorithm), a
	// rule whose capacity is below 2 units is not leased, and a Refill
	// that is then Size or more means Size/2. Config.Hot must be nil: set
	// HotKeys.
	Config ratelimit.LeaseConfig
	// HotKeys, if not nil, gives each leased rule a
	// ratelimit.HeavyHitters of this configuration and leases only the
	// keys it reports hot (its MinCount: the units within an Interval
	// from which a key is hot); the other keys are decided by Redis,
	// exactly, one round trip each.
	HotKeys *ratelimit.HotKeysConfig
	// Rules selects the leased rules; nil means every fail-open rule.
	// Fail-closed rules guard the limits that must hold (login, OTP,
	// payments), and leasing loosens a limit: a window of W seconds may
	// see the limit of W + TTL (see ratelimit.Leased). A leaky-queue rule
	// is never leased (the queue's delay applies to a whole lease).
	Rules func(*rules.Rule) bool
}

// Stores builds the stores of rules on Redis: its ForRule method is an
// httplimit.Config.Store. For each rule it makes, from the outside in:
//
//	local tier (optional)  in-memory, the rule's limit × LocalFactor: refuses floods locally
//	fail mode              ratelimit.Guarded: the rule's FailMode, a breaker, and for
//	                       fail-open rules a floor (in-memory, the limit × FloorFactor)
//	leasing (optional)     ratelimit.Leased: Size units per round trip, maybe for hot keys only
//	Redis                  a Store: Prefix:{key}:rule-id, one Lua script per algorithm
//
// With StoresConfig.Health (or Stores.SetHealth) the Redis store, the
// floor and the local tier scale together, in the rule's load class.
//
// A request refused by the local tier costs no round trip; the fail mode
// decides when Redis does not answer within the Store's Timeout or the
// breaker is open (a dead Redis then costs nothing per request, and one
// trial per breaker Recovery notices its return). Fail closed refuses
// (httplimit answers 503); fail open serves, within the floor.
//
// Stores owns what it starts: Config.Workers goroutines, shared by its
// rule stores, run while any RuleStore is open (httplimit's Limiter
// closes the stores its rules stop using, and all of them at Close; or
// Stores.Close). Its rule stores are ratelimit.JointKeyed: a request under
// several of them is decided by AllowJoint, in one round trip. Safe for
// concurrent use.
type Stores struct {
	client  redis.UniversalClient // immutable
	cfg     StoresConfig          // immutable, defaults filled
	eng     *engine               // immutable: the rule stores' shared queue and workers
	timeout time.Duration         // immutable: cfg.Store.Timeout, one joint decision's wait
	pool    sync.Pool             // of *jointScratch

	mu        sync.Mutex
	open      map[*RuleStore]struct{} // guarded by mu: stores not closed yet
	closed    bool                    // guarded by mu
	health    float64                 // guarded by mu: the last SetHealth's
	healthSet bool                    // guarded by mu: SetHealth was called
	nextPoll  atomic.Uint64           // float64 bits of the next poll of cfg.Health
}

// NewStores returns a Stores building rule stores on client with cfg, or
// an error wrapping ErrConfig (or breaker.ErrConfig, or
// ratelimit.ErrInvalidKeyedConfig) that names the bad field. It does not
// talk to Redis.
func NewStores(client redis.UniversalClient, cfg StoresConfig) (*Stores, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: client is nil", ErrConfig)
	}
	if cfg.FloorFactor == 0 {
		cfg.FloorFactor = DefaultFloorFactor
	}
	if cfg.LocalMaxKeys == 0 {
		cfg.LocalMaxKeys = DefaultLocalMaxKeys
	}
	if st := cfg.Store; st.Health != nil || st.HealthInterval != 0 || st.Classes != nil {
		return nil, fmt.Errorf("%w: Store.Health, Store.HealthInterval and Store.Classes must be zero (set StoresConfig's Health, HealthInterval and Classes: one poll for all rules)", ErrConfig)
	}
	probe := cfg.Store
	probe.Rule = "probe"
	if err := probe.withDefaults().validate(); err != nil {
		return nil, fmt.Errorf("StoresConfig.Store: %w", err)
	}
	if cfg.HealthInterval == 0 {
		cfg.HealthInterval = 1
	}
	if !(cfg.HealthInterval > 0) || math.IsInf(cfg.HealthInterval, 1) {
		return nil, fmt.Errorf("%w: HealthInterval must be a positive finite number of seconds (0 means 1), got %v", ErrConfig, cfg.HealthInterval)
	}
	if err := ratelimit.ValidateClasses(cfg.Classes); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	cfg.Classes = slices.Clone(cfg.Classes)
	cfg.Store.Classes = cfg.Classes
	switch {
	case math.IsNaN(cfg.FloorFactor) || cfg.FloorFactor > MaxFactor:
		return nil, fmt.Errorf("%w: FloorFactor must be at most %v (0 means %v, negative no floor), got %v", ErrConfig, MaxFactor, DefaultFloorFactor, cfg.FloorFactor)
	case !(cfg.LocalFactor >= 0) || cfg.LocalFactor > MaxFactor:
		return nil, fmt.Errorf("%w: LocalFactor must be from 0 (no local tier) to %v, got %v", ErrConfig, MaxFactor, cfg.LocalFactor)
	case cfg.LocalMaxKeys < 1:
		return nil, fmt.Errorf("%w: LocalMaxKeys must be positive (0 means %d), got %d", ErrConfig, DefaultLocalMaxKeys, cfg.LocalMaxKeys)
	}
	if err := cfg.Breaker.Validate(); err != nil {
		return nil, fmt.Errorf("StoresConfig.Breaker: %w", err)
	}
	if lo := cfg.Lease; lo != nil {
		if lo.Config.Hot != nil {
			return nil, fmt.Errorf("%w: Lease.Config.Hot must be nil (set Lease.HotKeys: one tracker per rule)", ErrConfig)
		}
		if _, err := ratelimit.NewLeased(nopKeyed{}, lo.Config); err != nil {
			return nil, fmt.Errorf("StoresConfig.Lease.Config: %w", err)
		}
		if lo.HotKeys != nil {
			if _, err := ratelimit.NewHeavyHitters(*lo.HotKeys); err != nil {
				return nil, fmt.Errorf("StoresConfig.Lease.HotKeys: %w", err)
			}
		}
	}
	st := cfg.Store.withDefaults()
	s := &Stores{client: client, cfg: cfg, eng: newEngine(client, st), open: map[*RuleStore]struct{}{},
		timeout: time.Duration(st.Timeout * float64(time.Second))}
	s.pool.New = func() any { return new(jointScratch) }
	return s, nil
}

// Warm readies Redis for the first decisions, so that they do not spend
// their Timeout on set-up: it loads the decision script (SCRIPT LOAD; on a
// Cluster, on every master) and opens a connection for each worker (one
// PING each, at once, in a pipeline, as decisions are sent). Decisions
// work without it (the first ones load the script after a NOSCRIPT reply
// and dial their connections). It returns the first error, wrapping
// ratelimit.ErrStoreUnavailable; ctx bounds it.
func (s *Stores) Warm(ctx context.Context) error {
	if err := s.client.ScriptLoad(ctx, theScript.src).Err(); err != nil {
		return fmt.Errorf("%w: %w", ratelimit.ErrStoreUnavailable, err)
	}
	errs := make(chan error, s.eng.workers)
	for range s.eng.workers {
		go func() { errs <- warmPipeline(ctx, s.client) }()
	}
	var first error
	for range s.eng.workers {
		if err := <-errs; err != nil && first == nil {
			first = fmt.Errorf("%w: %w", ratelimit.ErrStoreUnavailable, err)
		}
	}
	return first
}

// warmPipeline sends one PING in a pipeline: decisions go in pipelines,
// which take their connections from a pool of their own (go-redis's
// pipeline pool), so that is the pool to open them in.
func warmPipeline(ctx context.Context, c redis.UniversalClient) error {
	_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error { return p.Ping(ctx).Err() })
	return err
}

// nopKeyed stands in for a global store while a lease configuration is
// checked.
type nopKeyed struct{}

func (nopKeyed) AllowN(context.Context, string, float64, int) (ratelimit.Decision, error) {
	return ratelimit.Decision{}, nil
}

// ForRule returns the store of rule r (a *RuleStore), or an error: the
// rule's own (a rules.FieldError, or ratelimit.ErrInvalidLimit for a limit
// Redis cannot hold, such as a leaky queue longer than MaxEntries), or
// ErrClosed after Close. Use it as httplimit.Config.Store.
func (s *Stores) ForRule(r rules.Rule) (ratelimit.Keyed, error) {
	rs, err := s.build(r)
	if err != nil {
		return nil, err
	}
	return rs, nil
}

func (s *Stores) build(r rules.Rule) (*RuleStore, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	cfg := s.cfg.Store
	cfg.Rule = r.ID
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	st, err := storeOn(s.eng, r.Spec, cfg)
	if err != nil {
		return nil, err
	}
	rs := &RuleStore{owner: s, redis: st}
	if err := s.wrap(rs, &r); err != nil {
		st.Close()
		return nil, fmt.Errorf("redisstore: rule %q: %w", r.ID, err)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		st.Close()
		return nil, ErrClosed
	}
	s.open[rs] = struct{}{}
	if s.healthSet {
		rs.SetHealth(s.health)
	}
	s.mu.Unlock()
	return rs, nil
}

// memoryConfig is the configuration of a rule's floor and local tier.
func (s *Stores) memoryConfig() ratelimit.MemoryConfig {
	return ratelimit.MemoryConfig{MaxKeys: s.cfg.LocalMaxKeys, Classes: s.cfg.Classes}
}

// inClass returns k deciding in class c: k itself for class 0.
func inClass[K interface {
	ratelimit.Keyed
	ForClass(int) ratelimit.Keyed
}](k K, c int) ratelimit.Keyed {
	if c == 0 {
		return k
	}
	return k.ForClass(c)
}

// wrap builds the layers around rs.redis (see Stores).
func (s *Stores) wrap(rs *RuleStore, r *rules.Rule) error {
	class := 0
	if s.cfg.Class != nil {
		class = s.cfg.Class(r)
	}
	rs.class = class
	var global = inClass(rs.redis, class)
	if lc, ok := s.leaseConfig(r); ok {
		if lo := s.cfg.Lease; lo.HotKeys != nil {
			hh, err := ratelimit.NewHeavyHitters(*lo.HotKeys)
			if err != nil {
				return err
			}
			lc.Hot, rs.hot = hh, hh
		}
		l, err := ratelimit.NewLeased(global, lc)
		if err != nil {
			return err
		}
		rs.lease, global = l, l
	}
	gc := ratelimit.GuardConfig{Mode: r.FailMode, Breaker: s.cfg.Breaker}
	if r.FailMode == ratelimit.FailOpen && s.cfg.FloorFactor > 0 {
		m, err := ratelimit.NewMemory(scaleSpec(r.Spec, s.cfg.FloorFactor), s.memoryConfig())
		if err != nil {
			return fmt.Errorf("floor: %w", err)
		}
		gc.Floor, rs.floor = inClass(m, class), m
	}
	g, err := ratelimit.NewGuarded(global, gc)
	if err != nil {
		return err
	}
	rs.guard, rs.keyed = g, g
	if s.cfg.LocalFactor > 0 {
		m, err := ratelimit.NewMemory(scaleSpec(r.Spec, s.cfg.LocalFactor), s.memoryConfig())
		if err != nil {
			return fmt.Errorf("local tier: %w", err)
		}
		rs.localK = inClass(m, class)
		t, err := ratelimit.NewTiered(rs.localK, g)
		if err != nil {
			return err
		}
		rs.local, rs.keyed = m, t
	}
	return nil
}

// leaseConfig returns the lease configuration of rule r, or ok false when
// r is not leased (see LeaseOptions).
func (s *Stores) leaseConfig(r *rules.Rule) (lc ratelimit.LeaseConfig, ok bool) {
	lo := s.cfg.Lease
	if lo == nil || r.Spec.Algorithm == ratelimit.AlgLeakyQueue {
		return lc, false
	}
	if lo.Rules != nil && !lo.Rules(r) || lo.Rules == nil && r.FailMode != ratelimit.FailOpen {
		return lc, false
	}
	lc = lo.Config
	if lc.Size == 0 {
		lc.Size = 10
	}
	lc.Size = min(lc.Size, r.Capacity())
	if lc.Size < 2 {
		return lc, false
	}
	if lc.Refill >= lc.Size {
		lc.Refill = 0
	}
	return lc, true
}

// scaleSpec returns s with its limit multiplied by f > 0: for the bucket
// algorithms Rate × f and Burst (⌈Rate⌉ when 0) × f rounded up; for the
// window algorithms Rate × f rounded up. Counts stay from 1 to the
// algorithm's maximum.
func scaleSpec(s ratelimit.Spec, f float64) ratelimit.Spec {
	if s.Algorithm == 0 {
		s.Algorithm = ratelimit.AlgGCRA
	}
	count := func(x float64, max int) int {
		return int(math.Min(math.Max(math.Ceil(x), 1), float64(max)))
	}
	if s.Algorithm.Bucket() {
		burst := s.Burst
		if burst == 0 {
			burst = int(math.Ceil(s.Rate))
		}
		s.Rate *= f
		s.Burst = count(float64(burst)*f, ratelimit.MaxBurst)
		return s
	}
	max := ratelimit.MaxBurst
	if s.Algorithm == ratelimit.AlgSlidingLog {
		max = ratelimit.MaxLogLimit
	}
	s.Rate = float64(count(s.Rate*f, max))
	return s
}

// SetHealth scales every open rule store by health h at once (see
// RuleStore.SetHealth), and the stores ForRule makes from now on. With
// StoresConfig.Health set, the next poll replaces it. It holds the Stores'
// lock while it publishes the new scales (a few immutable configurations
// per rule).
func (s *Stores) SetHealth(h float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.health, s.healthSet = h, true
	for rs := range s.open {
		rs.SetHealth(h)
	}
}

// poll calls StoresConfig.Health when HealthInterval has passed since the
// last call (now: the decision's; NaN and negative count as 0). Of the
// goroutines deciding at the same time, the one that advances the next
// poll instant (compare-and-swap) calls it; the others go on with the
// published scales.
func (s *Stores) poll(now float64) {
	if !(now >= 0) {
		now = 0
	}
	next := s.nextPoll.Load()
	if now < math.Float64frombits(next) {
		return
	}
	if !s.nextPoll.CompareAndSwap(next, math.Float64bits(now+s.cfg.HealthInterval)) {
		return
	}
	s.SetHealth(s.cfg.Health())
}

// Close closes every RuleStore it made that is still open (stopping their
// goroutines) and makes later ForRule calls fail with ErrClosed. It does
// not close the client. Idempotent; it returns nil.
func (s *Stores) Close() error {
	s.mu.Lock()
	s.closed = true
	open := make([]*RuleStore, 0, len(s.open))
	for rs := range s.open {
		open = append(open, rs)
	}
	s.mu.Unlock()
	for _, rs := range open {
		rs.Close()
	}
	return nil
}

// RuleStore is one rule's store made by Stores.ForRule: the layers listed
// on Stores around a Redis Store. It implements ratelimit.Keyed (safe for
// concurrent use) and io.Closer; its accessors expose the layers for
// metrics (Stats methods).
type RuleStore struct {
	keyed ratelimit.Keyed         // immutable: the outermost layer
	redis *Store                  // immutable
	guard *ratelimit.Guarded      // immutable
	floor *ratelimit.Memory       // immutable; nil without a floor
	lease *ratelimit.Leased       // immutable; nil without leasing
	hot   *ratelimit.HeavyHitters // immutable; nil unless leasing hot keys only
	local *ratelimit.Memory       // immutable; nil without a local tier
	// localK is the local tier in the rule's class; nil without one.
	localK ratelimit.Keyed
	class  int     // immutable: the rule's load class
	owner  *Stores // immutable
}

var (
	_ ratelimit.JointKeyed = (*RuleStore)(nil)
	_ io.Closer            = (*RuleStore)(nil)
	_ ratelimit.Joint      = (*Stores)(nil)
)

// Joint returns the Stores that made rs: it decides the requests of all
// its rule stores together (see Stores.AllowJoint).
func (rs *RuleStore) Joint() ratelimit.Joint { return rs.owner }

// AllowN decides a request through the layers; see Stores. Redis decides
// on its own clock; now drives the breaker, the leases, the floor and the
// local tier.
func (rs *RuleStore) AllowN(ctx context.Context, key string, now float64, cost int) (ratelimit.Decision, error) {
	if o := rs.owner; o.cfg.Health != nil {
		o.poll(now)
	}
	return rs.keyed.AllowN(ctx, key, now, cost)
}

// Close stops the Redis store's goroutines (see Store.Close); later
// decisions get the rule's fail mode. Idempotent; it returns nil.
func (rs *RuleStore) Close() error {
	rs.owner.mu.Lock()
	delete(rs.owner.open, rs)
	rs.owner.mu.Unlock()
	return rs.redis.Close()
}

// SetHealth scales the rule's Redis store, floor and local tier by health
// h through StoresConfig.Classes (see Store.SetHealth); Stores.SetHealth
// and StoresConfig.Health call it for every rule.
func (rs *RuleStore) SetHealth(h float64) {
	rs.redis.SetHealth(h)
	if rs.floor != nil {
		rs.floor.SetHealth(h)
	}
	if rs.local != nil {
		rs.local.SetHealth(h)
	}
}

// Redis returns the Redis store (its RedisKey gives a key's layout).
func (rs *RuleStore) Redis() *Store { return rs.redis }

// Guard returns the fail-mode layer (its Stats and Breaker).
func (rs *RuleStore) Guard() *ratelimit.Guarded { return rs.guard }

// Floor returns the fail-open floor, or nil.
func (rs *RuleStore) Floor() *ratelimit.Memory { return rs.floor }

// Leased returns the leasing layer, or nil when the rule is not leased.
func (rs *RuleStore) Leased() *ratelimit.Leased { return rs.lease }

// HotKeys returns the tracker that picks the leased keys, or nil when the
// rule is not leased or leases every key.
func (rs *RuleStore) HotKeys() *ratelimit.HeavyHitters { return rs.hot }

// Local returns the local tier, or nil.
func (rs *RuleStore) Local() *ratelimit.Memory { return rs.local }

package redisstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/spillwayhq/spillway/ratelimit"
)

// Defaults for zero Config fields.
const (
	DefaultPrefix    = "rl"
	DefaultTimeout   = 0.005 // seconds: 5 ms per decision, queueing included
	DefaultTTLMargin = 1.0   // seconds added to every key's TTL
	DefaultQueueSize = 4096  // decisions waiting for a pipeline
	DefaultMaxBatch  = 256   // decisions per pipeline
	DefaultWorkers   = 2     // goroutines sending pipelines: two keep Redis busy, with the largest batches
)

// Limits on Config fields and keys.
const (
	MaxRuleLen   = 128     // bytes in Config.Rule
	MaxPrefixLen = 64      // bytes in Config.Prefix
	MaxRawKeyLen = 128     // longer user keys are hashed (see Store.RedisKey)
	MaxQueueSize = 1 << 20 // Config.QueueSize
	MaxMaxBatch  = 4096    // Config.MaxBatch
	MaxWorkers   = 64      // Config.Workers
	MaxTimeout   = 60.0    // seconds, Config.Timeout
	// MaxEntries is the largest leaky-queue Burst and sliding-log Rate the
	// store accepts: a script loops once per unit of cost, and Redis runs
	// one script at a time, so a decision may take at most ~MaxEntries steps.
	MaxEntries = ratelimit.MaxLogLimit
)

// maxScriptUnits bounds the units of cost decided by one script call of the
// leaky queue or the sliding log (whose scripts loop once per unit), so a
// batch holds Redis for a bounded time; a single larger decision goes alone.
const maxScriptUnits = 4096

// Errors. Each wraps ratelimit.ErrStoreUnavailable, so a caller (or
// ratelimit.Guarded) needs to test only that.
var (
	// ErrConfig is wrapped by configuration errors from New.
	ErrConfig = errors.New("redisstore: invalid configuration")
	// ErrTimeout: no answer within Config.Timeout. The decision may still
	// have been taken (and counted) by Redis after the caller gave up.
	ErrTimeout = fmt.Errorf("redisstore: no answer in time: %w", ratelimit.ErrStoreUnavailable)
	// ErrQueueFull: Config.QueueSize decisions were already waiting; the
	// call is refused at once, without waiting.
	ErrQueueFull = fmt.Errorf("redisstore: queue full: %w", ratelimit.ErrStoreUnavailable)
	// ErrClosed: the Store was closed.
	ErrClosed = fmt.Errorf("redisstore: store closed: %w", ratelimit.ErrStoreUnavailable)
)

// Config configures a Store. Rule is required; every other zero field
// takes its default.
type Config struct {
	// Rule is the rule's id, the last part of every key
	// (Prefix:{key}:Rule): 1 to MaxRuleLen bytes, without '{' or '}'.
	// Two Stores with the same Prefix and Rule share their keys: that is
	// how several gateways enforce one limit.
	Rule string
	// Prefix is the first part of every key; "" means DefaultPrefix ("rl").
	// At most MaxPrefixLen bytes, without '{' or '}'.
	Prefix string
	// Timeout is the longest AllowN waits for its answer, in seconds,
	// queueing included (an earlier ctx deadline wins). Zero means
	// DefaultTimeout (5 ms); at most MaxTimeout.
	Timeout float64
	// TTLMargin is added to every key's TTL, in seconds: a key expires
	// TTLMargin after the instant its state becomes the same as no state
	// (bucket full, queue empty, window over). Zero means DefaultTTLMargin
	// (1 s); it is rounded up to whole milliseconds.
	TTLMargin float64
	// QueueSize bounds the decisions waiting for a pipeline (for the
	// stores of a Stores: their shared queue). When it is full AllowN
	// fails at once with ErrQueueFull. Zero means DefaultQueueSize; at
	// most MaxQueueSize.
	QueueSize int
	// MaxBatch bounds the decisions a worker sends in one round trip (on a
	// standalone server, in one script call). Zero means DefaultMaxBatch;
	// at most MaxMaxBatch.
	MaxBatch int
	// Workers is the number of goroutines that take decisions off the
	// queue and send them, one round trip at a time each (for the stores
	// of a Stores: shared, running while any of them is open).
	// Zero means DefaultWorkers; at most MaxWorkers. Each uses one
	// connection of the client's pool while its pipeline is out.
	Workers int
	// Classes are the load classes' curves, most important first (see
	// ratelimit.ClassCurve and Store.SetHealth); at most
	// ratelimit.MaxLoadClasses, checked by ratelimit.ValidateClasses.
	// Empty means one class scaled in proportion to health:
	// {Low: 0, High: 1}.
	Classes []ratelimit.ClassCurve
	// Health, if not nil, returns the backend's health in [0, 1]; a
	// decision calls it at most once per HealthInterval seconds of
	// AllowN's now (not Redis's clock), in the deciding goroutine, and
	// applies it as SetHealth does (see ratelimit.MemoryConfig.Health). It
	// must be fast and must not block.
	Health func() float64
	// HealthInterval is the least time between two calls of Health, in
	// seconds; 0 means 1.
	HealthInterval float64
}

func (c Config) withDefaults() Config {
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.TTLMargin == 0 {
		c.TTLMargin = DefaultTTLMargin
	}
	if c.QueueSize == 0 {
		c.QueueSize = DefaultQueueSize
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = DefaultMaxBatch
	}
	if c.Workers == 0 {
		c.Workers = DefaultWorkers
	}
	if c.HealthInterval == 0 {
		c.HealthInterval = 1
	}
	return c
}

// validate checks a Config with defaults filled in.
func (c Config) validate() error {
	switch {
	case c.Rule == "" || len(c.Rule) > MaxRuleLen || strings.ContainsAny(c.Rule, "{}"):
		return fmt.Errorf("%w: Rule %q must be 1 to %d bytes without '{' or '}'", ErrConfig, c.Rule, MaxRuleLen)
	case len(c.Prefix) > MaxPrefixLen || strings.ContainsAny(c.Prefix, "{}"):
		return fmt.Errorf("%w: Prefix %q must be at most %d bytes without '{' or '}'", ErrConfig, c.Prefix, MaxPrefixLen)
	case !(c.Timeout > 0) || c.Timeout > MaxTimeout:
		return fmt.Errorf("%w: Timeout must be from 0 to %v seconds (0 means %v), got %v", ErrConfig, MaxTimeout, DefaultTimeout, c.Timeout)
	case !(c.TTLMargin > 0) || c.TTLMargin > 86400:
		return fmt.Errorf("%w: TTLMargin must be from 0 to 86400 seconds (0 means %v), got %v", ErrConfig, DefaultTTLMargin, c.TTLMargin)
	case c.QueueSize < 1 || c.QueueSize > MaxQueueSize:
		return fmt.Errorf("%w: QueueSize must be from 0 to %d (0 means %d), got %d", ErrConfig, MaxQueueSize, DefaultQueueSize, c.QueueSize)
	case c.MaxBatch < 1 || c.MaxBatch > MaxMaxBatch:
		return fmt.Errorf("%w: MaxBatch must be from 0 to %d (0 means %d), got %d", ErrConfig, MaxMaxBatch, DefaultMaxBatch, c.MaxBatch)
	case c.Workers < 1 || c.Workers > MaxWorkers:
		return fmt.Errorf("%w: Workers must be from 0 to %d (0 means %d), got %d", ErrConfig, MaxWorkers, DefaultWorkers, c.Workers)
	case !(c.HealthInterval > 0) || math.IsInf(c.HealthInterval, 1):
		return fmt.Errorf("%w: HealthInterval must be a positive finite number of seconds (0 means 1), got %v", ErrConfig, c.HealthInterval)
	}
	if err := ratelimit.ValidateClasses(c.Classes); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return nil
}

// Stats are a Store's counters since New.
type Stats struct {
	Decisions  uint64 // calls answered with Redis's decision (allowed or not)
	Errors     uint64 // calls answered with an error (Redis, network, deadline, closed)
	Abandoned  uint64 // calls whose caller gave up before an answer (timeout or ctx)
	QueueFull  uint64 // calls refused with ErrQueueFull
	RoundTrips uint64 // pipelines that carried the Store's decisions, NOSCRIPT retries included
	Reloads    uint64 // of those, pipelines re-sent with EVAL after NOSCRIPT
}

// Store decides requests for one rule on Redis. It implements
// ratelimit.Keyed and is safe for concurrent use; see the package doc.
type Store struct {
	// immutable after New
	eng     *engine
	spec    ratelimit.Spec
	ticks   ruleTicks
	head    string // Prefix + ":{"
	tail    string // "}:" + Rule
	rule    string // Config.Rule
	timeout time.Duration
	base    *params // the rule's own script parameters (scale 1)

	closed    atomic.Bool
	closeOnce sync.Once

	decisions, errs, abandoned, queueFull, roundTrips, reloads atomic.Uint64
	queued                                                     atomic.Int64 // items waiting for a worker

	// load awareness (see scaled.go)
	curves   []ratelimit.ClassCurve // immutable, at least one
	health   func() float64         // immutable; nil: not polled
	interval float64                // immutable: seconds between polls
	nextPoll atomic.Uint64          // float64 bits of the next poll instant
	pubMu    sync.Mutex             // serialises publications
	pub      atomic.Pointer[published]
}

var _ ratelimit.Keyed = (*Store)(nil)

// New returns a Store enforcing spec on client under cfg and starts its
// Workers goroutines (stop them with Close). It does not talk to Redis:
// the script is loaded by the first decision (or by Load). It returns an
// error wrapping ratelimit.ErrInvalidLimit for a bad spec (or one the
// scripts cannot hold in exact integers: see the package doc) and
// ErrConfig for a bad cfg, naming the field.
func New(client redis.UniversalClient, spec ratelimit.Spec, cfg Config) (*Store, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: client is nil", ErrConfig)
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return storeOn(newEngine(client, cfg), spec, cfg)
}

// storeOn returns a Store on eng (whose workers it keeps running until
// Close), for a cfg with defaults filled in and validated.
func storeOn(eng *engine, spec ratelimit.Spec, cfg Config) (*Store, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if spec.Algorithm == 0 {
		spec.Algorithm = ratelimit.AlgGCRA
	}
	if spec.Algorithm.Bucket() {
		l := spec.Limit()
		spec.Burst = l.Burst
		if spec.Algorithm == ratelimit.AlgLeakyQueue && l.Burst > MaxEntries {
			return nil, fmt.Errorf("%w: Burst must be at most %d for the %s on Redis, got %d", ratelimit.ErrInvalidLimit, MaxEntries, spec.Algorithm, l.Burst)
		}
	} else {
		q := spec.Quota()
		if spec.Algorithm == ratelimit.AlgSlidingLog && q.Limit > MaxEntries {
			return nil, fmt.Errorf("%w: Rate must be at most %d for the %s on Redis, got %d", ratelimit.ErrInvalidLimit, MaxEntries, spec.Algorithm, q.Limit)
		}
	}
	tk, err := newRuleTicks(spec)
	if err != nil {
		return nil, err
	}
	curves := []ratelimit.ClassCurve{{Low: 0, High: 1}}
	if len(cfg.Classes) > 0 {
		curves = slices.Clone(cfg.Classes)
	}
	s := &Store{
		eng:      eng,
		spec:     spec,
		ticks:    tk,
		head:     cfg.Prefix + ":{",
		tail:     "}:" + cfg.Rule,
		rule:     cfg.Rule,
		timeout:  time.Duration(cfg.Timeout * float64(time.Second)),
		base:     newParams(spec, tk, 1),
		curves:   curves,
		health:   cfg.Health,
		interval: cfg.HealthInterval,
	}
	s.publish(s.fullScales())
	eng.acquire()
	return s, nil
}

// Spec returns the limit the Store enforces (zero fields filled in).
func (s *Store) Spec() ratelimit.Spec { return s.spec }

// RedisKey returns the Redis key that holds key's state:
// Prefix + ":{" + k + "}:" + Rule, where k is key itself when key is at most
// MaxRawKeyLen bytes, contains no '{' or '}' and does not start with '#';
// otherwise k is '#' followed by the first 128 bits of key's SHA-256 in hex
// (32 characters). So the hash tag is always exactly k (all of a key's
// rules map to one Cluster slot), a hostile key can neither end the tag
// early nor make a huge Redis key, and distinct keys get distinct Redis keys
// (a raw k never starts with '#').
func (s *Store) RedisKey(key string) string { return s.head + s.tagOf(key) + s.tail }

// Rule returns the rule id the store was made for (Config.Rule).
func (s *Store) Rule() string { return s.rule }

// tagOf returns k, the hash tag's content for key (see RedisKey).
func (s *Store) tagOf(key string) string {
	if len(key) <= MaxRawKeyLen && !strings.ContainsAny(key, "{}") && !strings.HasPrefix(key, "#") {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	var k [33]byte
	k[0] = '#'
	hex.Encode(k[1:], sum[:16])
	return string(k[:])
}

// Load loads the script into Redis's script cache (on every master, for a
// Cluster client). Optional: a decision whose EVALSHA finds no script
// falls back to EVAL, which loads it.
func (s *Store) Load(ctx context.Context) error {
	if err := s.eng.client.ScriptLoad(ctx, theScript.src).Err(); err != nil {
		return fmt.Errorf("%w: %w", ratelimit.ErrStoreUnavailable, err)
	}
	return nil
}

// Stats returns the Store's counters.
func (s *Store) Stats() Stats {
	return Stats{
		Decisions:  s.decisions.Load(),
		Errors:     s.errs.Load(),
		Abandoned:  s.abandoned.Load(),
		QueueFull:  s.queueFull.Load(),
		RoundTrips: s.roundTrips.Load(),
		Reloads:    s.reloads.Load(),
	}
}

// AllowN decides a request of cost units for key on Redis in class 0, the
// most important (see AllowClassN). The now argument does not reach Redis:
// the script reads Redis's clock (TIME), the one clock all gateways share;
// now only paces the calls of Config.Health. The call is queued for the
// next pipeline and waits at most Config.Timeout (or until ctx ends) for
// its answer; every error wraps ratelimit.ErrStoreUnavailable.
func (s *Store) AllowN(ctx context.Context, key string, now float64, cost int) (ratelimit.Decision, error) {
	return s.AllowClassN(ctx, key, 0, now, cost)
}

// AllowClassN decides a request of cost units for key under class's scaled
// limit (see SetScale and SetHealth), as AllowN does for class 0. A class
// beyond the configured ones counts as the last (least important), a
// negative one as 0. All classes share the key's state in Redis. A closed
// class is answered at once, without a round trip: refused with RetryAfter
// = the rule's Per, or allowed for a query (cost ≤ 0).
func (s *Store) AllowClassN(ctx context.Context, key string, class int, now float64, cost int) (ratelimit.Decision, error) {
	par, err := s.prepare(ctx, class, now)
	if err != nil {
		return ratelimit.Decision{}, err
	}
	if par == nil {
		return s.closedDecision(cost), nil
	}
	c := s.eng.pool.Get().(*call)
	c.now = now
	c.add(s, par, key, cost, false)
	if err := s.eng.do(ctx, c, s.timeout); err != nil {
		s.countFailed(err)
		return ratelimit.Decision{}, err
	}
	d, err := c.items[0].d, c.items[0].err
	s.eng.put(c)
	return d, err
}

// countFailed counts a call of the Store that engine.do did not get
// answered: refused at once (queue full) or abandoned by its caller.
func (s *Store) countFailed(err error) {
	if errors.Is(err, ErrQueueFull) {
		s.queueFull.Add(1)
	} else {
		s.abandoned.Add(1)
	}
}

// prepare checks that a decision of class may go to Redis at now and
// returns its parameters: nil for a closed class.
func (s *Store) prepare(ctx context.Context, class int, now float64) (*params, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ratelimit.ErrStoreUnavailable, err)
	}
	if s.health != nil {
		s.poll(now)
	}
	return s.pub.Load().params(class), nil
}

// Close stops the workers of a Store made by New, waiting for the
// pipelines out (at most about Config.Timeout), and fails the decisions
// still queued with ErrClosed; a Store of a Stores leaves the shared
// workers to the Stores' other open stores. Later calls of AllowN fail with
// ErrClosed. It does not close the client. Close is idempotent and always
// returns nil.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.eng.release()
	})
	return nil
}

package ratelimit

import (
	"context"
	"fmt"
	"hash/maphash"
	"strings"
	"sync"
	"sync/atomic"
)

// Memory is the in-memory keyed store: one rule's Spec enforced separately
// for every key (client IP, user, API key, ...), in this process. It
// implements Keyed; AllowN is safe for concurrent use and exact under
// concurrency (every decision on a key holds that key's shard lock, so N
// goroutines sending requests on one key against a limit of L admit exactly
// L).
//
// # Keys and layout
//
// Keys are spread over Shards shards (a power of two) by a hash/maphash
// hash under a seed drawn at random for each store; each shard is a mutex
// and a table of its keys. There is no global lock. There are two tables:
//
//   - The hashed table, the default for the states of fixed size (GCRA,
//     fixed window: 8 bytes; sliding counter: 12; token bucket, leaky meter:
//     16): a key is known by its 64-bit keyed hash alone; no key string is
//     stored or compared. Open addressing with linear probing over entries
//     {hash, time of the last decision, state} (24 bytes for GCRA and the
//     fixed window, 32 for the others), growing by doubling at a load of 3/4
//     up to the size the shard's cap needs (nothing is allocated in advance:
//     a store holding few keys is small), deletion shifting the following
//     entries back (no tombstones). A decision on a held key reads the key's
//     bytes, to hash them, and one entry: one cache miss in the table when
//     the keys do not fit in the CPU's caches. An idle GCRA key costs 32 to
//     64 bytes in all (24-byte slots at a load of 3/4 down to 3/8): 50 B
//     with a million keys (TestMemoryBytesPerKey, BenchmarkKeyedBytesPerIdleKey).
//   - The exact-key table, with MemoryConfig.ExactKeys, and always for the
//     sliding log and the leaky queue (their states hold a ring): an index
//     of 8-byte slots over a dense slab of entries {key, time of the last
//     decision, state}; a lookup compares the stored key with the caller's.
//     An idle GCRA key costs 43 to 53 bytes beyond its copy of the key string
//     (entry 32 B, index 8 B per slot at a load of 3/8 to 3/4): 53 B with a
//     million keys. A decision reads the index slot, the entry and the stored
//     key's bytes: three cache misses rather than one.
//
// With a million keys a decision is bound by memory latency. On the
// development machine (2 cores, parallel decisions), the hashed table takes
// about 150 ns per decision, the exact-key table 300 to 450 and the peer, a
// sync.Map of x/time/rate limiters, about 550: see BenchmarkKeyed1MParallel.
// With keys that fit in the caches a decision takes about 40 ns.
//
// Hash collisions in the hashed table: two keys whose hashes are equal are
// one key to the store. They share one state, so together they get one
// key's limit: a collision can refuse requests the limit would allow, never
// admit more than it. With n keys held at once the chance that any two of
// them collide is about n²/2^65: 2.7·10^-8 with a million keys, 2.7·10^-6
// with ten million. A client cannot force one: the seed is random, made for
// each store, and never leaves the process, so a client cannot compute the
// hash of any key; hitting the hash of a given other key (to drain its
// budget) takes about 2^64 tries, with no sign of success but a budget that
// runs out sooner; and collisions among a client's own keys only shrink its
// own budget. (hash/maphash is not a cryptographic MAC: this relies on the
// seed staying secret, not on a proof.) Set ExactKeys where even that
// chance is not acceptable.
//
// # Expiry
//
// A key whose state decides exactly like a never-seen key ("full": GCRA
// TAT ≤ now, a token bucket refilled to Burst, a leaky meter drained, a leaky
// queue whose last unit has left, a window that has passed, a log whose
// newest timestamp has left the window) is dropped: that changes no decision
// as long as time does not run backwards. Dropping is amortised: in the
// exact-key table every fourth decision of a shard looks at one more of its
// entries (a cursor going round the slab), in the hashed table every
// sixteenth decision looks at four more slots (a cursor going round the
// table, which is halved when less than 1/16 full); a full shard looks at
// EvictSample entries before evicting, and Sweep drops every expired key at
// once. No goroutine is involved. A new key
// whose state stays full after its decision (a refusal, a query of cost 0)
// is not stored at all.
//
// IdleTTL, if set, also drops a key unused for IdleTTL seconds whose state is
// not full (a sliding log of a day kept by a key idle for an hour): that key
// restarts full, which can admit more than the limit.
//
// # Eviction at MaxKeys
//
// A shard holds at most MaxKeys/Shards keys. A new key arriving at a full
// shard samples EvictSample of its keys (in the hashed table: a slot drawn
// at random, then the first key from there on): the first expired one is
// dropped (exactly, as above); if none is, the least recently used of the
// sample is evicted (sampled LRU, as Redis's allkeys-lru does). An evicted key restarts
// full. A flood of distinct keys therefore cannot grow memory beyond the cap;
// what it can do is make the store forget the least recently used keys, so an
// attacker with many keys can at most reset keys that have been idle the
// longest, in expectation from the oldest 1/(EvictSample+1) of each shard,
// and give them a fresh burst. Size MaxKeys above the number of keys active
// within a refill period (Burst/Rate, or the window) and eviction touches
// only keys that would be full again anyway.
//
// # Load awareness and classes
//
// The rule's rate can be scaled by a health signal: SetScale for all
// classes at once, SetHealth (or MemoryConfig.Health, polled) through each
// class's ClassCurve. See ClassCurve and SetScale. A scaled configuration is
// built once, published with an atomic pointer, and the keys' states carry
// over; decisions never wait for a publication.
type Memory struct {
	impl memImpl  // *memoryOf[S], immutable
	fast memTyped // the same store, typed: one field set; immutable
	kind memKind  // which field of fast is set; immutable
	spec Spec     // with defaults, immutable

	curves   []ClassCurve   // immutable
	health   func() float64 // immutable; nil: not polled
	interval int64          // nanoseconds between polls
	nextPoll atomic.Int64   // the next poll instant, nanoseconds
	pubMu    sync.Mutex     // serialises publications of scaled configurations
}

var _ Keyed = (*Memory)(nil)

// NewMemory returns an in-memory keyed store enforcing spec for every key,
// or an error wrapping ErrInvalidLimit (naming the Spec's field) or
// ErrInvalidKeyedConfig (naming cfg's field).
func NewMemory(spec Spec, cfg MemoryConfig) (*Memory, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	spec = spec.withDefaults()
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	m := &Memory{spec: spec, curves: cfg.Classes, health: cfg.Health, interval: durationNanos(cfg.HealthInterval)}
	f := &m.fast
	hashed := !cfg.ExactKeys
	switch spec.Algorithm {
	case AlgGCRA:
		if hashed {
			f.hGCRA, err = newHashedOf(spec, cfg, memGCRA)
			m.impl, m.kind = f.hGCRA, memKindHashedGCRA
		} else {
			f.gcra, err = newMemoryOf(spec, cfg, memGCRA)
			m.impl, m.kind = f.gcra, memKindGCRA
		}
	case AlgTokenBucket:
		if hashed {
			f.hTokenBucket, err = newHashedOf(spec, cfg, memTokenBucket)
			m.impl, m.kind = f.hTokenBucket, memKindHashedTokenBucket
		} else {
			f.tokenBucket, err = newMemoryOf(spec, cfg, memTokenBucket)
			m.impl, m.kind = f.tokenBucket, memKindTokenBucket
		}
	case AlgLeakyMeter:
		if hashed {
			f.hLeakyMeter, err = newHashedOf(spec, cfg, memLeakyMeter)
			m.impl, m.kind = f.hLeakyMeter, memKindHashedLeakyMeter
		} else {
			f.leakyMeter, err = newMemoryOf(spec, cfg, memLeakyMeter)
			m.impl, m.kind = f.leakyMeter, memKindLeakyMeter
		}
	case AlgLeakyQueue: // a ring: always the exact-key table
		f.leakyQueue, err = newMemoryOf(spec, cfg, memLeakyQueue)
		m.impl, m.kind = f.leakyQueue, memKindLeakyQueue
	case AlgFixedWindow:
		if hashed {
			f.hFixedWindow, err = newHashedOf(spec, cfg, memFixedWindow)
			m.impl, m.kind = f.hFixedWindow, memKindHashedFixedWindow
		} else {
			f.fixedWindow, err = newMemoryOf(spec, cfg, memFixedWindow)
			m.impl, m.kind = f.fixedWindow, memKindFixedWindow
		}
	case AlgSlidingLog: // a ring: always the exact-key table
		f.slidingLog, err = newMemoryOf(spec, cfg, memSlidingLog)
		m.impl, m.kind = f.slidingLog, memKindSlidingLog
	case AlgSlidingCounter:
		if hashed {
			f.hSlidingCounter, err = newHashedOf(spec, cfg, memSlidingCounter)
			m.impl, m.kind = f.hSlidingCounter, memKindHashedSlidingCounter
		} else {
			f.slidingCounter, err = newMemoryOf(spec, cfg, memSlidingCounter)
			m.impl, m.kind = f.slidingCounter, memKindSlidingCounter
		}
	}
	if err != nil {
		return nil, err
	}
	return m, nil
}

// memKind is which table and state type a Memory uses: the field of
// memTyped that is set.
type memKind uint8

const (
	memKindGCRA memKind = iota
	memKindTokenBucket
	memKindLeakyMeter
	memKindLeakyQueue
	memKindFixedWindow
	memKindSlidingLog
	memKindSlidingCounter
	memKindHashedGCRA
	memKindHashedTokenBucket
	memKindHashedLeakyMeter
	memKindHashedFixedWindow
	memKindHashedSlidingCounter
)

// memTyped holds the store as its concrete type, so that a decision is a
// switch and a direct call rather than an interface call (which costs the
// decision path about a fifth of its time).
type memTyped struct {
	gcra           *memoryOf[GCRAState]
	tokenBucket    *memoryOf[TokenBucketState]
	leakyMeter     *memoryOf[LeakyMeterState]
	leakyQueue     *memoryOf[LeakyQueueState]
	fixedWindow    *memoryOf[FixedWindowState]
	slidingLog     *memoryOf[SlidingLogState]
	slidingCounter *memoryOf[SlidingCounterState]

	hGCRA           *hashedOf[GCRAState]
	hTokenBucket    *hashedOf[TokenBucketState]
	hLeakyMeter     *hashedOf[LeakyMeterState]
	hFixedWindow    *hashedOf[FixedWindowState]
	hSlidingCounter *hashedOf[SlidingCounterState]
}

// allowN decides in class into out; see AllowClassN.
func (m *Memory) allowN(key string, class int, now float64, cost int, out *Decision) {
	if m.health != nil {
		m.poll(toNanos(now))
	}
	f := &m.fast
	switch m.kind {
	case memKindHashedGCRA:
		f.hGCRA.allowN(key, class, now, cost, out)
	case memKindHashedTokenBucket:
		f.hTokenBucket.allowN(key, class, now, cost, out)
	case memKindHashedLeakyMeter:
		f.hLeakyMeter.allowN(key, class, now, cost, out)
	case memKindHashedFixedWindow:
		f.hFixedWindow.allowN(key, class, now, cost, out)
	case memKindHashedSlidingCounter:
		f.hSlidingCounter.allowN(key, class, now, cost, out)
	case memKindGCRA:
		f.gcra.allowN(key, class, now, cost, out)
	case memKindTokenBucket:
		f.tokenBucket.allowN(key, class, now, cost, out)
	case memKindLeakyMeter:
		f.leakyMeter.allowN(key, class, now, cost, out)
	case memKindLeakyQueue:
		f.leakyQueue.allowN(key, class, now, cost, out)
	case memKindFixedWindow:
		f.fixedWindow.allowN(key, class, now, cost, out)
	case memKindSlidingLog:
		f.slidingLog.allowN(key, class, now, cost, out)
	default:
		f.slidingCounter.allowN(key, class, now, cost, out)
	}
}

// Spec returns the rule's limit (with defaults filled in).
func (m *Memory) Spec() Spec { return m.spec }

// AllowN decides a request of cost units for key at now (seconds) in class
// 0, the most important; see AllowClassN. ctx is not used (a decision in
// memory does not wait) and the error is always nil.
func (m *Memory) AllowN(_ context.Context, key string, now float64, cost int) (Decision, error) {
	var d Decision
	m.allowN(key, 0, now, cost, &d)
	return d, nil
}

// AllowClassN decides a request of cost units for key at now (seconds) under
// class's scaled limit (see ClassCurve); a class beyond the configured ones
// counts as the last (least important), a negative one as 0. All classes
// share the key's state. It does not allocate for a key already held; a new
// key costs one copy of the key string in the exact-key table, and nothing
// in the hashed one (but the table's growth, by doubling).
func (m *Memory) AllowClassN(key string, class int, now float64, cost int) Decision {
	var d Decision
	m.allowN(key, class, now, cost, &d)
	return d
}

// ForClass returns a Keyed that decides in class c (see AllowClassN), for
// callers that pick a store per request class.
func (m *Memory) ForClass(c int) Keyed { return memClass{m, c} }

type memClass struct {
	m *Memory
	c int
}

func (k memClass) AllowN(_ context.Context, key string, now float64, cost int) (Decision, error) {
	return k.m.AllowClassN(key, k.c, now, cost), nil
}

// Len returns the number of keys held (each shard counted under its lock,
// so the sum is not a snapshot under concurrent use).
func (m *Memory) Len() int { return m.impl.stats().Keys }

// Stats returns the store's counters (each shard read under its lock).
func (m *Memory) Stats() MemoryStats { return m.impl.stats() }

// Sweep drops every key that has expired at now (full again, or idle for
// IdleTTL) and returns how many it dropped. Decisions sweep a little on
// their own; call Sweep periodically (from a ticker of your own) to give
// memory back sooner after a flood of keys. It holds one shard's lock at a
// time, for at most 256 entries.
func (m *Memory) Sweep(now float64) int { return m.impl.sweep(toNanos(now)) }

// memImpl is the algorithm-independent face of memoryOf[S].
type memImpl interface {
	publish(scales []float64)
	scales() []float64
	stats() MemoryStats
	sweep(ns int64) int
}

// memAlgo adapts one algorithm to the store.
type memAlgo[S any] struct {
	// build returns the algorithm's configuration for the rule's Spec.
	build func(Spec) (Decider[S], error)
	// full reports whether s at ns (nanoseconds) decides exactly like the
	// zero state under d, then and at every later time: then the key can be
	// dropped.
	full func(d Decider[S], s *S, ns int64) bool
}

// memBuilt turns a constructor's concrete result into a Decider, keeping a
// nil pointer from becoming a non-nil interface.
func memBuilt[S any, D Decider[S]](d D, err error) (Decider[S], error) {
	if err != nil {
		return nil, err
	}
	return d, nil
}

var (
	memGCRA = memAlgo[GCRAState]{
		build: func(s Spec) (Decider[GCRAState], error) { return memBuilt[GCRAState](NewGCRA(s.Limit())) },
		full: func(d Decider[GCRAState], s *GCRAState, ns int64) bool {
			_, ahead := leadOf(s.tat, d.(*GCRA).lat.units(ns))
			return ahead == 0
		},
	}
	memTokenBucket = memAlgo[TokenBucketState]{
		build: func(s Spec) (Decider[TokenBucketState], error) {
			return memBuilt[TokenBucketState](NewTokenBucket(s.Limit()))
		},
		full: func(d Decider[TokenBucketState], s *TokenBucketState, ns int64) bool {
			return d.(*TokenBucket).full(s, ns)
		},
	}
	memLeakyMeter = memAlgo[LeakyMeterState]{
		build: func(s Spec) (Decider[LeakyMeterState], error) {
			return memBuilt[LeakyMeterState](NewLeakyMeter(s.Limit()))
		},
		full: func(d Decider[LeakyMeterState], s *LeakyMeterState, ns int64) bool {
			return d.(*LeakyMeter).empty(s, ns)
		},
	}
	memLeakyQueue = memAlgo[LeakyQueueState]{
		build: func(s Spec) (Decider[LeakyQueueState], error) {
			return memBuilt[LeakyQueueState](NewLeakyQueue(s.Limit()))
		},
		// nextFree is one interval after the last release, so nextFree ≤ now
		// means the queue is empty and a new request starts at now.
		full: func(d Decider[LeakyQueueState], s *LeakyQueueState, ns int64) bool {
			return d.(*LeakyQueue).idle(s, ns)
		},
	}
	memFixedWindow = memAlgo[FixedWindowState]{
		build: func(s Spec) (Decider[FixedWindowState], error) {
			return memBuilt[FixedWindowState](NewFixedWindow(s.Quota()))
		},
		full: func(d Decider[FixedWindowState], s *FixedWindowState, ns int64) bool {
			c, fw := *s, d.(*FixedWindow)
			fw.roll(&c, ns/fw.w)
			return c.count == 0
		},
	}
	memSlidingCounter = memAlgo[SlidingCounterState]{
		build: func(s Spec) (Decider[SlidingCounterState], error) {
			return memBuilt[SlidingCounterState](NewSlidingCounter(s.Quota()))
		},
		full: func(d Decider[SlidingCounterState], s *SlidingCounterState, ns int64) bool {
			c := *s
			d.(*SlidingCounter).roll(&c, ns)
			return c.prev|c.cur == 0
		},
	}
	memSlidingLog = memAlgo[SlidingLogState]{
		build: func(s Spec) (Decider[SlidingLogState], error) {
			return memBuilt[SlidingLogState](NewSlidingLog(s.Quota()))
		},
		full: func(d Decider[SlidingLogState], s *SlidingLogState, ns int64) bool {
			return d.(*SlidingLog).expired(s, ns)
		},
	}
)

// memRule is what the stores of both tables (memoryOf, hashedOf) share:
// the rule, its published configuration, the hash seed and the expiry
// settings. Set by init, then immutable but for cfg.
type memRule[S any] struct {
	algo    memAlgo[S]
	base    Spec       // with defaults
	baseDec Decider[S] // the unscaled configuration
	seed    maphash.Seed
	shift   uint  // 64 − log2(shards): a hash's top bits pick its shard
	ttl     int64 // IdleTTL in nanoseconds; 0: none
	sample  int
	cfg     atomic.Pointer[memConfig[S]] // the published configuration
}

// memoryOf is the store for one algorithm's state type S over exact-key
// tables (memTable): the ring-based states always, the others with
// MemoryConfig.ExactKeys.
type memoryOf[S any] struct {
	memRule[S]
	shards []memShard[S]
}

// memShard is one shard: its lock and table.
type memShard[S any] struct {
	mu      sync.Mutex
	t       memTable[S] // guarded by mu
	scratch S           // guarded by mu: the state of a key not yet held
	max     int         // immutable: most keys held
	tick    uint32      // guarded by mu: decisions, to sweep every fourth
	counts  MemoryStats // guarded by mu; Keys is filled in by stats
	_       [64]byte    // keeps the next shard's lock off this cache line
}

// memConfig is one published configuration: a Decider per class (nil: the
// class is closed, scale 0). Immutable.
type memConfig[S any] struct {
	n      int
	dec    [MaxLoadClasses]Decider[S]
	scale  [MaxLoadClasses]float64
	checks []Decider[S] // base and the distinct open deciders, for expiry
	retry  float64      // RetryAfter of a closed class: the rule's period
	full   func(d Decider[S], s *S, ns int64) bool
}

// init sets the rule up for spec and cfg (with defaults) and publishes its
// unscaled configuration; the seed is new, random, for this store.
func (r *memRule[S]) init(spec Spec, cfg MemoryConfig, algo memAlgo[S]) error {
	base, err := algo.build(spec)
	if err != nil {
		return err
	}
	r.algo, r.base, r.baseDec, r.seed = algo, spec, base, maphash.MakeSeed()
	r.sample = cfg.EvictSample
	if cfg.IdleTTL > 0 {
		r.ttl = durationNanos(cfg.IdleTTL)
	}
	bits := uint(0)
	for 1<<bits < cfg.Shards {
		bits++
	}
	r.shift = 64 - bits
	ones := make([]float64, len(cfg.Classes))
	for i := range ones {
		ones[i] = 1
	}
	r.publish(ones)
	return nil
}

// config returns the published configuration and class's Decider in it
// (nil: the class is closed), class clamped to the configured ones.
func (r *memRule[S]) config(class int) (*memConfig[S], Decider[S]) {
	c := r.cfg.Load()
	if class >= c.n {
		class = c.n - 1
	} else if class < 0 {
		class = 0
	}
	return c, c.dec[class]
}

// Expiry verdicts of memRule.expiry.
const (
	memKeep        = iota // the key stays
	memExpired            // its state is full again: dropping it changes no decision
	memIdleExpired        // unused for IdleTTL seconds while not full
)

// expiry tells whether a key with state s, last used at used, has expired
// at ns (times in nanoseconds).
func (r *memRule[S]) expiry(s *S, used, ns int64, c *memConfig[S]) int {
	switch {
	case c.isFull(s, ns):
		return memExpired
	case r.ttl > 0 && ns-used >= r.ttl:
		return memIdleExpired
	}
	return memKeep
}

func newMemoryOf[S any](spec Spec, cfg MemoryConfig, algo memAlgo[S]) (*memoryOf[S], error) {
	m := &memoryOf[S]{shards: make([]memShard[S], cfg.Shards)}
	if err := m.init(spec, cfg, algo); err != nil {
		return nil, err
	}
	for i := range m.shards {
		sh := &m.shards[i]
		sh.max = cfg.MaxKeys / cfg.Shards
		sh.t = newMemTable[S](m.seed, memHash(m.seed, fmt.Sprint("shard", i))|1)
	}
	return m, nil
}

// publish builds and publishes the configuration for the class scales.
func (m *memRule[S]) publish(scales []float64) {
	c := &memConfig[S]{n: len(scales), retry: m.base.Per, full: m.algo.full, checks: []Decider[S]{m.baseDec}}
	for i, f := range scales {
		c.scale[i] = f
		if f >= 1 {
			c.dec[i] = m.baseDec
			continue
		}
		s, ok := scaledSpec(m.base, f)
		if !ok {
			continue
		}
		d, err := deriveDecider(m.baseDec, s)
		if err != nil {
			continue // cannot happen for a spec scaledSpec accepted; closed
		}
		c.dec[i] = d
		c.checks = append(c.checks, d)
	}
	m.cfg.Store(c)
}

func (m *memRule[S]) scales() []float64 {
	c := m.cfg.Load()
	return append([]float64(nil), c.scale[:c.n]...)
}

// closed is the answer of a closed class (scale 0).
func (c *memConfig[S]) closed(cost int) Decision {
	if cost <= 0 {
		return Decision{Allowed: true}
	}
	return Decision{RetryAfter: c.retry}
}

// isFull reports whether s decides like a never-seen key under the base
// configuration and every open class's.
func (c *memConfig[S]) isFull(s *S, ns int64) bool {
	for _, d := range c.checks {
		if !c.full(d, s, ns) {
			return false
		}
	}
	return true
}

func (m *memoryOf[S]) allowN(key string, class int, now float64, cost int, out *Decision) {
	ns := toNanos(now)
	c, dec := m.config(class)
	h := memHash(m.seed, key)
	sh := &m.shards[h>>m.shift]
	frag := uint32(h)
	sh.mu.Lock()
	// Sweep first: dropping an entry moves another, so no entry pointer
	// may be held across it. (A key dropped here was full: deciding it as a
	// new key is the same decision.) One entry per four decisions keeps
	// the lock's hold short.
	if sh.tick++; sh.tick&3 == 0 {
		m.sweepLocked(sh, ns, c, 1)
	}
	i := sh.t.lookup(key, frag)
	if i < 0 || dec == nil {
		*out = m.slowLocked(sh, i, key, frag, now, ns, cost, c, dec)
		sh.mu.Unlock()
		return
	}
	e := sh.t.at(i)
	if ns > e.used {
		e.used = ns
	}
	// Stored straight into the caller's Decision, which the compiler keeps
	// in memory (six fields): returning it through the call chain instead
	// copies it between temporaries in 16-byte moves right after Decide's
	// 8-byte stores, which stall on store forwarding (a quarter of the
	// decision's time in BenchmarkKeyed1KParallel).
	*out = dec.Decide(&e.state, now, cost)
	sh.mu.Unlock()
}

// slowLocked decides for a key not held (i < 0) or in a closed class (dec
// nil); ns is toNanos(now).
func (m *memoryOf[S]) slowLocked(sh *memShard[S], i int, key string, frag uint32, now float64, ns int64, cost int, c *memConfig[S], dec Decider[S]) Decision {
	if i >= 0 {
		if e := sh.t.at(i); ns > e.used {
			e.used = ns
		}
		return c.closed(cost)
	}
	var d Decision
	if dec != nil {
		d = dec.Decide(&sh.scratch, now, cost)
	} else {
		d = c.closed(cost)
	}
	if !c.isFull(&sh.scratch, ns) {
		m.insertLocked(sh, strings.Clone(key), frag, ns, c)
	}
	var zero S
	sh.scratch = zero
	return d
}

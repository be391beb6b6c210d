package ratelimit

import (
	"context"
	"fmt"
	"hash/maphash"
	"math"
	"strings"
	"sync"
)

// Leased puts token leasing (seed 002, "Distributed rate limiting", path 2)
// in front of a global Keyed store, typically the Redis one: a node takes
// Size units of a key's limit per round trip (AllowN with cost Size) and
// spends them locally, so a key served at a steady rate costs about 1/Size
// round trips per decision instead of 1.
//
// # What leasing changes, and the bound
//
// The global store never admits more than its limit: every unit a Leased
// spends was admitted by it. What leasing changes is when units are spent:
// a unit leased at t may be spent until t + TTL (later it expires unspent,
// "stranded": it is returned to nobody). So the units admitted by all nodes
// together in any window of W seconds were admitted by the global store in
// a span of W + TTL:
//
//	admitted in any window W  ≤  limit(W + TTL)
//
// where limit(s) is the most the global store admits in a span of s seconds
// (Burst + Rate·s for GCRA and the token bucket). With Rate 10/s, Burst 10
// and TTL 1 s, a window of 1 s can see 30 units instead of 20.
// TestLeaseOvershootBound measures it. Conversely, stranded units are lost:
// under contention across nodes a key can be refused while units of its
// limit sit unspent in another node's lease, at most Size + Refill per node
// per key. Times are the callers' now;
// if the global store uses a clock of its own (Redis TIME), add the clocks'
// skew to TTL.
//
// # Decisions
//
// A request of cost c is served from the key's lease if it holds c units
// (no round trip). When a request leaves Refill units or fewer in the
// lease, the same goroutine then fetches the next lease of Size units
// before it returns (its request is already decided), so the goroutines
// that arrive meanwhile are served from what is left; a refused refill is
// not tried again before its RetryAfter has passed. A lease holds at most
// two batches, each expiring TTL after it was taken (units of a third
// batch join the newer one and expire with it, earlier than their own TTL),
// and the batch that expires first is spent first.
//
// When the lease cannot pay for the request, Leased asks the global store
// for n = max(Size, c) units; if refused with Remaining ≥ c, it asks again
// for Remaining units (a second round trip); if that fails too, the request
// is refused with the global store's answer (its RetryAfter is for the
// units asked, so it is at most (n − c)/Rate longer than the request alone
// would need). So a key that is refused costs one or two round trips per
// request, as without leasing: against floods, put a loose local tier in
// front (Tiered). There is at most one fetch in flight per key and node:
// goroutines that find the lease unable to pay while it is being fetched
// wait for that fetch (or for their context, which ends the wait with an
// error wrapping ErrStoreUnavailable and the context's error) and then
// spend from the new lease, or make a round trip of their own for their
// cost if it is still short. Queries (cost ≤ 0) go to the global store.
// Errors of the global store are returned as they are (the caller applies
// the fail mode); an error of a refill is dropped (its request was decided
// already).
//
// An allowed decision reports Remaining as the units left in the lease plus
// the global store's Remaining when the lease was taken (an estimate: other
// nodes may have spent those since), and Reset as the global store's, less
// the time since. Do not lease over a LeakyQueue: the global store's Delay
// applies to the whole lease and is not passed on.
//
// # Hot keys only
//
// With LeaseConfig.Hot set, only keys that the HeavyHitters reports hot
// (Observe returns hot) are leased; the others go straight to the global
// store, exact, and hold no lease. Hot keys are the ones where leasing pays:
// many decisions per round trip, and few nodes' worth of stranded units
// against a large flow.
//
// # Memory
//
// Leases are kept per key in a sharded table like Memory's, at most MaxKeys
// of them; a full shard drops an expired or empty lease among 5 sampled,
// else the least recently used of them (its units are stranded: that only
// refuses more). Each decision looks at one more lease of its shard and
// drops it if it has expired. AllowN is safe for concurrent use.
type Leased struct {
	global Keyed         // immutable
	hot    *HeavyHitters // immutable; nil: lease every key
	size   int
	refill int   // fetch ahead when a decision leaves this many units or fewer; −1: never
	ttl    int64 // nanoseconds
	seed   maphash.Seed
	shift  uint
	shards []leaseShard
}

var _ Keyed = (*Leased)(nil)

// LeaseConfig configures NewLeased. The zero value leases 10 units for
// 1 second, for up to 65,536 keys.
type LeaseConfig struct {
	// Size is the units taken from the global store per round trip, 1 to
	// MaxBurst; 0 means 10. Keep it at most the global Burst (a larger
	// lease is refused when the bucket is full and falls back to its
	// Remaining, a second round trip).
	Size int
	// Refill is the units left in a lease at or below which the next lease
	// is fetched ahead of need, from 0 to Size − 1; 0 means Size/2, and −1
	// fetches only when the lease cannot pay for a request.
	Refill int
	// TTL is how long leased units may be spent, in seconds; 0 means 1.
	// It is the overshoot term of the bound above.
	TTL float64
	// MaxKeys bounds the leases held; 0 means 65,536.
	MaxKeys int
	// Shards is the number of lease shards, a power of two ≤ MaxKeys; 0
	// means as for Memory.
	Shards int
	// Hot, if not nil, restricts leasing to the keys it reports hot.
	// Leased observes every request on it (cost units).
	Hot *HeavyHitters
}

// LeaseStats counts a Leased's work, for metrics.
type LeaseStats struct {
	Leases        int    // leases held now
	Local         uint64 // decisions served from a lease, without a round trip
	Waited        uint64 // decisions that waited for another goroutine's fetch
	RoundTrips    uint64 // calls of the global store for leased keys (not queries, nor keys that are not hot)
	LeasedUnits   uint64 // units taken by leases
	StrandedUnits uint64 // leased units that expired or were dropped unspent
}

type leaseShard struct {
	mu    sync.Mutex
	t     memTable[leaseState] // guarded by mu
	max   int                  // immutable
	stats LeaseStats           // guarded by mu (Leases unused)
	_     [64]byte
}

// leaseState is one key's lease on this node: up to two batches of units,
// each spendable until its expiry.
type leaseState struct {
	units    [2]int        // units left per batch
	expires  [2]int64      // a batch's units may be spent while now < its expiry (ns)
	reset    int64         // instant the global store said it would be full again (ns)
	remain   int           // the global store's Remaining when the last lease was taken
	quiet    int64         // no refill before this instant, ns (the last one was refused)
	fetching bool          // a goroutine is asking the global store for a lease
	done     chan struct{} // while fetching: closed when the fetch ends
}

func (s *leaseState) total() int { return s.units[0] + s.units[1] }

// take spends c ≤ total units, from the batch that expires first.
func (s *leaseState) take(c int) {
	first := 0
	if s.units[0] == 0 || (s.units[1] > 0 && s.expires[1] < s.expires[0]) {
		first = 1
	}
	t := min(c, s.units[first])
	s.units[first] -= t
	s.units[1-first] -= c - t
}

// add stores n units expiring at exp in an empty batch, or else joins them
// to the batch that expires last (which expires before exp).
func (s *leaseState) add(n int, exp int64) {
	if n <= 0 {
		return
	}
	for b := range s.units {
		if s.units[b] == 0 {
			s.units[b], s.expires[b] = n, exp
			return
		}
	}
	b := 0
	if s.expires[1] > s.expires[0] {
		b = 1
	}
	s.units[b] += n
}

// NewLeased returns a leasing front for global, or an error wrapping
// ErrInvalidKeyedConfig that names the bad field.
func NewLeased(global Keyed, cfg LeaseConfig) (*Leased, error) {
	bad := func(format string, args ...any) (*Leased, error) {
		return nil, fmt.Errorf("%w: "+format, append([]any{ErrInvalidKeyedConfig}, args...)...)
	}
	if global == nil {
		return bad("the global store must not be nil")
	}
	if cfg.Size == 0 {
		cfg.Size = 10
	}
	if cfg.Refill == 0 {
		cfg.Refill = cfg.Size / 2
	}
	if cfg.TTL == 0 {
		cfg.TTL = 1
	}
	if cfg.MaxKeys == 0 {
		cfg.MaxKeys = 1 << 16
	}
	if cfg.Shards == 0 {
		cfg.Shards = defaultShards(max(cfg.MaxKeys, 1))
	}
	switch {
	case cfg.Size < 1 || cfg.Size > MaxBurst:
		return bad("Size must be from 1 to %d units, got %d", MaxBurst, cfg.Size)
	case cfg.Refill < -1 || cfg.Refill >= cfg.Size:
		return bad("Refill must be from −1 to Size − 1 (%d), got %d", cfg.Size-1, cfg.Refill)
	case !(cfg.TTL > 0) || math.IsInf(cfg.TTL, 1):
		return bad("TTL must be a positive finite number of seconds, got %v", cfg.TTL)
	case cfg.MaxKeys < 1:
		return bad("MaxKeys must be positive, got %d", cfg.MaxKeys)
	case cfg.Shards < 1 || cfg.Shards&(cfg.Shards-1) != 0 || cfg.Shards > cfg.MaxKeys:
		return bad("Shards must be a power of two from 1 to MaxKeys (%d), got %d", cfg.MaxKeys, cfg.Shards)
	case cfg.MaxKeys/cfg.Shards >= 1<<31:
		return bad("MaxKeys/Shards must be below 2^31, got %d", cfg.MaxKeys/cfg.Shards)
	}
	l := &Leased{global: global, hot: cfg.Hot, size: cfg.Size, refill: cfg.Refill, ttl: durationNanos(cfg.TTL), seed: maphash.MakeSeed(),
		shards: make([]leaseShard, cfg.Shards)}
	bits := uint(0)
	for 1<<bits < cfg.Shards {
		bits++
	}
	l.shift = 64 - bits
	for i := range l.shards {
		l.shards[i].max = cfg.MaxKeys / cfg.Shards
		l.shards[i].t = newMemTable[leaseState](l.seed, memHash(l.seed, fmt.Sprint("lease", i))|1)
	}
	return l, nil
}

// AllowN decides a request of cost units for key at now (seconds); see
// Leased.
func (l *Leased) AllowN(ctx context.Context, key string, now float64, cost int) (Decision, error) {
	now = clampNow(now)
	if cost <= 0 {
		return l.global.AllowN(ctx, key, now, cost)
	}
	if l.hot != nil {
		if _, hot := l.hot.Observe(key, cost, now); !hot {
			return l.global.AllowN(ctx, key, now, cost)
		}
	}
	h := memHash(l.seed, key)
	sh := &l.shards[h>>l.shift]
	frag := uint32(h)
	ns := toNanos(now)

	sh.mu.Lock()
	i := sh.t.lookup(key, frag)
	if i < 0 {
		l.insertLocked(sh, strings.Clone(key), frag, ns)
		i = sh.t.lookup(key, frag)
	}
	e := sh.t.at(i)
	s := &e.state
	e.used = max(e.used, ns)
	l.expireLocked(sh, s, ns)
	if s.total() >= cost {
		s.take(cost)
		sh.stats.Local++
		d := s.local(ns)
		var done chan struct{}
		if !s.fetching && s.total() <= l.refill && ns >= s.quiet {
			done = make(chan struct{})
			s.fetching, s.done = true, done
		}
		l.sweepLocked(sh, ns)
		sh.mu.Unlock()
		if done != nil {
			l.fetch(ctx, sh, key, frag, now, 0, done)
		}
		return d, nil
	}
	if s.fetching {
		return l.await(ctx, sh, s.done, key, frag, now, cost)
	}
	done := make(chan struct{})
	s.fetching, s.done = true, done
	sh.mu.Unlock()
	return l.fetch(ctx, sh, key, frag, now, cost, done)
}

// await waits, without the shard's lock, for the fetch in flight for key to
// end (done closed) and then spends from the lease, or goes to the global
// store for cost if the lease still cannot pay for it.
func (l *Leased) await(ctx context.Context, sh *leaseShard, done chan struct{}, key string, frag uint32, now float64, cost int) (Decision, error) {
	sh.stats.Waited++
	sh.mu.Unlock()
	select {
	case <-done:
	case <-ctx.Done():
		return Decision{}, fmt.Errorf("%w: waiting for a lease: %w", ErrStoreUnavailable, ctx.Err())
	}
	sh.mu.Lock()
	if i := sh.t.lookup(key, frag); i >= 0 {
		s := &sh.t.at(i).state
		ns := toNanos(now)
		l.expireLocked(sh, s, ns)
		if s.total() >= cost {
			s.take(cost)
			sh.stats.Local++
			d := s.local(ns)
			sh.mu.Unlock()
			return d, nil
		}
	}
	sh.stats.RoundTrips++
	sh.mu.Unlock()
	return l.global.AllowN(ctx, key, now, cost)
}

// fetch takes a lease for key from the global store, for a request of cost
// units (0: a refill ahead of need, whose answer nobody waits for), then
// clears the key's fetching mark and closes done, waking the goroutines
// waiting for it (even if the lease was dropped meanwhile).
func (l *Leased) fetch(ctx context.Context, sh *leaseShard, key string, frag uint32, now float64, cost int, done chan struct{}) (Decision, error) {
	n := max(l.size, cost)
	d, err := l.global.AllowN(ctx, key, now, n)
	trips := uint64(1)
	if cost > 0 && err == nil && !d.Allowed && d.Remaining >= cost {
		n = d.Remaining
		d, err = l.global.AllowN(ctx, key, now, n)
		trips++
	}

	ns := toNanos(now)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	defer close(done)
	sh.stats.RoundTrips += trips
	i := sh.t.lookup(key, frag)
	if i < 0 && err == nil && d.Allowed && n > cost { // dropped meanwhile
		l.insertLocked(sh, strings.Clone(key), frag, ns)
		i = sh.t.lookup(key, frag)
	}
	var s *leaseState
	if i >= 0 {
		s = &sh.t.at(i).state
		if s.done == done {
			s.fetching, s.done = false, nil
		}
	}
	if err != nil || !d.Allowed {
		if s != nil && cost == 0 && err == nil {
			s.quiet = toNanos(now + d.RetryAfter)
		}
		return d, err
	}
	sh.stats.LeasedUnits += uint64(n)
	if s == nil { // n == cost: nothing to keep
		return Decision{Allowed: true, Remaining: d.Remaining, Reset: d.Reset}, nil
	}
	l.expireLocked(sh, s, ns)
	s.add(n-cost, laterBy(ns, l.ttl))
	s.remain, s.reset = d.Remaining, toNanos(now+d.Reset)
	return Decision{Allowed: true, Remaining: s.total() + d.Remaining, Reset: d.Reset}, nil
}

// local is the decision for a request served from the lease at ns.
func (s *leaseState) local(ns int64) Decision {
	return Decision{Allowed: true, Remaining: s.total() + s.remain, Reset: nanosSeconds(max(s.reset-ns, 0))}
}

// expireLocked strands the units of the lease's batches that have expired
// at ns.
func (l *Leased) expireLocked(sh *leaseShard, s *leaseState, ns int64) {
	for b := range s.units {
		if s.units[b] > 0 && ns >= s.expires[b] {
			sh.stats.StrandedUnits += uint64(s.units[b])
			s.units[b] = 0
		}
	}
}

// insertLocked adds an empty lease, making room first if the shard is full.
func (l *Leased) insertLocked(sh *leaseShard, key string, frag uint32, ns int64) {
	if sh.t.n >= sh.max {
		victim, oldest := -1, int64(math.MaxInt64)
		for range 5 {
			i := sh.t.random()
			e := sh.t.at(i)
			if l.droppable(&e.state, ns) {
				victim = i
				break
			}
			if victim < 0 || e.used < oldest {
				victim, oldest = i, e.used
			}
		}
		l.dropLocked(sh, victim, ns)
	}
	sh.t.insert(key, frag, ns, leaseState{})
}

// droppable reports whether a lease holds no usable units, nobody is
// fetching for it, and it does not remember a refused refill.
func (l *Leased) droppable(s *leaseState, ns int64) bool {
	if s.fetching || ns < s.quiet {
		return false
	}
	for b := range s.units {
		if s.units[b] > 0 && ns < s.expires[b] {
			return false
		}
	}
	return true
}

func (l *Leased) dropLocked(sh *leaseShard, i int, ns int64) {
	s := &sh.t.at(i).state
	l.expireLocked(sh, s, ns)
	sh.stats.StrandedUnits += uint64(s.total()) // a live lease evicted
	sh.t.remove(i)
}

// sweepLocked looks at the next lease of the shard's cursor.
func (l *Leased) sweepLocked(sh *leaseShard, ns int64) {
	if sh.t.n == 0 {
		return
	}
	if sh.t.cursor >= sh.t.n {
		sh.t.cursor = 0
	}
	if l.droppable(&sh.t.at(sh.t.cursor).state, ns) {
		l.dropLocked(sh, sh.t.cursor, ns)
	} else {
		sh.t.cursor++
	}
}

// Stats returns the counters, summed over the shards (each read under its
// lock).
func (l *Leased) Stats() LeaseStats {
	var st LeaseStats
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		st.Leases += sh.t.n
		st.Local += sh.stats.Local
		st.Waited += sh.stats.Waited
		st.RoundTrips += sh.stats.RoundTrips
		st.LeasedUnits += sh.stats.LeasedUnits
		st.StrandedUnits += sh.stats.StrandedUnits
		sh.mu.Unlock()
	}
	return st
}

// Tiered is two tiers (seed 002, path 3; Envoy's local rate limit filter in
// front of its global rate limit service): a loose local limiter, typically
// a Memory with a rate above each node's fair share, refuses floods without
// a round trip, and what it allows goes on to the exact global store.
//
// A request refused locally is answered with the local decision and costs
// no round trip; one allowed locally has consumed local units even if the
// global store then refuses it (the local tier only ever refuses more).
// An allowed decision reports the smaller Remaining of the two and the
// larger Reset; Delay and Start are the global store's. An error of either
// tier is returned as it is. AllowN is safe for concurrent use if both
// tiers are.
type Tiered struct {
	local, global Keyed
}

var _ Keyed = (*Tiered)(nil)

// NewTiered returns local in front of global; neither may be nil.
func NewTiered(local, global Keyed) (*Tiered, error) {
	if local == nil || global == nil {
		return nil, fmt.Errorf("%w: both tiers of NewTiered must be set", ErrInvalidKeyedConfig)
	}
	return &Tiered{local: local, global: global}, nil
}

// AllowN decides a request of cost units for key at now (seconds); see
// Tiered.
func (t *Tiered) AllowN(ctx context.Context, key string, now float64, cost int) (Decision, error) {
	dl, err := t.local.AllowN(ctx, key, now, cost)
	if err != nil || !dl.Allowed {
		return dl, err
	}
	dg, err := t.global.AllowN(ctx, key, now, cost)
	if err != nil || !dg.Allowed {
		return dg, err
	}
	dg.Remaining = min(dg.Remaining, dl.Remaining)
	dg.Reset = max(dg.Reset, dl.Reset)
	return dg, nil
}

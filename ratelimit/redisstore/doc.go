// Package redisstore enforces a ratelimit rule on Redis, so that every
// gateway sharing the Redis server (standalone, Sentinel or Cluster, through
// go-redis's UniversalClient) counts against one limit: the central store
// of seed 002 ("Distributed rate limiting", path 1). A Store implements
// ratelimit.Keyed for one rule; build one per rule.
//
//	rdb := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{"127.0.0.1:6379"},
//		ContextTimeoutEnabled: true, MaxRetries: -1})
//	st, err := redisstore.New(rdb, ratelimit.Spec{Rate: 100, Per: 60, Burst: 20},
//		redisstore.Config{Rule: "user-default"})
//	...
//	defer st.Close()
//	limit, err := ratelimit.NewGuarded(st, ratelimit.GuardConfig{Mode: ratelimit.FailOpen})
//	...
//	d, err := limit.AllowN(ctx, "u42", clk.Now(), 1)
//
// # Algorithms
//
// One Lua script, run atomically by Redis, holds the seven algorithms of
// package ratelimit, with the same formulas and semantics as the in-memory
// code (cost-weighted; a denied request consumes nothing; Remaining,
// RetryAfter, Reset, and for the leaky queue Delay and Start). It counts in
// integers below 2^53, which Lua's numbers hold exactly: instants in µs
// (Redis's clock), the bucket algorithms' durations in ticks of 1/D µs
// with D chosen per rule so that the emission interval Per/Rate is a whole
// number of ticks (see params.go), the windows in µs. So a decision is the
// exact-arithmetic one on the µs grid, as the in-memory stores decide on
// theirs: a request every 0.1 s against 10 per second with a burst of 1
// always passes (the float64 arithmetic of earlier versions refused a third
// of them), for every rate that is a short decimal per a Per of whole µs
// (10/s, 3/s, 100/min, 7 per 1.5 s); other rates are rounded to the tick,
// never faster. The tests check the scripts against the in-memory
// algorithms on random timelines (same decisions, durations within 2 µs)
// and against exact rational arithmetic on decimal grids. State per key:
//
//	GCRA                 string: TAT in µs ("q" or "q:r", r ticks)   (SET … PX)
//	token bucket         hash {t: tokens × interval (ticks), l: last refill}
//	leaky meter          hash {v: level × interval (ticks), l: last leak}
//	leaky queue          sorted set of waiting units' release instants, and member f: next free
//	fixed window         hash {c: count, w: window number}
//	sliding window cnt.  hash {p: previous count, c: current count, w: window number}
//	sliding log          sorted set of admitted instants (one member per unit)
//
// (Keys written by the float64 scripts of earlier versions read as empty:
// upgrading forgets at most one TTL of state.) A key that holds another
// type (a rule whose algorithm changed under the same id) reads as empty
// and is replaced. The script loops once per unit of cost for the leaky
// queue and the sliding log, so their Burst (Rate) is capped at
// MaxEntries.
//
// # Key layout
//
// Every key is Prefix:{k}:Rule (default prefix "rl"), the seed's
// rl:{u42}:user-default: the hash tag {k} puts all of one user key's rules in
// one Cluster slot. k is the user key itself, unless it is longer than
// MaxRawKeyLen, contains '{' or '}', or starts with '#': then k is '#' and 32
// hex digits of its SHA-256 (see Store.RedisKey). Rule and Prefix may not
// contain braces.
//
// # TTL rule
//
// Every write sets a TTL (PX / PEXPIRE) of ceil(d·1000) ms + TTLMargin,
// where d is the time until the key's state becomes equivalent to no state:
// the bucket full again (GCRA: TAT − now; token bucket: (Burst − tokens)/Rate),
// empty (leaky meter: level/Rate; leaky queue: next free slot − now), or the
// window's counts no longer mattering (fixed window: the window's end;
// sliding counter: the end of the next window; sliding log: the newest
// entry's exit). A missing key equals a fresh one, so an expired key changes
// no decision; idle keys cost no memory.
//
// # Load-aware limits
//
// A Store scales its rule by a health signal as ratelimit.Memory does, with
// the same formulas (ratelimit.ScaledSpec, ratelimit.ClassCurve): SetScale
// for every class, SetHealth (or Config.Health, polled at most once per
// Config.HealthInterval of AllowN's now) through each class's curve, and
// AllowClassN or ForClass to decide in a class. A published scale is an
// immutable set of script parameters behind an atomic pointer; each call
// takes its class's parameters with one atomic load and carries them to
// the script, and a batch sends calls of different scales in separate
// script calls (of one pipeline). A closed class (scale 0) is refused
// without a round trip. The keys' states carry over across scale changes
// (see Store.SetScale).
//
// # Clock
//
// The script reads Redis's clock (TIME, seconds + microseconds), once per
// script call (the decisions of one batch share an instant): all gateways
// share it, and skew between gateway clocks does not matter. The now
// argument of AllowN is ignored. A time earlier than a key's stored time
// (Redis's clock stepped back, or a failover to a replica whose clock is
// behind) is a negative gap, clamped to zero as in the in-memory
// algorithms. Redis ≥ 5 replicates a script's effects, not the script, so
// reading TIME in a script that writes is allowed. (The package's tests
// give the script an explicit now instead, through an unexported switch,
// to compare it with the in-memory algorithms on a controlled timeline.)
//
// # Batching
//
// AllowN puts its decision on a bounded queue (Config.QueueSize; when full,
// AllowN fails at once with ErrQueueFull) and waits. Config.Workers
// goroutines each take every waiting decision (up to Config.MaxBatch) and
// send them in one round trip. No decision waits for a batch to fill: a
// lone call goes out at once, and under load the calls that arrive while
// the workers' round trips are out form the next batches. The rule stores
// of one Stores share one queue and one set of workers, so that the
// decisions of different rules share round trips, and the rules of one
// request can be decided in one (Stores.AllowJoint).
//
// A batch is decided by as few script calls as Redis allows: one EVALSHA
// with all its keys on a standalone server or Sentinel's master (a
// *redis.Client); one per hash slot on a Cluster (go-redis then sends each
// to its node); one per hash tag on any other client (Ring). Redis then
// parses one command, sets up one script, reads TIME once and, for GCRA,
// reads all the keys with one MGET per call, not per decision: each
// decision costs Redis little more than its SET. The requests of one call
// are decided one after another, exactly as separate calls would be. For
// the leaky queue and the sliding log, whose scripts loop per unit of
// cost, a call carries at most 4096 units (a larger single decision goes
// alone), so no batch holds Redis long.
//
// A NOSCRIPT reply (the server restarted, SCRIPT FLUSH, a new Cluster node)
// is answered by re-sending those calls with EVAL, which loads the script;
// Load preloads it (worth doing at start-up, so the first decisions do not
// spend their Timeout on it). Close stops the workers; no goroutine
// outlives it.
//
// # Failure
//
// Each AllowN waits at most Config.Timeout (default 5 ms) from the call,
// queueing included, or until its ctx ends, and then returns an error
// (ErrTimeout or the ctx's error); errors from Redis or the network are
// returned too. Every error wraps ratelimit.ErrStoreUnavailable. A call
// whose caller gave up before it was sent is not sent; one already sent may
// still be counted by Redis.
//
// A worker's round trip is given the deadline of the last caller in its
// batch. go-redis applies a context's deadline to the socket only when the
// client's ContextTimeoutEnabled option is set; set it (and keep the
// client's MaxRetries and DialTimeout low), or a hung Redis holds a worker,
// and Close, for the client's ReadTimeout (3 s by default). Callers are not
// held either way: each gives up at its own Timeout.
//
// A round trip whose pooled connection turns out dead — closed or reset by
// the peer, as every connection opened before a Redis restart is — is sent
// again at once on the pool's next idle connection, then once on a fresh
// one, while its callers wait: a restart costs no decision, and does not
// open the breakers again as Redis returns. A fresh connection that dies
// too fails the round trip. If Redis ran the script and died before
// answering, the retry spends the request's tokens twice (the strict side).
//
// What a failed decision means for the request — serve (fail open, with a
// loose local floor) or refuse (fail closed, 503) — and the circuit breaker
// that stops calling a dead Redis are ratelimit.Guarded's job: wrap the
// Store in ratelimit.NewGuarded.
//
// # Rules files
//
// Stores does the wrapping for a whole rules file (package
// ratelimit/rules): its ForRule is an httplimit.Config.Store, and gives each
// rule a Store keyed Prefix:{key}:rule-id inside the rule's fail mode (a
// breaker, and for fail-open rules a loose in-memory floor), with optional
// token leasing (ratelimit.Leased, all keys or hot keys only) and an
// optional local tier (ratelimit.Tiered):
//
//	stores, err := redisstore.NewStores(rdb, redisstore.StoresConfig{})
//	defer stores.Close()
//	lim, err := httplimit.New(set, httplimit.Config{Store: stores.ForRule})
//	defer lim.Close()
//
// Its stores are ratelimit.JointKeyed: httplimit decides all of a request's
// rules in one Stores.AllowJoint, one round trip and one Timeout for all of
// them, each with its own fail mode; a rule's refusal spends none of the
// other rules' units (on a Cluster: of the rules whose keys share its slot;
// see AllowJoint for the exceptions).
//
// # Logging
//
// go-redis prints its own lines ("connection pool: failed to dial after 1
// attempts", once per failed dial: per request while Redis is down) through
// a process-wide logger of its own. InstallLogger routes them to log/slog
// through a rate gate (Logger); nothing in this package installs it by
// itself, since that would replace a logger the program set.
package redisstore

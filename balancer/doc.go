// Package balancer chooses which endpoint receives the next request (seed
// 001, "Load balancing: algorithms") and keeps the set of endpoints it
// chooses from: weights, health, drain, slow start and panic mode, published
// as immutable snapshots so that a pick takes no lock.
//
// # Endpoint sets
//
// A Set holds the endpoints discovery reports (Update) and their states:
// Healthy, SlowStarting, Draining, Ejected (outlier detection, until an
// instant) and Unhealthy (active checks). Every change that alters what a
// picker may see builds a new Snapshot in O(n) and publishes it with one
// atomic store; a pick loads it with one atomic load (Set.Current, which
// also republishes when a slow-start step or an ejection deadline has
// passed). Each endpoint keeps one EndpointState — requests in flight and a
// peak-sensitive latency EWMA, updated lock-free by Start and Done — for as
// long as its address stays in the set, so requests in flight across an
// update are counted where they belong.
//
//   - Slow start (SetConfig.SlowStart): an endpoint that comes back into
//     service (unhealthy or ejected, then healthy) or joins a running set
//     ramps its weight linearly, weight × max(SlowStartMin, elapsed/window),
//     as Envoy does with aggression 1. As in HAProxy, endpoints present when
//     the set starts are not ramped. A server just back has cold caches and
//     empty pools, yet looks the most attractive to a least-request picker
//     (nothing in flight); without a ramp it gets a small thundering herd.
//   - Panic mode (SetConfig.PanicThreshold, default 50% as in Envoy): when
//     fewer than that share of the endpoints that are not draining are
//     healthy, every one of them becomes eligible. "Most servers down" is
//     more often a broken check than broken servers; failing open spreads
//     the load instead of crushing the few survivors.
//   - Drain (Set.Drain): no new requests, in-flight requests continue. An
//     operator's instruction, so never overridden, not even in panic mode.
//
// # Pickers
//
// Two interfaces. Picker works on any Loads — a set size and per-endpoint
// load — and serves fixed sets and the simulator (whose draw order it
// reproduces exactly). SetPicker works on a Snapshot and sees effective
// weights, latency estimates and the caller's now; Loaded wraps a Picker as
// a SetPicker.
//
//   - RoundRobin (Picker): endpoint k mod n for the k-th pick. One atomic
//     counter, blind to speed, request size and busyness.
//   - SmoothWRR (Picker) and SmoothWeighted (SetPicker): Nginx's smooth
//     weighted round robin (ngx_http_upstream_round_robin, 2012). Every
//     endpoint keeps a current value, 0 at the start; each pick adds every
//     endpoint's weight to its current value, the highest current value wins
//     (the earliest on ties), and the winner subtracts the total weight.
//     Weights 5:1:1 give a a b a c a a; any run of total-weight consecutive
//     picks gives each endpoint exactly its weight, interleaved rather than
//     in blocks (20:20:1 over 41 picks never repeats an endpoint, where naive
//     WRR sends 20 in a row). SmoothWeighted follows slow-start ramps. O(n)
//     under a mutex per pick.
//   - Random (Picker): endpoint floor(u·n), u uniform in [0, 1). No shared
//     state, so any number of balancer instances need no coordination;
//     uneven in the short run.
//   - WeightedRandom (SetPicker): endpoint i with probability weight ÷ total,
//     O(1) through an alias table built when the snapshot is published.
//     Shares follow weights (and slow-start ramps) at every load.
//   - LeastOutstanding (Picker; on sets through Loaded): a full scan for the
//     least-loaded endpoint (Envoy's full-scan least request, HAProxy
//     leastconn), starting at k mod n for the k-th pick and going round the
//     set, a strictly smaller load winning. It adapts to speed by Little's
//     law (a slow endpoint holds more requests in flight), but every
//     balancer with the same stale view sends to the same "emptiest"
//     endpoint, and an endpoint that fails fast looks emptiest. O(n).
//   - P2C (Picker): the power of two random choices (Mitzenmacher, "The
//     Power of Two Choices in Randomized Load Balancing", 1996/2001): draw
//     two distinct endpoints a = floor(u₁·n), b = floor(u₂·(n−1)), b
//     incremented if b ≥ a; send to b if its load is strictly smaller, else
//     to a. O(1), nearly as good as a full scan and far more robust to stale
//     load information. Nginx "random two least_conn" and HAProxy "balance
//     random(2)" work this way.
//   - PowerOfD (Picker): d draws with replacement, best = floor(u·n) then
//     d−1 more candidates, each winning if its load is strictly smaller. With
//     n balls into n bins the maximum load is about ln n / ln ln n for d = 1
//     and ln ln n / ln d + O(1) for d ≥ 2 (Azar, Broder, Karlin, Upfal,
//     "Balanced Allocations", 1994).
//   - LeastRequest (SetPicker): Envoy's least request. With equal weights it
//     is P2C (d = 2) or PowerOfD (d > 2) over requests in flight, decision
//     for decision. With unequal weights it draws d candidates in proportion
//     to their weights and keeps the one with the highest Envoy dynamic
//     weight, weight / (active + 1)^bias (bias 1 by default), so under load
//     in-flight counts follow the weights.
//   - PeakEWMA (SetPicker): Finagle's and Linkerd's peak EWMA. Cost =
//     latency estimate × (in flight + 1) ÷ weight, where the estimate jumps
//     up at once on a slow response and decays with time constant τ
//     (SetConfig.LatencyDecay, 10 s); P2C on that cost. It moves traffic off
//     an endpoint after one slow response, before requests queue on it; an
//     endpoint left alone decays and is tried again.
//   - Consistent hashing (ring hash, Maglev) keys a request to an endpoint;
//     their tables are built once per snapshot membership and cached by
//     Snapshot.Table (or at publication, SetConfig.Tables).
//
// # Which to choose
//
// Evidence from seed 001's experiment (spillway sim lb-algorithms: 10
// servers of speeds 1.5 to 0.75, Poisson arrivals at 65% of capacity, 90%
// small and 10% big jobs, 50,000 requests, the same trace for all):
//
//	algorithm                  mean ms   p99 ms
//	Round robin                  206.1   1944.5
//	Random                       135.2   1377.4
//	Least connections             11.9    124.1
//	Power of two choices          22.0    187.4
//	Least conn, 50 ms stale       53.6    364.3
//	Power of two, 50 ms stale     31.7    232.1
//
// Blind pickers (round robin, random) queue work on slow servers; counting
// requests in flight cuts the mean tenfold. With an exact view the full scan
// wins, but with a view 50 ms stale — every balancer of a fleet sees the
// others' requests late — two choices beat it, because the scan sends every
// request to the same "emptiest" server. And balls into bins (spillway sim
// balls-into-bins): 10⁶ balls into 10⁶ bins give a fullest bin of 9 with
// one choice and 4 with two.
//
//   - LeastRequest (d = 2): the default for request balancing — many
//     balancer instances, endpoints of unequal speed, requests of unequal
//     size. Weighted when weights or slow start differ.
//   - PeakEWMA: when latency differs between endpoints for reasons in-flight
//     counts show late (a GC pause, a noisy neighbour, a remote zone), and
//     requests are short enough that one response is a useful signal.
//   - LeastOutstanding through Loaded: one balancer with an exact view and a
//     small set (O(n) per pick).
//   - SmoothWeighted / SmoothWRR: fixed capacity ratios and a predictable,
//     evenly interleaved sequence; WeightedRandom for the same shares without
//     shared state between balancers.
//   - RoundRobin or Random: identical endpoints and uniform requests.
//   - Ring hash or Maglev: when the same key must reach the same endpoint
//     (cache locality, sessions); Maglev for faster lookups and even spread,
//     the ring for minimal disruption when endpoints change.
//
// # Loads and randomness
//
// Least-loaded Pickers read loads through the Loads interface: InFlight holds
// atomic per-endpoint counters for fixed sets, IntLoads views a []int (the
// simulator's possibly stale queue lengths), Size is a set without load
// information, and a *Snapshot is a Loads of in-flight counts. Random
// pickers draw from a Rand; nil means math/rand/v2's global generator, which
// is safe for concurrent use. The simulator passes *rng.Mulberry32 and
// replays the reference experiments' draws exactly, so the draw order above
// is part of the contract.
//
// # Concurrency and cost
//
// No pick allocates. RoundRobin and LeastOutstanding use one atomic counter
// each and are safe for concurrent use; Random, P2C, PowerOfD,
// WeightedRandom, LeastRequest and PeakEWMA hold no mutable state and are as
// safe as their Rand (the default is). SmoothWRR and SmoothWeighted need all
// their current values updated together: Nginx keeps them per worker
// process without a lock, and these guard them with their own small mutex,
// held for one pass over the weights. When many goroutines share a large
// weighted set, give each shard its own; each then interleaves smoothly on
// its own. Loads are read one at a time while other goroutines change them;
// a pick needs no consistent snapshot of all loads. Set mutations take the
// Set's mutex, which picks never wait for.
package balancer

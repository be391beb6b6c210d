// Package balancer chooses which endpoint of a set receives the next request
// (seed 001, "Load balancing: algorithms"). It holds the pickers only: which
// endpoints are eligible (health, slow start, panic mode) and how endpoint
// sets are published are decided elsewhere; a picker is handed the current
// set on every call and returns the index of its choice.
//
// # Pickers
//
//   - RoundRobin: endpoint k mod n for the k-th pick. One atomic counter,
//     blind to speed, request size and busyness.
//   - SmoothWRR: Nginx's smooth weighted round robin (ngx_http_upstream_round_robin,
//     2012). Every endpoint keeps a current value, 0 at the start; each pick adds
//     every endpoint's weight to its current value, the highest current value wins
//     (the earliest on ties), and the winner subtracts the total weight. Weights
//     5:1:1 give a a b a c a a; any run of total-weight consecutive picks gives
//     each endpoint exactly its weight, interleaved rather than in blocks (20:20:1
//     over 41 picks never repeats an endpoint, where naive WRR sends 20 in a row).
//   - Random: endpoint floor(u·n), u uniform in [0, 1). No shared state, so any
//     number of balancer instances need no coordination; uneven in the short run.
//   - LeastOutstanding: a full scan for the least-loaded endpoint (Envoy "least
//     request", HAProxy leastconn), starting at k mod n for the k-th pick and
//     going round the set, a strictly smaller load winning. It adapts to speed by
//     Little's law (a slow endpoint holds more requests in flight), but every
//     balancer with the same stale view sends to the same "emptiest" endpoint,
//     and an endpoint that fails fast looks emptiest. O(n) per pick.
//   - P2C: the power of two random choices (Mitzenmacher, "The Power of Two
//     Choices in Randomized Load Balancing", 1996/2001): draw two distinct
//     endpoints a = floor(u₁·n), b = floor(u₂·(n−1)), b incremented if b ≥ a;
//     send to b if its load is strictly smaller, else to a. O(1), nearly as good
//     as a full scan and far more robust to stale load information. Envoy least
//     request with equal weights, Nginx "random two least_conn" and HAProxy
//     "balance random(2)" work this way.
//   - PowerOfD: d draws with replacement, best = floor(u·n) then d−1 more
//     candidates c = floor(u·n), c winning if its load is strictly smaller. With
//     n balls into n bins the maximum load is about ln n / ln ln n for d = 1 and
//     ln ln n / ln d + O(1) for d ≥ 2 (Azar, Broder, Karlin, Upfal, "Balanced
//     Allocations", 1994).
//
// Which to use: P2C over in-flight counts is the default choice for request
// balancing with many balancer instances or endpoints of unequal speed;
// LeastOutstanding when one balancer sees exact counts and n is small;
// SmoothWRR for fixed capacity ratios; RoundRobin or Random when endpoints
// are identical and requests uniform.
//
// # Loads and randomness
//
// Least-loaded pickers read loads through the Loads interface: InFlight holds
// atomic per-endpoint counters for production, IntLoads views a []int (the
// simulator's possibly stale queue lengths), Size is a set without load
// information. Random pickers draw from a Rand; nil means math/rand/v2's
// global generator, which is safe for concurrent use. The simulator passes
// *rng.Mulberry32 and replays the reference experiments' draws exactly, so
// the draw order above is part of the contract.
//
// # Concurrency and cost
//
// No pick allocates. RoundRobin and LeastOutstanding use one atomic counter
// each and are safe for concurrent use; Random, P2C and PowerOfD hold no
// mutable state and are as safe as their Rand (the default is). SmoothWRR
// needs all its current values updated together: Nginx keeps them per worker
// process without a lock, and SmoothWRR guards them with its own small mutex,
// held for one pass over the weights. When many goroutines share a large
// weighted set, give each shard its own SmoothWRR; each then interleaves
// smoothly on its own. Loads are read one at a time while other goroutines
// change them; a pick needs no consistent snapshot of all loads.
package balancer

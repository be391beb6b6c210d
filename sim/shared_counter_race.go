package sim

import (
	"cmp"
	"slices"

	"github.com/spillwayhq/spillway/ratelimit"
	"github.com/spillwayhq/spillway/rng"
)

var sharedCounterRace = Scenario{
	Name:    "shared-counter-race",
	Ref:     "shared_counter_race",
	Summary: "two nodes share a counter: GET then SET races past the limit, one atomic step does not",
	Bind: func(f *Flags) Runner {
		seed := f.Seed("seed", 99, "random seed of arrival times, nodes and store latencies")
		limit := f.Int("limit", 100, Positive, 1e9, "requests allowed in the window (at most 1e9)")
		requests := f.Int("requests", 1000, Positive, 1e6, "requests, spread uniformly over 200 ms (at most 1e6)")
		return func() (*Report, error) { return runSharedCounterRace(*seed, *limit, *requests) }
	},
}

// The reference's fixed shape: arrivals within 200 ms, store round trips of
// 1 to 3 ms, all inside one rate-limit window.
const (
	raceSpreadMS = 200
	raceWindowS  = 60 // longer than the experiment: one window
)

// raceEvent is one store call: the GET (or the atomic step) of request id
// at the store, or the moment its reply reaches the node, which then writes.
type raceEvent struct {
	t     float64 // ms
	id    int
	nodeB bool
	write bool
}

func runSharedCounterRace(seed uint32, limit, requests int) (*Report, error) {
	fw, err := ratelimit.NewFixedWindow(ratelimit.Quota{Limit: limit, Window: raceWindowS})
	if err != nil {
		return nil, Badf("limit", "%v", err)
	}
	ev := raceEvents(rng.New(seed), requests)
	r := &Report{}
	r.Println("method             admitted  over limit  final counter      per node")
	table := r.Table("methods", "method", "admitted", "over_limit", "final_counter", "node_a", "node_b")
	for _, m := range []string{"GET then SET v+1", "GET then INCR", "atomic INCR"} {
		var res raceResult
		if m == "atomic INCR" {
			res = raceAtomic(ev, fw)
		} else {
			res = raceRacy(ev, limit, requests, m == "GET then SET v+1")
		}
		r.Println(PadEnd(m, 18) + PadStart(Int(res.admitted), 9) + PadStart(Int(res.admitted-limit), 12) +
			PadStart(Int(res.counter), 14) + PadStart("A "+Int(res.perNode[0])+" / B "+Int(res.perNode[1]), 16))
		table.Add(m, res.admitted, res.admitted-limit, res.counter, res.perNode[0], res.perNode[1])
	}
	return r, nil
}

// raceEvents draws each request's arrival, node and round trip in the
// reference's order and sorts the calls by time (stable, as JavaScript's
// sort is).
func raceEvents(r *rng.Mulberry32, n int) []raceEvent {
	ev := make([]raceEvent, 0, 2*n)
	for i := range n {
		t := r.Float64() * raceSpreadMS
		nodeB := !(r.Float64() < 0.5)
		rtt := 1 + 2*r.Float64()
		ev = append(ev, raceEvent{t: t, id: i, nodeB: nodeB}, raceEvent{t: t + rtt, id: i, nodeB: nodeB, write: true})
	}
	slices.SortStableFunc(ev, func(a, b raceEvent) int { return cmp.Compare(a.t, b.t) })
	return ev
}

type raceResult struct {
	admitted int
	counter  int    // the store's counter at the end
	perNode  [2]int // admitted by node A and node B
}

func (res *raceResult) admit(nodeB bool) {
	res.admitted++
	if nodeB {
		res.perNode[1]++
	} else {
		res.perNode[0]++
	}
}

// raceRacy runs a deliberately wrong client protocol: the node reads the
// counter (GET), decides on the value it read once the reply arrives, and
// then writes — SET value+1 (lost updates) or INCR (no lost updates, but the
// decision was made on a stale value).
func raceRacy(ev []raceEvent, limit, requests int, set bool) raceResult {
	var res raceResult
	seen := make([]int, requests)
	for _, e := range ev {
		if !e.write {
			seen[e.id] = res.counter // GET: stale by the time the node decides
			continue
		}
		if seen[e.id] >= limit {
			continue
		}
		res.admit(e.nodeB)
		if set {
			res.counter = seen[e.id] + 1
		} else {
			res.counter++
		}
	}
	return res
}

// raceAtomic runs the right protocol: when a request's call reaches the
// store, the store does one indivisible step — INCR the key (the counter the
// reference reports, which counts refused requests too) and the library's
// fixed-window decision on the same key, which admits while fewer than limit
// were admitted in the window.
func raceAtomic(ev []raceEvent, fw *ratelimit.FixedWindow) raceResult {
	var res raceResult
	var state ratelimit.FixedWindowState
	for _, e := range ev {
		if e.write {
			continue // the reply carries the store's decision; nothing to write
		}
		res.counter++
		if fw.Decide(&state, e.t/1000, 1).Allowed {
			res.admit(e.nodeB)
		}
	}
	return res
}

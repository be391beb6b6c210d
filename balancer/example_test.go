package balancer_test

import (
	"fmt"
	"net/http/httptest"

	"github.com/spillwayhq/spillway/balancer"
)

func ExampleSmoothWRR() {
	p, err := balancer.NewSmoothWRR([]int{5, 1, 1})
	if err != nil {
		panic(err)
	}
	set := balancer.Size(p.Len())
	var cur []int64
	for k := 0; k < 7; k++ {
		i, _ := p.Pick(set)
		cur = p.Current(cur)
		fmt.Printf("%c %v\n", 'a'+i, cur)
	}
	// Output:
	// a [-2 1 1]
	// a [-4 2 2]
	// b [1 -4 3]
	// a [-1 -3 4]
	// c [4 -2 -2]
	// a [2 -1 -1]
	// a [0 0 0]
}

// A proxy counts requests in flight per endpoint and lets P2C choose.
func ExampleP2C() {
	inflight := balancer.NewInFlight(2)
	inflight.Inc(0) // endpoint 0 is busy with three requests
	inflight.Inc(0)
	inflight.Inc(0)

	var p balancer.P2C // default Rand: math/rand/v2
	i, err := p.Pick(inflight)
	if err != nil {
		panic(err)
	}
	inflight.Inc(i)
	// ... send the request to endpoint i, then:
	inflight.Dec(i)
	fmt.Println("sent to endpoint", i)
	// Output: sent to endpoint 1
}

func ExampleNewSmoothWRR_error() {
	_, err := balancer.NewSmoothWRR([]int{3, -1})
	fmt.Println(err)
	// Output: balancer: weights[1]: must not be negative, got -1
}

// Least request over a Set: of two endpoints drawn, the one with fewer
// requests in flight gets the request. With three endpoints and the first
// one busy, every pair drawn holds one of the idle two, so the busy one is
// never chosen while it stays busy.
func ExampleLeastRequest() {
	set, err := balancer.NewSet(balancer.SetConfig{})
	if err != nil {
		panic(err)
	}
	set.Update(0, []balancer.Endpoint{{Addr: "10.0.0.1:80"}, {Addr: "10.0.0.2:80"}, {Addr: "10.0.0.3:80"}})
	busy := set.Snapshot().Endpoint(0)
	for range 5 {
		busy.Start() // five requests in flight on 10.0.0.1
	}
	p := &balancer.LeastRequest{} // d = 2, bias 1, math/rand/v2
	picks := map[string]int{}
	for range 1000 {
		e, err := set.Pick(1, p)
		if err != nil {
			panic(err)
		}
		picks[e.Addr()]++          // Pick counted the request on e (Start) ...
		e.Done(1.002, 0.002, true) // ... and Done uncounts it: answered in 2 ms
	}
	fmt.Println(picks["10.0.0.1:80"], picks["10.0.0.2:80"]+picks["10.0.0.3:80"])
	// Output: 0 1000
}

// Peak EWMA prefers the endpoint with the lower latency estimate × (in
// flight + 1); one slow answer raises an estimate at once, so traffic
// moves away before requests queue there.
func ExamplePeakEWMA() {
	set, err := balancer.NewSet(balancer.SetConfig{}) // estimates decay with τ = 10 s
	if err != nil {
		panic(err)
	}
	set.Update(0, []balancer.Endpoint{{Addr: "a:80"}, {Addr: "b:80"}})
	snap := set.Snapshot()
	a, b := snap.Endpoint(0), snap.Endpoint(1)
	for _, e := range []*balancer.EndpointState{a, b} {
		e.Start()
		e.Done(1, 0.010, true) // both answered in 10 ms
	}
	var p balancer.PeakEWMA
	a.Start() // a request in flight on a: a costs 10 ms × 2, b 10 ms × 1
	e, err := set.Pick(1.1, &p)
	if err != nil {
		panic(err)
	}
	fmt.Println("a busy:", e.Addr())
	e.Done(1.11, 0.010, true)
	a.Done(1.12, 0.010, true)

	b.Start()
	b.Done(2, 0.400, true) // one slow answer from b: its estimate jumps to 400 ms
	e, err = set.Pick(2.1, &p)
	if err != nil {
		panic(err)
	}
	fmt.Printf("b slow: %s (b %.0f ms, a %.0f ms)\n", e.Addr(), 1000*b.Latency(2.1), 1000*a.Latency(2.1))
	e.Done(2.11, 0.010, true)
	// Output:
	// a busy: b:80
	// b slow: a:80 (b 396 ms, a 9 ms)
}

// A ring hash sends every key to the same endpoint; with exact points per
// weight, removing an endpoint moves only the keys it held.
func ExampleNewRing() {
	ids := []string{"cache-1:11211", "cache-2:11211", "cache-3:11211"}
	ring, err := balancer.NewRing(ids, nil, balancer.RingConfig{PointsPerWeight: 100}) // nil weights: all 1
	if err != nil {
		panic(err)
	}
	smaller, err := balancer.NewRing(ids[:2], nil, balancer.RingConfig{PointsPerWeight: 100}) // cache-3 gone
	if err != nil {
		panic(err)
	}
	moved, kept := 0, 0
	for k := range 1000 {
		key := balancer.HashString(fmt.Sprint("user-", k))
		before, after := ring.ID(ring.Lookup(key)), smaller.ID(smaller.Lookup(key))
		switch {
		case before == after:
			kept++
		case before == "cache-3:11211":
			moved++
		default:
			fmt.Println("moved between endpoints that stayed:", key)
		}
	}
	fmt.Println("points:", ring.Size())
	fmt.Println("kept:", kept, "moved off cache-3:", moved)
	fmt.Println("user-42 →", ring.ID(ring.Lookup(balancer.HashString("user-42"))))
	// Output:
	// points: 300
	// kept: 642 moved off cache-3: 358
	// user-42 → cache-3:11211
}

// Maglev looks a key up in a table of prime size filled in turns, so
// endpoints get nearly equal shares (or shares by weight) and a lookup is
// one modulo. Keys come from requests through a HashPolicy.
func ExampleNewMaglev() {
	ids := []string{"10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80"}
	table, err := balancer.NewMaglev(ids, []int{2, 1, 1}, balancer.MaglevConfig{TableSize: 65537})
	if err != nil {
		panic(err)
	}
	share := make([]int, table.Len())
	for h := range uint64(100000) {
		share[table.Lookup(balancer.HashString(fmt.Sprint(h)))]++
	}
	fmt.Println("shares of 100000 keys:", share)

	policy := balancer.HashPolicy{Header: "X-User-Id", ClientIP: true} // the header, else the client's IP
	owner := func(path, ip, user string) string {
		r := httptest.NewRequest("GET", path, nil)
		r.RemoteAddr = ip + ":40000"
		if user != "" {
			r.Header.Set("X-User-Id", user)
		}
		k, ok := policy.Key(r)
		if !ok {
			return "no key"
		}
		return table.ID(table.Lookup(k))
	}
	fmt.Println("bob at home:", owner("/cart", "192.0.2.1", "bob"))
	fmt.Println("bob on the move:", owner("/checkout", "198.51.100.8", "bob"))
	fmt.Println("no user header:", owner("/", "198.51.100.8", ""))
	// Output:
	// shares of 100000 keys: [50282 24841 24877]
	// bob at home: 10.0.0.3:80
	// bob on the move: 10.0.0.3:80
	// no user header: 10.0.0.2:80
}

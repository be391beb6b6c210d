package balancer_test

import (
	"fmt"

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

package discovery_test

import (
	"context"
	"fmt"

	"github.com/spillwayhq/spillway/balancer"
	"github.com/spillwayhq/spillway/discovery"
)

func ExampleStatic() {
	ctx, cancel := context.WithCancel(context.Background())
	src := discovery.Static(
		balancer.Endpoint{Addr: "10.0.0.2:8080", Weight: 2},
		balancer.Endpoint{Addr: "10.0.0.1:8080"},
	)
	err := src.Run(ctx, func(eps []balancer.Endpoint) {
		for _, e := range eps {
			fmt.Println(e.Addr, e.Weight)
		}
		cancel() // one list is all this example wants
	})
	fmt.Println(err)
	// Output:
	// 10.0.0.1:8080 0
	// 10.0.0.2:8080 2
	// context canceled
}

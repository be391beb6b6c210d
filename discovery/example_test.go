package discovery_test

import (
	"context"
	"fmt"
	"log"
	"time"

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

// A DNS source over SRV records, feeding an endpoint set. Run blocks, so it
// gets its own goroutine; cancelling ctx stops it.
func ExampleDNS() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	src := &discovery.DNS{
		Name:    "_http._tcp.backend.example.com",
		SRV:     true,
		MaxTTL:  time.Minute,
		OnError: func(err error) { log.Printf("discovery: %v (keeping the last list)", err) },
	}
	go src.Run(ctx, func(eps []balancer.Endpoint) {
		log.Printf("backend: %d endpoints", len(eps)) // hand eps to the endpoint set here
	})
}

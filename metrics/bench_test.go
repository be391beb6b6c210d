package metrics

import (
	"bufio"
	"net"
	"testing"

	"github.com/spillwayhq/spillway/upstream"
)

// BenchmarkProxyMetrics is the proof of cost: one proxied
// HTTP/1.1 request (kept-alive client → proxy.Server → upstream pool →
// canned loopback backend and back), without (off) and with (on) this
// package's observers on the route and the cluster. allocs/op counts the
// whole process; the client and the backend allocate nothing per request.
// Compare the two with -count=6 and the medians.
func BenchmarkProxyMetrics(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "off"
		if on {
			name = "on"
		}
		b.Run(name, func(b *testing.B) {
			rt, addr := proxiedRoute(b, fixedBackend(b))
			if on {
				observe(b, rt)
			}
			b.ReportAllocs()
			b.SetParallelism(8)
			b.RunParallel(func(pb *testing.PB) {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					b.Error(err)
					return
				}
				defer c.Close()
				br := bufio.NewReaderSize(c, 4096)
				for pb.Next() {
					if exchange(c, br) != 200 {
						b.Error("bad response")
						return
					}
				}
			})
		})
	}
}

// BenchmarkRouteObserver is the request path's whole metrics cost: one
// Begin and one End (in flight ±1, a counter, a histogram).
func BenchmarkRouteObserver(b *testing.B) {
	m := newMetrics(b, Options{})
	o := m.Generation([]RouteInfo{{"api", "app"}}, nil).Route("api")
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		o.Begin()
		o.End(ending(200, true, float64(i%1000)*1e-4))
	}
}

// BenchmarkRouteObserverParallel is the same from every CPU on one route
// (the children's atomics shared).
func BenchmarkRouteObserverParallel(b *testing.B) {
	m := newMetrics(b, Options{})
	o := m.Generation([]RouteInfo{{"api", "app"}}, nil).Route("api")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			o.Begin()
			o.End(ending(200, true, 0.002))
		}
	})
}

// BenchmarkUpstreamError is a cluster's error path once the endpoint's
// child is resolved: a copy-on-write map lookup and an atomic add.
func BenchmarkUpstreamError(b *testing.B) {
	m := newMetrics(b, Options{})
	o := m.Generation(nil, []ClusterInfo{{Name: "app"}}).Cluster("app")
	o.UpstreamError("10.0.0.1:8080", upstream.KindTimeout)
	b.ReportAllocs()
	for b.Loop() {
		o.UpstreamError("10.0.0.1:8080", upstream.KindTimeout)
	}
}

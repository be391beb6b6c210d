package timeline

import (
	"encoding/json"
	"fmt"
	"testing"
)

// benchSnapshot is 5 routes and 5 clusters of 10 endpoints, each route
// with 4 reject keys and a 16-bucket histogram.
func benchSnapshot(i uint64) Snapshot {
	s := Snapshot{Metrics: true}
	bounds := make([]float64, 15)
	for b := range bounds {
		bounds[b] = float64(b+1) / 100
	}
	for r := range 5 {
		lat := make([]uint64, 16)
		for b := range lat {
			lat[b] = i * uint64(b+1)
		}
		s.Routes = append(s.Routes, RouteSnap{Name: fmt.Sprint("r", r), Cluster: fmt.Sprint("c", r), Requests: 50 * i, Good: 45 * i,
			Refused: 5 * i, Bounds: bounds, Latency: lat, Retries: i, Budget: 10, HasBudget: true,
			Rejects: map[string]uint64{"admit:limit sheddable": i, "admit:limit default": i, "ratelimit:ip none": i, "timeout none": i}})
		c := ClusterSnap{Name: fmt.Sprint("c", r), HasAdmission: true, Limit: 40, InFlight: 7, Breaker: "closed"}
		for e := range 10 {
			c.Endpoints = append(c.Endpoints, EndpointSnap{Address: fmt.Sprintf("10.0.%d.%d:80", r, e), State: "healthy"})
		}
		s.Clusters = append(s.Clusters, c)
	}
	return s
}

// BenchmarkSample: one second's sample of 5 routes × 10 endpoints.
func BenchmarkSample(b *testing.B) {
	tl := New()
	snaps := []Snapshot{benchSnapshot(1), benchSnapshot(2)}
	b.ReportAllocs()
	for i := range b.N {
		tl.Sample(at(float64(i)), snaps[i%2])
	}
}

// BenchmarkData15Minutes: the page's first load, 900 points of 5 routes ×
// 10 endpoints, encoded; reports its size.
func BenchmarkData15Minutes(b *testing.B) {
	tl := New()
	for i := range Points {
		tl.Sample(at(float64(i)), benchSnapshot(uint64(i)))
	}
	b.ReportAllocs()
	var n int
	for range b.N {
		body, err := json.Marshal(tl.Data(0))
		if err != nil {
			b.Fatal(err)
		}
		n = len(body)
	}
	b.ReportMetric(float64(n), "bytes/answer")
}

package discovery

import (
	"fmt"
	"strings"
	"testing"

	"github.com/spillwayhq/spillway/balancer"
)

// BenchmarkParseEndpoints1000 parses a 1,000-endpoint YAML file, what a File
// source does when the file changes.
func BenchmarkParseEndpoints1000(b *testing.B) {
	var sb strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&sb, "- addr: 10.0.%d.%d:8080\n  weight: %d\n  meta: {zone: z%d}\n", i/250, i%250, 1+i%5, i%3)
	}
	data := []byte(sb.String())
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := parseEndpoints("f", data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEmitterUnchanged1000 is the cost of a refresh that finds the same
// 1,000 endpoints (sort and compare, nothing sent).
func BenchmarkEmitterUnchanged1000(b *testing.B) {
	list := make([]balancer.Endpoint, 1000)
	for i := range list {
		list[i] = balancer.Endpoint{Addr: fmt.Sprintf("10.0.%d.%d:8080", i/250, i%250), Weight: 1}
	}
	em := emitter{update: func([]balancer.Endpoint) {}}
	em.send(append([]balancer.Endpoint(nil), list...))
	fresh := make([]balancer.Endpoint, len(list))
	b.ReportAllocs()
	for b.Loop() {
		copy(fresh, list)
		if em.send(fresh) {
			b.Fatal("an unchanged list was sent")
		}
	}
}

package config

import (
	"os"
	"testing"
)

// Loading is not on any request path; these give its cost for the record.
func BenchmarkParseMinimal(b *testing.B) {
	data, err := os.ReadFile("../examples/gateway/minimal.yaml")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := parse("minimal.yaml", data, noEnv); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseFull(b *testing.B) {
	dir := b.TempDir()
	writeCert(b, dir, "api", "api.example.com")
	writeCert(b, dir, "www", "www.example.com")
	data, err := os.ReadFile("../examples/gateway/full.yaml")
	if err != nil {
		b.Fatal(err)
	}
	lookup := env("SPILLWAY_TLS_DIR", dir, "UPSTREAM_TOKEN", "t")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := parse("../examples/gateway/full.yaml", data, lookup); err != nil {
			b.Fatal(err)
		}
	}
}

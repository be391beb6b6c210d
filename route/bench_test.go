package route

import (
	"strconv"
	"testing"
)

// tenRoutes is a small gateway's table: a few hosts, prefixes, a regex, a
// header route and a catch-all.
func tenRoutes() []Match {
	return []Match{
		{Hosts: []string{"admin.example.com"}, Prefix: "/"},
		{Hosts: []string{"api.example.com"}, Prefix: "/v1/users", Methods: []string{"GET"}},
		{Hosts: []string{"api.example.com"}, Prefix: "/v1/orders"},
		{Hosts: []string{"api.example.com"}, Regex: "/v[2-9]/.*"},
		{Hosts: []string{"*.example.com"}, Prefix: "/static/"},
		{Prefix: "/canary", Headers: []HeaderMatch{{Name: "x-env", Value: "canary"}}},
		{Hosts: []string{"www.example.com"}, Path: "/"},
		{Hosts: []string{"www.example.com"}, Prefix: "/blog"},
		{Hosts: []string{"*.example.org"}},
		{Prefix: "/"},
	}
}

// thousandHosts is one route per host, then a wildcard and a catch-all.
func thousandHosts() []Match {
	ms := make([]Match, 0, 1002)
	for i := range 1000 {
		ms = append(ms, Match{Hosts: []string{"svc" + strconv.Itoa(i) + ".example.com"}, Prefix: "/"})
	}
	return append(ms, Match{Hosts: []string{"*.example.com"}}, Match{})
}

func TestAllocLookup(t *testing.T) {
	tb := build(tenRoutes(), true)
	big := build(thousandHosts(), true)
	views := []struct {
		tb   *Table[int]
		r    req
		want int
	}{
		{tb, req{host: "api.example.com", path: "/v1/orders/7"}, 2},
		{tb, req{host: "api.example.com", path: "/v3/x"}, 3},
		{tb, req{host: "cdn.example.com", path: "/static/a.css"}, 4},
		// The header's first field does not match: the pooled scan runs.
		{tb, req{host: "x.org", path: "/canary", hdr: fields{"x-env", "stable", "x-env", "canary"}}, 5},
		{tb, req{host: "x.org", path: "/canary/1", hdr: fields{"x-env", "stable"}}, 9},
		{tb, req{host: "a.example.org", path: "/"}, 8},
		{big, req{host: "svc777.example.com", path: "/x"}, 777},
		{big, req{host: "other.example.com", path: "/x"}, 1000},
		{big, req{host: "example.net", path: "/x"}, 1001},
	}
	for _, c := range views {
		v := c.r.view()
		if _, i, _ := c.tb.Lookup(v); i != c.want {
			t.Fatalf("%+v: route %d, want %d", c.r, i, c.want)
		}
		n := testing.AllocsPerRun(200, func() { c.tb.Lookup(v) })
		if n != 0 && !raceEnabled {
			t.Errorf("%+v: %v allocations per Lookup, want 0", c.r, n)
		}
	}
}

func BenchmarkLookup(b *testing.B) {
	small, big := build(tenRoutes(), true), build(thousandHosts(), true)
	bigScan := build(thousandHosts(), false)
	cases := []struct {
		name string
		tb   *Table[int]
		r    req
	}{
		{"10routes/exact-host", small, req{host: "www.example.com", path: "/blog/2026/x"}},
		{"10routes/regex", small, req{host: "api.example.com", path: "/v3/items/1"}},
		{"10routes/header", small, req{host: "x.org", path: "/canary", hdr: fields{"x-env", "canary"}}},
		{"10routes/catch-all", small, req{host: "x.org", path: "/x"}},
		{"1000hosts/exact-host", big, req{host: "svc777.example.com", path: "/x"}},
		{"1000hosts/wildcard", big, req{host: "other.example.com", path: "/x"}},
		{"1000hosts/unfrozen-scan", bigScan, req{host: "svc777.example.com", path: "/x"}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			v := c.r.view()
			b.ReportAllocs()
			for b.Loop() {
				c.tb.Lookup(v)
			}
		})
	}
}

func BenchmarkRewritePrefix(b *testing.B) {
	buf := make([]byte, 0, 64)
	b.ReportAllocs()
	for b.Loop() {
		buf = RewritePrefix(buf[:0], "/api/users/7", "/api", "/v2")
	}
}

package route

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// lookupCase is one table of routes and the route each request must reach
// (-1: none).
type lookupCase struct {
	name   string
	routes []Match
	reqs   []struct {
		r    req
		want int
	}
}

type expect = struct {
	r    req
	want int
}

var lookupCases = []lookupCase{
	{"hosts exact, wildcard, any", []Match{
		{Hosts: []string{"api.example.com"}},
		{Hosts: []string{"*.example.com"}},
		{Hosts: []string{"example.com"}},
		{},
	}, []expect{
		{req{host: "api.example.com", path: "/"}, 0},
		{req{host: "a.example.com", path: "/"}, 1},
		{req{host: "a.b.example.com", path: "/"}, 1},
		{req{host: "example.com", path: "/"}, 2},
		{req{host: "xexample.com", path: "/"}, 3},
		{req{host: "other.org", path: "/"}, 3},
		{req{host: "", path: "/"}, 3},
	}},
	{"wildcard before exact wins", []Match{
		{Hosts: []string{"*.example.com"}},
		{Hosts: []string{"api.example.com"}},
	}, []expect{
		{req{host: "api.example.com", path: "/"}, 0},
		{req{host: "example.com", path: "/"}, -1},
	}},
	{"any-host route before host routes", []Match{
		{Prefix: "/health"},
		{Hosts: []string{"api.example.com"}},
		{Hosts: []string{"*.example.com"}, Path: "/x"},
	}, []expect{
		{req{host: "api.example.com", path: "/health"}, 0},
		{req{host: "api.example.com", path: "/x"}, 1},
		{req{host: "b.example.com", path: "/x"}, 2},
		{req{host: "b.example.com", path: "/health"}, 0},
		{req{host: "b.example.com", path: "/y"}, -1},
		{req{host: "other.org", path: "/health"}, 0},
		{req{host: "other.org", path: "/x"}, -1},
	}},
	{"nested wildcards", []Match{
		{Hosts: []string{"*.example.com"}, Prefix: "/a"},
		{Hosts: []string{"*.b.example.com"}},
		{Hosts: []string{"*.com"}},
	}, []expect{
		{req{host: "x.b.example.com", path: "/a/1"}, 0},
		{req{host: "x.b.example.com", path: "/b"}, 1},
		{req{host: "b.example.com", path: "/b"}, 2},
		{req{host: "b.example.com", path: "/a"}, 0},
		{req{host: "x.example.com", path: "/b"}, 2},
		{req{host: "a.org", path: "/a"}, -1},
		{req{host: "com", path: "/a"}, -1},
	}},
	{"host names normalised, star, repeats", []Match{
		{Hosts: []string{"API.Example.COM."}},
		{Hosts: []string{"a.com", "*.a.com", "a.com"}},
		{Hosts: []string{"b.com", "*"}, Path: "/star"},
		{Hosts: []string{"[::1]", "127.0.0.1"}},
	}, []expect{
		{req{host: "api.example.com", path: "/"}, 0},
		{req{host: "a.com", path: "/"}, 1},
		{req{host: "x.a.com", path: "/"}, 1},
		{req{host: "b.com", path: "/"}, -1},
		{req{host: "zz.org", path: "/star"}, 2},
		{req{host: "[::1]", path: "/"}, 3},
		{req{host: "127.0.0.1", path: "/"}, 3},
	}},
	{"path exact", []Match{{Path: "/a"}, {Path: "*"}}, []expect{
		{req{path: "/a"}, 0},
		{req{path: "/a/"}, -1},
		{req{path: "/ab"}, -1},
		{req{path: "/A"}, -1},
		{req{method: "OPTIONS", path: "*"}, 1},
	}},
	{"prefix on segment boundaries", []Match{{Prefix: "/api"}, {Prefix: "/static/"}, {Prefix: "/"}}, []expect{
		{req{path: "/api"}, 0},
		{req{path: "/api/"}, 0},
		{req{path: "/api/x/y"}, 0},
		{req{path: "/apix"}, 2},
		{req{path: "/ap"}, 2},
		{req{path: "/static"}, 2},
		{req{path: "/static/"}, 1},
		{req{path: "/static/a.css"}, 1},
		{req{path: "*"}, -1},
	}},
	{"regex anchored", []Match{{Regex: "/v[0-9]+/.*"}, {Regex: "/a|/b"}}, []expect{
		{req{path: "/v1/x"}, 0},
		{req{path: "/v12/"}, 0},
		{req{path: "/v/x"}, -1},
		{req{path: "/x/v1/x"}, -1},
		{req{path: "/v1"}, -1},
		{req{path: "/a"}, 1},
		{req{path: "/b"}, 1},
		{req{path: "/ab"}, -1},
		{req{path: "/a/x"}, -1},
	}},
	{"methods", []Match{{Methods: []string{"GET", "HEAD"}}, {Methods: []string{"POST"}, Path: "/p"}}, []expect{
		{req{method: "GET", path: "/"}, 0},
		{req{method: "HEAD", path: "/p"}, 0},
		{req{method: "POST", path: "/p"}, 1},
		{req{method: "POST", path: "/"}, -1},
		{req{method: "get", path: "/"}, -1},
	}},
	{"headers", []Match{
		{Headers: []HeaderMatch{{Name: "X-Debug", Present: true}}},
		{Headers: []HeaderMatch{{Name: "x-env", Value: "canary"}}},
		{Headers: []HeaderMatch{{Name: "User-Agent", Regex: "curl/.*"}}},
		{Path: "/inv", Headers: []HeaderMatch{{Name: "x-env", Value: "canary", Invert: true}}},
		{Path: "/absent", Headers: []HeaderMatch{{Name: "authorization", Present: true, Invert: true}}},
	}, []expect{
		{req{path: "/", hdr: fields{"x-debug", ""}}, 0},
		{req{path: "/", hdr: fields{"X-ENV", "canary"}}, 1},
		{req{path: "/", hdr: fields{"x-env", "stable", "x-env", "canary"}}, 1},
		{req{path: "/", hdr: fields{"x-env", "Canary"}}, -1},
		{req{path: "/", hdr: fields{"x-env", "canary, stable"}}, -1},
		{req{path: "/", hdr: fields{"user-agent", "curl/8.5.0"}}, 2},
		{req{path: "/", hdr: fields{"user-agent", "my curl/8.5.0"}}, -1},
		{req{path: "/inv", hdr: fields{"x-env", "stable"}}, 3},
		{req{path: "/inv"}, 3},
		{req{path: "/inv", hdr: fields{"x-env", "stable", "x-env", "canary"}}, 1},
		{req{path: "/absent", hdr: fields{"x-env", "stable"}}, 4},
		{req{path: "/absent", hdr: fields{"Authorization", "Bearer x"}}, -1},
		{req{path: "/"}, -1},
	}},
	{"all conditions at once", []Match{{
		Hosts:   []string{"*.example.com"},
		Prefix:  "/api",
		Methods: []string{"PUT"},
		Headers: []HeaderMatch{{Name: "x-a", Value: "1"}, {Name: "x-b", Present: true}},
	}}, []expect{
		{req{method: "PUT", host: "a.example.com", path: "/api/x", hdr: fields{"x-b", "", "x-a", "1"}}, 0},
		{req{method: "PUT", host: "example.com", path: "/api/x", hdr: fields{"x-b", "", "x-a", "1"}}, -1},
		{req{method: "PUT", host: "a.example.com", path: "/apix", hdr: fields{"x-b", "", "x-a", "1"}}, -1},
		{req{method: "GET", host: "a.example.com", path: "/api/x", hdr: fields{"x-b", "", "x-a", "1"}}, -1},
		{req{method: "PUT", host: "a.example.com", path: "/api/x", hdr: fields{"x-a", "1"}}, -1},
		{req{method: "PUT", host: "a.example.com", path: "/api/x", hdr: fields{"x-b", "", "x-a", "2"}}, -1},
	}},
	{"empty table", nil, []expect{{req{host: "a.com", path: "/"}, -1}}},
}

func TestLookup(t *testing.T) {
	for _, tc := range lookupCases {
		for _, freeze := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/frozen=%v", tc.name, freeze), func(t *testing.T) {
				tb := build(tc.routes, freeze)
				for _, e := range tc.reqs {
					val, i, ok := tb.Lookup(e.r.view())
					if i != e.want || ok != (e.want >= 0) || (ok && val != e.want) {
						t.Errorf("%+v: got route %d (value %d, ok %v), want %d", e.r, i, val, ok, e.want)
					}
				}
			})
		}
	}
}

// TestLookupOrders adds five overlapping routes in all 120 orders: a
// request must reach, of the routes that match it (written by hand), the
// one added first.
func TestLookupOrders(t *testing.T) {
	routes := map[string]Match{
		"A": {Hosts: []string{"api.example.com"}},
		"B": {Hosts: []string{"*.example.com"}, Prefix: "/v1"},
		"C": {Prefix: "/v1/users"},
		"D": {Hosts: []string{"*.com", "api.example.com"}, Methods: []string{"POST"}},
		"E": {Hosts: []string{"*.b.example.com"}},
	}
	cases := []struct {
		r     req
		match string // the routes that match r
	}{
		{req{method: "GET", host: "api.example.com", path: "/v1/users"}, "ABC"},
		{req{method: "POST", host: "api.example.com", path: "/x"}, "AD"},
		{req{method: "POST", host: "api.example.com", path: "/v1"}, "ABD"},
		{req{method: "POST", host: "a.b.example.com", path: "/v1/users/7"}, "BCDE"},
		{req{method: "GET", host: "a.b.example.com", path: "/x"}, "E"},
		{req{method: "GET", host: "b.example.com", path: "/v1"}, "B"},
		{req{method: "POST", host: "x.com", path: "/v1/users"}, "CD"},
		{req{method: "POST", host: "com", path: "/x"}, ""},
		{req{method: "GET", host: "x.org", path: "/v1/users"}, "C"},
	}
	for _, order := range permutations("ABCDE") {
		for _, freeze := range []bool{true, false} {
			var ms []Match
			for _, name := range order {
				ms = append(ms, routes[string(name)])
			}
			tb := build(ms, freeze)
			for _, c := range cases {
				want := strings.IndexAny(order, c.match) // first in this order that matches
				if c.match == "" {
					want = -1
				}
				if _, i, _ := tb.Lookup(c.r.view()); i != want {
					t.Errorf("order %s frozen=%v, %+v: got route %d, want %d", order, freeze, c.r, i, want)
				}
			}
		}
	}
}

// permutations returns every ordering of s's letters.
func permutations(s string) []string {
	if len(s) <= 1 {
		return []string{s}
	}
	var out []string
	for i := range s {
		for _, p := range permutations(s[:i] + s[i+1:]) {
			out = append(out, s[i:i+1]+p)
		}
	}
	return out
}

func TestAddErrors(t *testing.T) {
	cases := []struct {
		m      Match
		field  string
		reason string // a part of the reason
	}{
		{Match{Hosts: []string{"a.com", "*.*.a.com"}}, "Hosts[1]", "whole leftmost label"},
		{Match{Hosts: []string{"a.*.com"}}, "Hosts[0]", "whole leftmost label"},
		{Match{Hosts: []string{"a..com"}}, "Hosts[0]", "empty label"},
		{Match{Hosts: []string{".a.com"}}, "Hosts[0]", "empty label"},
		{Match{Hosts: []string{""}}, "Hosts[0]", "empty host name"},
		{Match{Hosts: []string{"*."}}, "Hosts[0]", "empty host name"},
		{Match{Hosts: []string{"http://a.com"}}, "Hosts[0]", "without its port"},
		{Match{Hosts: []string{"a.com:8080"}}, "Hosts[0]", "without its port"},
		{Match{Hosts: []string{"a.com/x"}}, "Hosts[0]", "not allowed in a host name"},
		{Match{Path: "/a", Prefix: "/a"}, "Path", "at most one of Path, Prefix and Regex"},
		{Match{Prefix: "/a", Regex: "/a"}, "Path", "at most one of Path, Prefix and Regex"},
		{Match{Path: "a"}, "Path", `must begin with "/"`},
		{Match{Prefix: "api"}, "Prefix", `must begin with "/"`},
		{Match{Regex: "/a("}, "Regex", "not an RE2 expression"},
		{Match{Regex: "/a)(/b"}, "Regex", "not an RE2 expression"},
		{Match{Regex: `/(?P<x>a)\1`}, "Regex", "not an RE2 expression"},
		{Match{Methods: []string{"GET", "get"}}, "Methods[1]", "case-sensitive"},
		{Match{Methods: []string{""}}, "Methods[0]", "empty method"},
		{Match{Methods: []string{"GE T"}}, "Methods[0]", "not allowed in a method"},
		{Match{Headers: []HeaderMatch{{Present: true}}}, "Headers[0].Name", "empty header name"},
		{Match{Headers: []HeaderMatch{{Name: "x", Present: true}, {Name: "x y", Present: true}}}, "Headers[1].Name", "not allowed in a header name"},
		{Match{Headers: []HeaderMatch{{Name: "x"}}}, "Headers[0].Value", "exactly one of Value, Regex and Present"},
		{Match{Headers: []HeaderMatch{{Name: "x", Value: "a", Present: true}}}, "Headers[0].Value", "exactly one of Value, Regex and Present"},
		{Match{Headers: []HeaderMatch{{Name: "x", Regex: "("}}}, "Headers[0].Regex", "not an RE2 expression"},
	}
	for _, c := range cases {
		var tb Table[int]
		if err := tb.Add(Match{}, 0); err != nil {
			t.Fatal(err)
		}
		err := tb.Add(c.m, 1)
		var me *MatchError
		if !errors.As(err, &me) || !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: got %v, want a *MatchError", c.m, err)
			continue
		}
		if me.Route != 1 || me.Field != c.field || !strings.Contains(me.Reason, c.reason) {
			t.Errorf("%+v: got route %d field %q reason %q, want route 1 field %q reason with %q", c.m, me.Route, me.Field, me.Reason, c.field, c.reason)
		}
		if !strings.HasPrefix(err.Error(), "route 1: "+c.field+": ") {
			t.Errorf("%+v: message %q", c.m, err)
		}
		if tb.Len() != 1 {
			t.Errorf("%+v: a refused route was added (Len %d)", c.m, tb.Len())
		}
		if verr := c.m.Validate(); verr == nil || !strings.HasPrefix(verr.Error(), "route: "+c.field+": ") {
			t.Errorf("%+v: Validate = %v", c.m, verr)
		}
	}
}

func TestFrozen(t *testing.T) {
	var tb Table[string]
	if err := tb.Add(Match{Path: "/a"}, "a"); err != nil {
		t.Fatal(err)
	}
	tb.Freeze()
	tb.Freeze()
	if err := tb.Add(Match{Path: "/b"}, "b"); !errors.Is(err, ErrFrozen) {
		t.Fatalf("Add after Freeze = %v, want ErrFrozen", err)
	}
	if v, i, ok := tb.Lookup(req{path: "/a"}.view()); v != "a" || i != 0 || !ok {
		t.Fatalf("Lookup /a = %q %d %v", v, i, ok)
	}
	if v, i, ok := tb.Lookup(req{path: "/b"}.view()); v != "" || i != -1 || ok {
		t.Fatalf("Lookup /b = %q %d %v", v, i, ok)
	}
	if err := (Match{Hosts: []string{"*.a.com"}, Prefix: "/x"}).Validate(); err != nil {
		t.Fatalf("Validate of a good match = %v", err)
	}
}

// TestConcurrentLookup runs lookups on one frozen table from several
// goroutines; the race detector checks that Lookup only reads.
func TestConcurrentLookup(t *testing.T) {
	tb := build(tenRoutes(), true)
	views := []req{
		{host: "api.example.com", path: "/v3/x"},
		{host: "x.org", path: "/canary", hdr: fields{"x-env", "stable", "x-env", "canary"}},
		{host: "cdn.example.com", path: "/static/a.css"},
	}
	want := []int{3, 5, 4}
	done := make(chan error, 4)
	for g := range 4 {
		go func() {
			for k := range 2000 {
				j := (g + k) % len(views)
				if _, i, _ := tb.Lookup(views[j].view()); i != want[j] {
					done <- fmt.Errorf("%+v: route %d, want %d", views[j], i, want[j])
					return
				}
			}
			done <- nil
		}()
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

package route

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// overlapping is a table whose hosts nest and overlap, for the index and
// scan comparisons.
func overlapping() []Match {
	return []Match{
		{Hosts: []string{"a.b.c"}, Prefix: "/x"},
		{Hosts: []string{"*.b.c"}, Methods: []string{"POST"}},
		{Hosts: []string{"*.c", "b.c"}, Path: "/y"},
		{Prefix: "/z"},
		{Hosts: []string{"*.a.b.c"}},
		{Hosts: []string{"c"}},
		{Hosts: []string{"a.b.c", "*.b.c"}, Regex: "/[xy]/.*"},
		{Hosts: []string{"*.a.c"}, Headers: []HeaderMatch{{Name: "x", Present: true}}},
		{Hosts: []string{"b.b.c"}},
		{Hosts: []string{"*"}, Path: "/"},
	}
}

// TestIndexAgreesWithScan compares the frozen table's index with the plain
// scan (checked by hand in TestLookup) over random tables and requests on a
// small alphabet of labels, so that hosts nest and collide often.
func TestIndexAgreesWithScan(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	host := func() string {
		labels := []string{"a", "b", "c"}
		var parts []string
		for range 1 + r.IntN(4) {
			parts = append(parts, labels[r.IntN(len(labels))])
		}
		return strings.Join(parts, ".")
	}
	paths := []string{"/", "/x", "/x/1", "/y", "/z/2"}
	for round := range 200 {
		var ms []Match
		for range 1 + r.IntN(12) {
			var m Match
			for range r.IntN(3) {
				h := host()
				if r.IntN(3) == 0 {
					h = "*." + h
				}
				m.Hosts = append(m.Hosts, h)
			}
			if r.IntN(2) == 0 {
				m.Prefix = paths[r.IntN(len(paths))]
			}
			ms = append(ms, m)
		}
		frozen, scan := build(ms, true), build(ms, false)
		for range 50 {
			v := req{host: host(), path: paths[r.IntN(len(paths))]}.view()
			_, i, _ := frozen.Lookup(v)
			_, j, _ := scan.Lookup(v)
			if i != j {
				t.Fatalf("round %d, routes %+v, host %q path %q: index gives %d, scan %d", round, ms, v.Host, v.Path, i, j)
			}
		}
	}
}

func FuzzLookup(f *testing.F) {
	frozen, scan := build(overlapping(), true), build(overlapping(), false)
	f.Add("a.b.c", "/x/1", "GET")
	f.Add("x.a.b.c", "/y", "POST")
	f.Add("b.c", "/y", "GET")
	f.Add("q.a.c", "/", "GET")
	f.Add(".b.c", "/z", "PUT")
	f.Fuzz(func(t *testing.T, host, path, method string) {
		v := req{method: method, host: host, path: path}.view()
		_, i, ok := frozen.Lookup(v)
		_, j, _ := scan.Lookup(v)
		if i != j || ok != (i >= 0) {
			t.Fatalf("host %q path %q method %q: index gives %d (ok %v), scan %d", host, path, method, i, ok, j)
		}
	})
}

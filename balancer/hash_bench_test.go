package balancer

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
)

// benchLookup looks up a cycle of 4096 precomputed uniform key hashes, so
// that successive lookups land on unrelated parts of the table as real
// keys do.
func benchLookup(b *testing.B, t HashTable) {
	keys := testKeys(4096)
	b.ReportAllocs()
	sink, i := 0, 0
	for b.Loop() {
		sink += t.Lookup(keys[i&4095])
		i++
	}
	_ = sink
}

func BenchmarkRingLookup(b *testing.B) {
	for _, n := range benchSizes {
		ids := testIDs(n)
		b.Run("envoy/n="+strconv.Itoa(n), func(b *testing.B) {
			benchLookup(b, mustRing(b, ids, nil, RingConfig{}))
		})
		b.Run("per-weight-100/n="+strconv.Itoa(n), func(b *testing.B) {
			benchLookup(b, mustRing(b, ids, nil, RingConfig{PointsPerWeight: 100}))
		})
	}
}

func BenchmarkMaglevLookup(b *testing.B) {
	for _, n := range benchSizes {
		ids := testIDs(n)
		b.Run("n="+strconv.Itoa(n), func(b *testing.B) {
			benchLookup(b, mustMaglev(b, ids, nil, MaglevConfig{}))
		})
	}
}

// BenchmarkHashKeyLookup is the whole per-request cost: key from the
// request, then the Maglev entry.
func BenchmarkHashKeyLookup(b *testing.B) {
	g := mustMaglev(b, testIDs(1000), nil, MaglevConfig{})
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("X-User", "user-1234567")
	p := HashPolicy{Header: "X-User"}
	b.ReportAllocs()
	sink := 0
	for b.Loop() {
		h, _ := p.Key(r)
		sink += g.Lookup(h)
	}
	_ = sink
}

func BenchmarkRingBuild(b *testing.B) {
	for _, n := range benchSizes {
		ids := testIDs(n)
		b.Run("envoy/n="+strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				mustRing(b, ids, nil, RingConfig{})
			}
		})
		b.Run("per-weight-100/n="+strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				mustRing(b, ids, nil, RingConfig{PointsPerWeight: 100})
			}
		})
	}
}

func BenchmarkMaglevBuild(b *testing.B) {
	for _, n := range benchSizes {
		ids := testIDs(n)
		b.Run("n="+strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				mustMaglev(b, ids, nil, MaglevConfig{})
			}
		})
	}
}

func BenchmarkHashPolicyKey(b *testing.B) {
	r := httptest.NewRequest(http.MethodGet, "/cart/items?x=1", nil)
	r.Header.Set("X-User", "user-1234567")
	r.Header.Set("Cookie", "theme=dark; sid=0123456789abcdef; lang=en")
	r.RemoteAddr = "192.0.2.1:51234"
	for _, c := range []struct {
		name string
		p    HashPolicy
	}{
		{"header", HashPolicy{Header: "X-User"}},
		{"cookie", HashPolicy{Cookie: "sid"}},
		{"client-ip", HashPolicy{ClientIP: true}},
		{"path", HashPolicy{Path: true}},
		{"fallthrough", HashPolicy{Header: "X-Missing", Cookie: "missing", ClientIP: true}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			var sink uint64
			for b.Loop() {
				h, _ := c.p.Key(r)
				sink += h
			}
			_ = sink
		})
	}
}

func BenchmarkHashString(b *testing.B) {
	for _, n := range []int{8, 16, 64} {
		s := string(patternBytes(n))
		b.Run("len="+strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			var sink uint64
			for b.Loop() {
				sink += HashString(s)
			}
			_ = sink
		})
	}
}

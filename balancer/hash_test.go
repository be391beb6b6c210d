package balancer

import (
	"errors"
	"reflect"
	"strconv"
	"testing"
)

// The expected values below come from the XXH64 reference (Collet's xxHash,
// through github.com/cespare/xxhash/v2, an independent implementation), not
// from this package: they pin the hash every process must agree on.

func TestHashStringVectors(t *testing.T) {
	cases := []struct {
		in   string
		want uint64
	}{
		{"", 0xEF46DB3751D8E999},
		{"a", 0xD24EC4F1A98C6E5B},
		{"abc", 0x44BC2CF5AD770999},
		{"message digest", 0x066ED728FCEEB3BE},
		{"10.0.0.1:8080", 0xCB972177068EB685},
		{"user-42", 0x397E9D3A76AF7C81},
		{"The quick brown fox jumps over the lazy dog", 0x0B242D361FDA71BC},
		{"abcdefghijklmnopqrstuvwxyz0123456789", 0x64F23ECF1609B766},
	}
	for _, c := range cases {
		if got := HashString(c.in); got != c.want {
			t.Errorf("HashString(%q) = %#016x, want %#016x", c.in, got, c.want)
		}
		if got := HashBytes([]byte(c.in)); got != c.want {
			t.Errorf("HashBytes(%q) = %#016x, want %#016x", c.in, got, c.want)
		}
	}
}

// patternBytes returns n bytes b[i] = 7i+3 (mod 256).
func patternBytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + 3)
	}
	return b
}

// TestHashLengths covers every branch of XXH64: the 32-byte stripes, the
// 8-byte, 4-byte and 1-byte tails.
func TestHashLengths(t *testing.T) {
	cases := []struct {
		n    int
		want uint64
	}{
		{0, 0xEF46DB3751D8E999},
		{1, 0x1F25C8D0BC1F4BB6},
		{3, 0x31D2363F52E564C9},
		{4, 0x9BB64B7D66EE9FDA},
		{5, 0xC7608EFDDB7051FE},
		{7, 0x9A7B149959CE60D8},
		{8, 0xDAB99D95C6F90092},
		{12, 0xD52E407833AF5133},
		{31, 0xA2AA5F33CC4A6119},
		{32, 0x23C3C17EF790FD97},
		{33, 0x50A7CFC7BA588784},
		{63, 0x5E3E54B431C7493C},
		{64, 0x0EB64B3EF6EEB01F},
		{100, 0xA61F8D4C170FE531},
	}
	for _, c := range cases {
		b := patternBytes(c.n)
		if got := HashBytes(b); got != c.want {
			t.Errorf("len %d: HashBytes = %#016x, want %#016x", c.n, got, c.want)
		}
		if got := HashString(string(b)); got != c.want {
			t.Errorf("len %d: HashString = %#016x, want %#016x", c.n, got, c.want)
		}
	}
}

func TestHashSeeds(t *testing.T) {
	// Maglev's skip uses seed 1.
	if got, want := xxh64("10.0.0.1:8080", 1), uint64(0x0DFCE9EFD349B428); got != want {
		t.Errorf("xxh64(seed 1) = %#016x, want %#016x", got, want)
	}
	if got, want := xxh64(patternBytes(100), 12345), uint64(0xACB8A02891FEA7D2); got != want {
		t.Errorf("xxh64(seed 12345) = %#016x, want %#016x", got, want)
	}
}

func TestHashNoAllocs(t *testing.T) {
	s := "some-session-id-" + strconv.Itoa(12345)
	b := []byte(s)
	var sink uint64
	if n := testing.AllocsPerRun(100, func() { sink += HashString(s) + HashBytes(b) }); n != 0 {
		t.Errorf("allocs per hash = %v, want 0", n)
	}
	_ = sink
}

// testKeys returns n key hashes from splitmix64 (Steele, Lea, Flood 2014)
// with a fixed seed: uniform over 2⁶⁴ and the same on every run.
func testKeys(n int) []uint64 {
	ks := make([]uint64, n)
	x := uint64(0x5EED)
	for i := range ks {
		x += 0x9E3779B97F4A7C15
		z := x
		z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
		z = (z ^ (z >> 27)) * 0x94D049BB133111EB
		ks[i] = z ^ (z >> 31)
	}
	return ks
}

// testIDs returns n distinct endpoint addresses 10.0.x.y:8080.
func testIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = "10.0." + strconv.Itoa(i/256) + "." + strconv.Itoa(i%256) + ":8080"
	}
	return ids
}

// without returns ids without ids[k], in a new slice.
func without(ids []string, k int) []string {
	out := append([]string(nil), ids[:k]...)
	return append(out, ids[k+1:]...)
}

// churn compares where keys go in a and b, by endpoint id. It returns the
// share of keys whose endpoint differs, and the share of keys that moved
// other than from the endpoint `from` or to the endpoint `to` ("" for none).
func churn(a, b HashTable, keys []uint64, from, to string) (moved, extra float64) {
	var m, x int
	for _, k := range keys {
		ia, ib := a.ID(a.Lookup(k)), b.ID(b.Lookup(k))
		if ia == ib {
			continue
		}
		m++
		if ia != from && ib != to {
			x++
		}
	}
	return float64(m) / float64(len(keys)), float64(x) / float64(len(keys))
}

// shares returns the share of keys that each endpoint of t receives.
func shares(t HashTable, keys []uint64) []float64 {
	s := make([]float64, t.Len())
	for _, k := range keys {
		s[t.Lookup(k)] += 1 / float64(len(keys))
	}
	return s
}

// TestBuildTable: the table-builder methods build the same tables as the
// constructors, and pass configuration errors through.
func TestBuildTable(t *testing.T) {
	ids, weights := testIDs(6), []int{1, 2, 3, 1, 2, 3}
	rc := &RingConfig{MinSize: 100}
	v, err := rc.BuildTable(ids, weights)
	if err != nil {
		t.Fatal(err)
	}
	r, ok := v.(*Ring)
	if want := mustRing(t, ids, weights, *rc); !ok || !reflect.DeepEqual(r, want) {
		t.Fatalf("RingConfig.BuildTable = %T %v, want the ring NewRing builds", v, v)
	}
	mc := &MaglevConfig{TableSize: 101}
	v, err = mc.BuildTable(ids, weights)
	if err != nil {
		t.Fatal(err)
	}
	g, ok := v.(*Maglev)
	if want := mustMaglev(t, ids, weights, *mc); !ok || !reflect.DeepEqual(g, want) {
		t.Fatalf("MaglevConfig.BuildTable = %T %v, want the table NewMaglev builds", v, v)
	}
	if _, err := (&MaglevConfig{TableSize: 100}).BuildTable(ids, weights); !errors.Is(err, ErrConfig) {
		t.Fatalf("bad table size: err = %v, want ErrConfig", err)
	}
	if _, err := (&RingConfig{MinSize: -1}).BuildTable(ids, weights); !errors.Is(err, ErrConfig) {
		t.Fatalf("bad min size: err = %v, want ErrConfig", err)
	}
}

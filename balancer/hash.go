package balancer

import "math/bits"

// The stable hash of the consistent-hashing tables (Ring, Maglev) and of
// request keys (HashPolicy) is XXH64 with seed 0: the 64-bit xxHash of Yann
// Collet, as specified in the xxHash repository's doc/xxhash_spec.md, and the
// function Envoy uses by default for ring hash and Maglev. It is written out
// here rather than taken from a dependency or from hash/maphash: maphash is
// seeded per process, and every balancer instance, in every process and on
// every platform, must map a key to the same endpoint. The function is part
// of the package's contract: changing it would remap every key.

// HashTable is a consistent-hashing table built once over a fixed list of
// endpoint ids: *Ring and *Maglev. Lookup maps a key hash (HashString,
// HashBytes, HashPolicy.Key) to an index into that list, -1 when the table is
// empty; the same ids and weights give the same mapping on every process.
// Implementations are immutable and safe for concurrent use.
type HashTable interface {
	Lookup(h uint64) int // index in [0, Len()) of the endpoint of key hash h; -1 if empty
	Len() int            // number of endpoint ids the table was built over
	ID(i int) string     // id of endpoint i
	Size() int           // points (Ring) or entries (Maglev) in the table
}

var (
	_ HashTable = (*Ring)(nil)
	_ HashTable = (*Maglev)(nil)
)

// XXH64 primes.
const (
	xxPrime1 uint64 = 0x9E3779B185EBCA87
	xxPrime2 uint64 = 0xC2B2AE3D27D4EB4F
	xxPrime3 uint64 = 0x165667B19E3779F9
	xxPrime4 uint64 = 0x85EBCA77C2B2AE63
	xxPrime5 uint64 = 0x27D4EB2F165667C5
)

// HashString returns the XXH64 hash (seed 0) of s: the same value on every
// process, platform and version of this package. It is the hash HashPolicy.Key
// uses for header, cookie and path keys, so a caller that extracts a key by
// other means (gRPC metadata, a user id) gets the same endpoint for the same
// string. It does not allocate and is safe for concurrent use.
func HashString(s string) uint64 { return xxh64(s, 0) }

// HashBytes returns the XXH64 hash (seed 0) of b; HashBytes(b) ==
// HashString(string(b)). It does not allocate and is safe for concurrent use.
func HashBytes(b []byte) uint64 { return xxh64(b, 0) }

// xxh64 is XXH64 of p with the given seed.
func xxh64[T string | []byte](p T, seed uint64) uint64 {
	n := len(p)
	i := 0
	var h uint64
	if n >= 32 {
		v1 := seed + xxPrime1 + xxPrime2
		v2 := seed + xxPrime2
		v3 := seed
		v4 := seed - xxPrime1
		for ; n-i >= 32; i += 32 {
			v1 = xxRound(v1, le64(p, i))
			v2 = xxRound(v2, le64(p, i+8))
			v3 = xxRound(v3, le64(p, i+16))
			v4 = xxRound(v4, le64(p, i+24))
		}
		h = bits.RotateLeft64(v1, 1) + bits.RotateLeft64(v2, 7) +
			bits.RotateLeft64(v3, 12) + bits.RotateLeft64(v4, 18)
		h = xxMerge(h, v1)
		h = xxMerge(h, v2)
		h = xxMerge(h, v3)
		h = xxMerge(h, v4)
	} else {
		h = seed + xxPrime5
	}
	h += uint64(n)
	for ; n-i >= 8; i += 8 {
		h ^= xxRound(0, le64(p, i))
		h = bits.RotateLeft64(h, 27)*xxPrime1 + xxPrime4
	}
	if n-i >= 4 {
		h ^= uint64(le32(p, i)) * xxPrime1
		h = bits.RotateLeft64(h, 23)*xxPrime2 + xxPrime3
		i += 4
	}
	for ; i < n; i++ {
		h ^= uint64(p[i]) * xxPrime5
		h = bits.RotateLeft64(h, 11) * xxPrime1
	}
	return xxAvalanche(h)
}

// xxRound mixes one 8-byte lane into an accumulator.
func xxRound(acc, lane uint64) uint64 {
	acc += lane * xxPrime2
	return bits.RotateLeft64(acc, 31) * xxPrime1
}

// xxMerge folds an accumulator into the hash of a long input.
func xxMerge(h, v uint64) uint64 {
	h ^= xxRound(0, v)
	return h*xxPrime1 + xxPrime4
}

// xxAvalanche is the final mix: every input bit affects every output bit.
func xxAvalanche(h uint64) uint64 {
	h ^= h >> 33
	h *= xxPrime2
	h ^= h >> 29
	h *= xxPrime3
	h ^= h >> 32
	return h
}

// le64 reads p[i:i+8] as a little-endian uint64.
func le64[T string | []byte](p T, i int) uint64 {
	_ = p[i+7] // one bounds check
	return uint64(p[i]) | uint64(p[i+1])<<8 | uint64(p[i+2])<<16 | uint64(p[i+3])<<24 |
		uint64(p[i+4])<<32 | uint64(p[i+5])<<40 | uint64(p[i+6])<<48 | uint64(p[i+7])<<56
}

// le32 reads p[i:i+4] as a little-endian uint32.
func le32[T string | []byte](p T, i int) uint32 {
	_ = p[i+3]
	return uint32(p[i]) | uint32(p[i+1])<<8 | uint32(p[i+2])<<16 | uint32(p[i+3])<<24
}

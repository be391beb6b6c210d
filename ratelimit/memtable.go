package ratelimit

import "hash/maphash"

// memTable is the key → state table of one shard of a keyed store (Memory
// with exact keys, Leased): an open-addressing index of 8-byte slots over a
// dense slab of entries. It is not safe for concurrent use; its owner holds
// a lock. (Memory's default for fixed-size states is hashTable.)
//
// Layout, chosen for bytes per key (Memory's GCRA target is 64 B beyond the
// key string) and for one cache miss in the index plus one in the slab:
//
//   - index: linear probing over a power-of-two array of uint64 slots,
//     frag<<32 | (i+1), where frag is the low 32 bits of the key's hash (its
//     low bits are the home slot) and i the entry's place in the slab; 0 is
//     an empty slot. The index grows by doubling at a load of 3/4 and shrinks
//     by half below 1/16, so it costs 10.7 to 21 bytes per key. A lookup
//     compares fragments first and reads an entry's key only when the
//     fragments match. Deletion shifts the following slots back (no
//     tombstones), so probe lengths stay short under churn.
//   - slab: entries {key, used, state} packed in chunks of memChunk, dense
//     (entries 0..n−1 are live), so removing an entry moves the last one into
//     its place, sampling a random key for eviction is one random index, and
//     a sweep is a walk over 0..n−1. A GCRA entry is 32 bytes (key header 16,
//     used 8, TAT 8). At most one spare chunk (64 entries) is kept beyond the
//     live ones.
type memTable[S any] struct {
	seed   maphash.Seed
	index  []uint64
	chunks []*[memChunk]memEntry[S]
	n      int    // live entries: slab[0:n]
	rnd    uint64 // xorshift state for sampling
	cursor int    // next entry the incremental sweep looks at
}

// memEntry is one key of a memTable.
type memEntry[S any] struct {
	key   string
	used  int64 // the latest now of a decision on the key, nanoseconds
	state S
}

const (
	memChunkBits = 6
	memChunk     = 1 << memChunkBits
	memMinIndex  = 16
)

func newMemTable[S any](seed maphash.Seed, rnd uint64) memTable[S] {
	if rnd == 0 {
		rnd = 0x9e3779b97f4a7c15
	}
	return memTable[S]{seed: seed, rnd: rnd}
}

// memHash is the hash that places key in a shard (high bits) and in a
// shard's index (low 32 bits).
func memHash(seed maphash.Seed, key string) uint64 { return maphash.String(seed, key) }

// at returns the i-th entry of the slab, 0 ≤ i < n.
func (t *memTable[S]) at(i int) *memEntry[S] {
	return &t.chunks[i>>memChunkBits][i&(memChunk-1)]
}

// lookup returns the slab index of key, whose hash has low 32 bits frag,
// or −1.
func (t *memTable[S]) lookup(key string, frag uint32) int {
	if len(t.index) == 0 {
		return -1
	}
	mask := uint32(len(t.index) - 1)
	for p := frag & mask; ; p = (p + 1) & mask {
		s := t.index[p]
		if s == 0 {
			return -1
		}
		if uint32(s>>32) == frag {
			i := int(uint32(s)) - 1
			if t.at(i).key == key {
				return i
			}
		}
	}
}

// insert adds key (absent, and already a private copy) with state s and
// returns its entry. It grows the index and the slab as needed.
func (t *memTable[S]) insert(key string, frag uint32, used int64, s S) *memEntry[S] {
	if 4*(t.n+1) > 3*len(t.index) {
		size := 2 * len(t.index)
		if size < memMinIndex {
			size = memMinIndex
		}
		t.resize(size)
	}
	if t.n == len(t.chunks)*memChunk {
		t.chunks = append(t.chunks, new([memChunk]memEntry[S]))
	}
	i := t.n
	t.n++
	mask := uint32(len(t.index) - 1)
	p := frag & mask
	for t.index[p] != 0 {
		p = (p + 1) & mask
	}
	t.index[p] = uint64(frag)<<32 | uint64(i+1)
	e := t.at(i)
	*e = memEntry[S]{key: key, used: used, state: s}
	return e
}

// remove deletes the i-th entry: its slot is cleared, the last entry moves
// into its place, a second spare chunk is given back, and an index less
// than 1/16 full is halved.
func (t *memTable[S]) remove(i int) {
	e := t.at(i)
	t.clearSlot(t.slotOf(uint32(memHash(t.seed, e.key)), i))
	last := t.n - 1
	if i != last {
		l := t.at(last)
		p := t.slotOf(uint32(memHash(t.seed, l.key)), last)
		t.index[p] = t.index[p]&^0xffffffff | uint64(i+1)
		*e = *l
		e = l
	}
	*e = memEntry[S]{}
	t.n = last
	if t.cursor > t.n {
		t.cursor = 0
	}
	if c := len(t.chunks); c >= 2 && t.n <= (c-2)*memChunk {
		t.chunks[c-1] = nil
		t.chunks = t.chunks[:c-1]
	}
	if len(t.index) > memMinIndex && 16*t.n < len(t.index) {
		t.resize(len(t.index) / 2)
	}
}

// slotOf returns the index position of the slot that points at entry i,
// whose hash has low bits frag.
func (t *memTable[S]) slotOf(frag uint32, i int) uint32 {
	mask := uint32(len(t.index) - 1)
	want := uint64(frag)<<32 | uint64(i+1)
	p := frag & mask
	for t.index[p] != want {
		p = (p + 1) & mask
	}
	return p
}

// clearSlot empties slot p and shifts the slots of its probe run back so
// that every key stays reachable from its home slot (Knuth's algorithm R).
func (t *memTable[S]) clearSlot(p uint32) {
	mask := uint32(len(t.index) - 1)
	for q := (p + 1) & mask; ; q = (q + 1) & mask {
		s := t.index[q]
		if s == 0 {
			break
		}
		home := uint32(s>>32) & mask
		// Move s into the hole at p unless its home lies cyclically in (p, q].
		if (q-home)&mask >= (q-p)&mask {
			t.index[p] = s
			p = q
		}
	}
	t.index[p] = 0
}

// resize rebuilds the index with size slots (a power of two above n·4/3).
func (t *memTable[S]) resize(size int) {
	old := t.index
	t.index = make([]uint64, size)
	mask := uint32(size - 1)
	for _, s := range old {
		if s == 0 {
			continue
		}
		p := uint32(s>>32) & mask
		for t.index[p] != 0 {
			p = (p + 1) & mask
		}
		t.index[p] = s
	}
}

// random returns a uniformly chosen entry index in [0, n); n > 0.
func (t *memTable[S]) random() int {
	x := t.rnd
	x ^= x << 13
	x ^= x >> 7
	x ^= x << 17
	t.rnd = x
	return int((x >> 32) * uint64(t.n) >> 32)
}

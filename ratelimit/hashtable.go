package ratelimit

// hashTable is the table of one shard of a hashed Memory (the default for
// the fixed-size states; see MemoryConfig.ExactKeys). A key is known only
// by its 64-bit keyed hash: no key string is stored and none is compared,
// so a decision on a held key reads one entry (one cache miss when the
// table does not fit in the CPU's caches) after hashing the key. It is not
// safe for concurrent use; its owner holds a lock.
//
// Layout: open addressing with linear probing over a power-of-two array of
// entries {hash, used, state}, the state inline (GCRA and fixed window:
// 24 bytes per entry; sliding counter, token bucket and leaky meter: 32).
// The hash's low bits are the key's home slot (its high bits pick the
// shard). A hash of 0 marks an empty slot, so a key whose hash is 0 is
// stored as 1 (hashIdentity). The table grows by doubling when an insertion
// would make it more than 3/4 full, up to maxSlots (the smallest power of
// two that holds the shard's cap at a load of 3/4: it never needs more), and
// shrinks by halving, in shrink, while it is less than 1/16 full. Deletion
// shifts the following entries of the probe run back (Knuth's algorithm R),
// so there are no tombstones and probe runs stay short under churn.
type hashTable[S any] struct {
	slots    []hashEntry[S] // nil until the first insertion; else a power of two
	n        int            // live entries
	maxSlots int            // the most slots the table grows to
	rnd      uint64         // xorshift state for sampling
	cursor   int            // next slot the incremental sweep looks at
}

// hashEntry is one slot of a hashTable; h == 0 is an empty slot.
type hashEntry[S any] struct {
	h     uint64 // the key's identity: its keyed hash (never 0 when live)
	used  int64  // the latest now of a decision on the key, nanoseconds
	state S
}

// hashMinSlots is the size of a table's first allocation.
const hashMinSlots = 16

// hashIdentity maps a key's 64-bit hash to its identity in a hashTable:
// the hash itself, except that 0 (the empty slot) becomes 1.
func hashIdentity(h uint64) uint64 {
	if h == 0 {
		return 1
	}
	return h
}

// hashSlotsFor returns the smallest power of two ≥ hashMinSlots that holds
// maxKeys entries at a load of at most 3/4.
func hashSlotsFor(maxKeys int) int {
	size := hashMinSlots
	for 3*size < 4*maxKeys {
		size <<= 1
	}
	return size
}

// newHashTable returns an empty table that will hold up to maxKeys
// entries; it allocates nothing until the first insertion.
func newHashTable[S any](maxKeys int, rnd uint64) hashTable[S] {
	if rnd == 0 {
		rnd = 0x9e3779b97f4a7c15
	}
	return hashTable[S]{maxSlots: hashSlotsFor(maxKeys), rnd: rnd}
}

// find returns the entry whose identity is h (h ≠ 0), or nil.
func (t *hashTable[S]) find(h uint64) *hashEntry[S] {
	s := t.slots
	if len(s) == 0 {
		return nil
	}
	mask := uint64(len(s) - 1)
	for p := h & mask; ; p = (p + 1) & mask {
		e := &s[p]
		if e.h == h {
			return e
		}
		if e.h == 0 {
			return nil
		}
	}
}

// insert adds identity h (h ≠ 0, absent) with state s, growing the table
// if it would be more than 3/4 full (never beyond maxSlots: the caller keeps
// n within the cap).
func (t *hashTable[S]) insert(h uint64, used int64, s S) {
	if 4*(t.n+1) > 3*len(t.slots) && len(t.slots) < t.maxSlots {
		t.resize(max(2*len(t.slots), hashMinSlots))
	}
	t.place(hashEntry[S]{h: h, used: used, state: s})
	t.n++
}

// place puts e in the first free slot of its probe run; there is one.
func (t *hashTable[S]) place(e hashEntry[S]) {
	mask := uint64(len(t.slots) - 1)
	p := e.h & mask
	for t.slots[p].h != 0 {
		p = (p + 1) & mask
	}
	t.slots[p] = e
}

// removeAt deletes the entry in slot p and shifts the entries of the rest
// of its probe run back so that every key stays reachable from its home
// slot. Entries move only into the hole, from slots after it (cyclically):
// a walk over the slots that looks at slot p again after removing there
// sees every remaining entry. It never resizes (see shrink).
func (t *hashTable[S]) removeAt(p int) {
	s := t.slots
	mask := len(s) - 1
	for q := (p + 1) & mask; ; q = (q + 1) & mask {
		h := s[q].h
		if h == 0 {
			break
		}
		home := int(h) & mask
		// Move q's entry into the hole unless its home lies cyclically in
		// (p, q]: then the hole is not on its probe path.
		if (q-home)&mask >= (q-p)&mask {
			s[p] = s[q]
			p = q
		}
	}
	s[p] = hashEntry[S]{}
	t.n--
}

// shrink halves the table while it is less than 1/16 full (and above
// hashMinSlots), rebuilding it once; an empty table is given back. Slot
// positions change: call it where none is held.
func (t *hashTable[S]) shrink() {
	size := len(t.slots)
	if size <= hashMinSlots || 16*t.n >= size {
		return
	}
	if t.n == 0 {
		t.slots, t.cursor = nil, 0
		return
	}
	for size > hashMinSlots && 16*t.n < size {
		size /= 2
	}
	t.resize(size)
}

// resize rebuilds the table with size slots (a power of two > n·4/3).
func (t *hashTable[S]) resize(size int) {
	old := t.slots
	t.slots = make([]hashEntry[S], size)
	for i := range old {
		if old[i].h != 0 {
			t.place(old[i])
		}
	}
	if t.cursor >= size {
		t.cursor = 0
	}
}

// random returns the slot of an entry chosen at random (a uniform slot,
// then the first live one from there); n > 0.
func (t *hashTable[S]) random() int {
	x := t.rnd
	x ^= x << 13
	x ^= x >> 7
	x ^= x << 17
	t.rnd = x
	mask := len(t.slots) - 1
	p := int(x>>32) & mask
	for t.slots[p].h == 0 {
		p = (p + 1) & mask
	}
	return p
}

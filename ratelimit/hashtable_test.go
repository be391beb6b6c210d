package ratelimit

import (
	"context"
	"fmt"
	"testing"
)

// hashCheckTable checks a hashed table's invariants: a power-of-two size
// within maxSlots, n live entries of distinct identities, each reachable
// from its home slot through live slots only (no hole on its probe path:
// what backward-shift deletion must keep), and found by find; a load of at
// most 3/4.
func hashCheckTable[S any](t *testing.T, tb *hashTable[S]) {
	t.Helper()
	size := len(tb.slots)
	if size&(size-1) != 0 || size > tb.maxSlots {
		t.Fatalf("%d slots (maxSlots %d)", size, tb.maxSlots)
	}
	live := 0
	seen := make(map[uint64]int)
	for p := range tb.slots {
		h := tb.slots[p].h
		if h == 0 {
			continue
		}
		live++
		if q, dup := seen[h]; dup {
			t.Fatalf("identity %#x in slots %d and %d", h, q, p)
		}
		seen[h] = p
		for q := int(h) & (size - 1); q != p; q = (q + 1) & (size - 1) {
			if tb.slots[q].h == 0 {
				t.Fatalf("identity %#x in slot %d: empty slot %d on its probe path", h, p, q)
			}
		}
		if e := tb.find(h); e != &tb.slots[p] {
			t.Fatalf("identity %#x in slot %d is not found there", h, p)
		}
	}
	if live != tb.n {
		t.Fatalf("%d live slots, n = %d", live, tb.n)
	}
	if 4*tb.n > 3*size {
		t.Fatalf("%d entries in %d slots", tb.n, size)
	}
}

// hashSlot returns the slot holding identity h, or −1.
func hashSlot[S any](tb *hashTable[S], h uint64) int {
	for p := range tb.slots {
		if tb.slots[p].h == h {
			return p
		}
	}
	return -1
}

func TestHashSlotsFor(t *testing.T) {
	for _, c := range []struct{ keys, slots int }{
		{0, 16}, {1, 16}, {12, 16}, {13, 32}, {24, 32}, {25, 64},
		{12288, 16384}, {12289, 32768}, {16384, 32768}, // 2^20 keys in 64 shards: 16384 each
	} {
		if got := hashSlotsFor(c.keys); got != c.slots {
			t.Errorf("hashSlotsFor(%d) = %d, want %d", c.keys, got, c.slots)
		}
	}
	if hashIdentity(0) != 1 || hashIdentity(1) != 1 || hashIdentity(7) != 7 {
		t.Error("hashIdentity must map 0 to 1 and keep every other hash")
	}
}

// A probe run that wraps from the last slot to the first: lookups follow
// it, and deleting its head shifts every entry that may move back by one,
// across the wrap, and leaves in place an entry already at its home.
func TestHashTableWrapAround(t *testing.T) {
	tb := newHashTable[int](12, 1) // 16 slots
	// Identities with home slots 14, 14, 15, 14, 0 and 3 (low 4 bits).
	a, b, c, d, e, f := uint64(14+16*1), uint64(14+16*2), uint64(15+16*3), uint64(14+16*4), uint64(0+16*5), uint64(3+16*6)
	for i, h := range []uint64{a, b, c, d, e, f} {
		tb.insert(h, 0, i)
	}
	if len(tb.slots) != 16 {
		t.Fatalf("%d slots, want 16", len(tb.slots))
	}
	for h, want := range map[uint64]int{a: 14, b: 15, c: 0, d: 1, e: 2, f: 3} {
		if p := hashSlot(&tb, h); p != want {
			t.Errorf("identity %d in slot %d, want %d", h, p, want)
		}
	}
	hashCheckTable(t, &tb)
	tb.removeAt(14) // a
	for h, want := range map[uint64]int{a: -1, b: 14, c: 15, d: 0, e: 1, f: 3} {
		if p := hashSlot(&tb, h); p != want {
			t.Errorf("after removing a: identity %d in slot %d, want %d", h, p, want)
		}
	}
	if tb.slots[2].h != 0 || tb.find(a) != nil || tb.n != 5 {
		t.Errorf("slot 2 %#x, find(a) %v, n %d: want slot 2 empty, a gone, 5 left", tb.slots[2].h, tb.find(a), tb.n)
	}
	hashCheckTable(t, &tb)
	for h, state := range map[uint64]int{b: 1, c: 2, d: 3, e: 4, f: 5} {
		if en := tb.find(h); en == nil || en.state != state {
			t.Errorf("identity %d: %+v, want state %d", h, en, state)
		}
	}
}

// Seeded random insertions, updates and deletions (at random slots and by
// identity) against a map, with identities crowded around the wrap of the
// table so that probe runs are long and cross it; through growth up to the
// cap and shrinking back.
func TestHashTableAgainstMap(t *testing.T) {
	const maxKeys = 1500
	r := newRand(11)
	tb := newHashTable[int](maxKeys, 5)
	model := map[uint64]int{}
	ident := func() uint64 {
		h := r.Uint64()
		if r.IntN(2) == 0 { // home within 8 slots of the wrap, for any size
			h = h&^0xffff | uint64(0xfffc+r.IntN(8))&0xffff
		}
		return hashIdentity(h)
	}
	removeAt := func(p int) {
		delete(model, tb.slots[p].h)
		tb.removeAt(p)
	}
	check := func() {
		t.Helper()
		hashCheckTable(t, &tb)
		if len(model) != tb.n {
			t.Fatalf("model %d keys, table %d", len(model), tb.n)
		}
		for h, v := range model {
			if e := tb.find(h); e == nil || e.state != v {
				t.Fatalf("identity %#x: %+v, want state %d", h, e, v)
			}
		}
	}
	sizes := map[int]bool{}
	for round := range 6 {
		for i := range 6000 {
			switch x := r.Float64(); {
			case x < 0.55 && tb.n < maxKeys:
				h := ident()
				if _, ok := model[h]; ok {
					continue
				}
				if tb.find(h) != nil {
					t.Fatalf("%#x found before insertion", h)
				}
				tb.insert(h, 0, i)
				model[h] = i
			case x < 0.7 && tb.n > 0: // update through find
				p := tb.random()
				h := tb.slots[p].h
				tb.find(h).state = -i
				model[h] = -i
			case x < 0.85 && tb.n > 0:
				removeAt(tb.random())
			case tb.n > 0: // delete by identity
				for h := range model {
					removeAt(hashSlot(&tb, h))
					break
				}
			}
			sizes[len(tb.slots)] = true
			if i%199 == 0 {
				check()
			}
		}
		check()
		for tb.n > 40*(round+1) { // nearly empty
			removeAt(tb.random())
		}
		tb.shrink()
		check()
		if len(tb.slots) > max(16, 16*tb.n) {
			t.Fatalf("after shrinking to %d keys: %d slots", tb.n, len(tb.slots))
		}
	}
	if !sizes[hashSlotsFor(maxKeys)] {
		t.Errorf("sizes seen %v: the table never reached its cap of %d slots", sizes, hashSlotsFor(maxKeys))
	}
	for tb.n > 0 {
		removeAt(tb.random())
	}
	tb.shrink()
	if tb.slots != nil {
		t.Errorf("empty table keeps %d slots", len(tb.slots))
	}
}

// The table allocates nothing before its first key, grows by doubling at a
// load of 3/4 and stops at the size that holds its cap.
func TestHashTableGrowth(t *testing.T) {
	const maxKeys = 1000
	tb := newHashTable[GCRAState](maxKeys, 3)
	if tb.slots != nil || tb.maxSlots != 2048 {
		t.Fatalf("new table: %d slots, maxSlots %d; want none, 2048", len(tb.slots), tb.maxSlots)
	}
	r := newRand(4)
	var grown []int
	for i := range maxKeys {
		before := len(tb.slots)
		tb.insert(hashIdentity(r.Uint64()), int64(i), GCRAState{tat: uint64(i)})
		if len(tb.slots) != before {
			grown = append(grown, len(tb.slots))
			if 4*i > 3*before && before != 0 || 4*(i+1) <= 3*before {
				t.Errorf("grew from %d to %d slots at key %d", before, len(tb.slots), i+1)
			}
		}
	}
	if fmt.Sprint(grown) != "[16 32 64 128 256 512 1024 2048]" {
		t.Errorf("sizes %v, want doubling from 16 to 2048", grown)
	}
	hashCheckTable(t, &tb)
}

// Exact sweeping over a probe run that wraps: a Sweep drops exactly the
// full keys (TAT ≤ now), whatever their slots, and keeps every other one
// findable.
func TestMemoryHashedSweepAcrossWrap(t *testing.T) {
	m := mustMemory(t, Spec{Rate: 1, Per: 1, Burst: 1}, MemoryConfig{Shards: 1, MaxKeys: 12})
	impl := m.impl.(*hashedOf[GCRAState])
	sh := &impl.shards[0]
	// 12 keys in 16 slots, homes 13 to 15 and 0: one run from 13 round to
	// 8; odd keys full at now = 5 (TAT 1), even keys not (TAT 100).
	want := map[uint64]bool{}
	for i := range 12 {
		h := uint64(13+i%4)&15 | uint64(i+1)<<8
		tat := uint64(100e9) // nanoseconds: the rate 1/s counts in them
		if i%2 == 1 {
			tat = 1e9
		}
		sh.t.insert(h, 0, GCRAState{tat: tat})
		want[h] = tat == 100e9
	}
	hashCheckTable(t, &sh.t)
	if n := m.Sweep(5); n != 6 {
		t.Errorf("Sweep dropped %d keys, want the 6 full ones", n)
	}
	hashCheckTable(t, &sh.t)
	for h, kept := range want {
		if (sh.t.find(h) != nil) != kept {
			t.Errorf("identity %#x: held %v, want %v", h, sh.t.find(h) != nil, kept)
		}
	}
	if st := m.Stats(); st.Keys != 6 || st.Expired != 6 {
		t.Errorf("stats %+v, want 6 held, 6 expired", st)
	}
}

// At its cap a shard makes room with an expired key if its sample finds
// one (no eviction), the table never outgrows the cap's size, and a store
// emptied by Sweep gives its tables back.
func TestMemoryHashedCapAndShrink(t *testing.T) {
	const maxKeys = 64
	m := mustMemory(t, Spec{Rate: 1, Per: 1, Burst: 1}, MemoryConfig{Shards: 1, MaxKeys: maxKeys, EvictSample: 64})
	impl := m.impl.(*hashedOf[GCRAState])
	ctx := context.Background()
	for i := range maxKeys {
		m.AllowN(ctx, fmt.Sprint("k", i), 0, 1) // TAT 1
	}
	if st := m.Stats(); st.Keys != maxKeys {
		t.Fatalf("stats %+v, want %d keys", st, maxKeys)
	}
	// At 10 all are full again: a new key takes the place of one of them,
	// found by the sample, and a Sweep drops the others.
	m.AllowN(ctx, "new", 10, 1)
	if st := m.Stats(); st.Keys != maxKeys || st.Evicted != 0 || st.Expired != 1 {
		t.Errorf("stats %+v: want %d keys, 1 expired, none evicted", st, maxKeys)
	}
	if n := m.Sweep(10); n != maxKeys-1 || m.Len() != 1 {
		t.Errorf("Sweep(10) dropped %d keys, %d held; want %d dropped, 1 held", n, m.Len(), maxKeys-1)
	}
	for i := range maxKeys - 1 {
		m.AllowN(ctx, fmt.Sprint("new", i), 10, 1) // TAT 11
	}
	// At 10.5 none is full: each new key evicts one.
	for i := range 1000 {
		m.AllowN(ctx, fmt.Sprint("flood", i), 10.5, 1)
	}
	if st := m.Stats(); st.Keys != maxKeys || st.Evicted != 1000 || st.Expired != maxKeys {
		t.Errorf("stats %+v: want %d keys, 1000 evicted, %d expired", st, maxKeys, maxKeys)
	}
	if n := len(impl.shards[0].t.slots); n != hashSlotsFor(maxKeys) {
		t.Errorf("%d slots at the cap, want %d", n, hashSlotsFor(maxKeys))
	}
	memCheck(t, m)
	if n := m.Sweep(12); n != maxKeys || impl.shards[0].t.slots != nil {
		t.Errorf("Sweep(12) dropped %d keys, %d slots left; want all %d, none", n, len(impl.shards[0].t.slots), maxKeys)
	}
}

// A closed class (scale 0) refuses with RetryAfter = Per, allows queries
// and leaves the key's state as it was, on both tables; a reopened class
// finds it.
func TestMemoryClosedClass(t *testing.T) {
	forMemModes(t, func(t *testing.T, exact bool) {
		m := mustMemory(t, Spec{Rate: 3, Per: 60}, MemoryConfig{ExactKeys: exact})
		ctx := context.Background()
		m.AllowN(ctx, "k", 0, 2)
		m.SetScale(0)
		if d, _ := m.AllowN(ctx, "k", 1, 1); d.Allowed || d.RetryAfter != 60 {
			t.Errorf("closed: %+v, want refused, retry after 60", d)
		}
		if d, _ := m.AllowN(ctx, "new", 1, 0); !d.Allowed || m.Len() != 1 {
			t.Errorf("closed query: %+v, %d keys; want allowed, nothing stored", d, m.Len())
		}
		m.SetScale(1)
		if d, _ := m.AllowN(ctx, "k", 1, 1); !d.Allowed || d.Remaining != 0 {
			t.Errorf("reopened: %+v, want the last unit of the burst", d)
		}
	})
}

// The concurrency test of the hashed table on its own: goroutines × requests
// over a few keys that share a shard, against a limit per key; run with
// -race. Each key admits exactly its limit.
func TestMemoryHashedExactPerKey(t *testing.T) {
	const goroutines, perG, limit, keys = 8, 2000, 50, 16
	m := mustMemory(t, Spec{Rate: limit, Per: 3600}, MemoryConfig{Shards: 1, MaxKeys: 1024})
	if !memIsHashed(m) {
		t.Fatal("GCRA store not hashed by default")
	}
	admitted := make([][keys]int, goroutines)
	done := make(chan struct{})
	for g := range goroutines {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range perG {
				k := (i + g) % keys
				if d, _ := m.AllowN(context.Background(), fmt.Sprint("key", k), 1, 1); d.Allowed {
					admitted[g][k]++
				}
			}
		}()
	}
	for range goroutines {
		<-done
	}
	for k := range keys {
		sum := 0
		for g := range goroutines {
			sum += admitted[g][k]
		}
		if sum != limit {
			t.Errorf("key%d: %d admitted, want exactly %d", k, sum, limit)
		}
	}
	memCheck(t, m)
}

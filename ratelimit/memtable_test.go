package ratelimit

import (
	"fmt"
	"hash/maphash"
	"testing"
)

// memCheckTable checks a table's invariants: every entry is found by its
// key through the index, every used slot points at a distinct live entry,
// and the slab keeps at most one spare chunk.
func memCheckTable[S any](t *testing.T, tb *memTable[S]) {
	t.Helper()
	used := 0
	seen := make(map[uint32]bool)
	for _, s := range tb.index {
		if s == 0 {
			continue
		}
		used++
		i := uint32(s) - 1
		if int(i) >= tb.n || seen[i] {
			t.Fatalf("slot %#x points at entry %d (n = %d, seen before: %v)", s, i, tb.n, seen[i])
		}
		seen[i] = true
	}
	if used != tb.n {
		t.Fatalf("%d slots used for %d entries", used, tb.n)
	}
	for i := range tb.n {
		e := tb.at(i)
		if j := tb.lookup(e.key, uint32(memHash(tb.seed, e.key))); j != i {
			t.Fatalf("entry %d (%q) is found at %d", i, e.key, j)
		}
	}
	if spare := len(tb.chunks)*memChunk - tb.n; spare >= 2*memChunk {
		t.Fatalf("%d chunks for %d entries", len(tb.chunks), tb.n)
	}
	if tb.n > 0 && 4*tb.n > 3*len(tb.index) {
		t.Fatalf("index of %d slots for %d entries", len(tb.index), tb.n)
	}
}

// Random inserts and removals against a map: through growth and shrinking
// of index and slab, with long probe runs in small indexes.
func TestMemTableAgainstMap(t *testing.T) {
	r := newRand(3)
	tb := newMemTable[int](maphash.MakeSeed(), 99)
	model := map[string]int{}
	insert := func(k string, v int) {
		frag := uint32(memHash(tb.seed, k))
		if tb.lookup(k, frag) >= 0 {
			t.Fatalf("%q found before insertion", k)
		}
		tb.insert(k, frag, 0, v)
		model[k] = v
	}
	remove := func() {
		i := tb.random()
		delete(model, tb.at(i).key)
		tb.remove(i)
	}
	for round := range 6 {
		grow := 3000 * (round%3 + 1)
		for i := range grow {
			if k := fmt.Sprint("r", round, "-", i); r.Float64() < 0.8 {
				insert(k, i)
			} else if tb.n > 0 {
				remove()
			}
			if i%97 == 0 {
				memCheckTable(t, &tb)
			}
		}
		for tb.n > 5 { // shrink nearly to empty
			remove()
			if tb.n%101 == 0 {
				memCheckTable(t, &tb)
			}
		}
		memCheckTable(t, &tb)
		if len(tb.index) > 64 || len(tb.chunks) > 2 {
			t.Fatalf("after emptying: index %d slots, %d chunks", len(tb.index), len(tb.chunks))
		}
	}
	for k, v := range model {
		i := tb.lookup(k, uint32(memHash(tb.seed, k)))
		if i < 0 || tb.at(i).state != v {
			t.Fatalf("%q: index %d", k, i)
		}
	}
	if len(model) != tb.n {
		t.Fatalf("model %d keys, table %d", len(model), tb.n)
	}
}

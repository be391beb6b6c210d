package ratelimit

import (
	"fmt"
	"math"
	"sync"
)

// hashedOf is the store for a fixed-size state type S (GCRA, token bucket,
// leaky meter, fixed window, sliding counter) over hashed tables
// (hashTable): a key is known by its 64-bit keyed hash, its state is inline
// in its table entry. The default for those states; see Memory's "Keys and
// layout" for the collision bound and MemoryConfig.ExactKeys for the
// alternative.
type hashedOf[S any] struct {
	memRule[S]
	shards []hashShard[S]
}

var (
	_ memImpl = (*hashedOf[GCRAState])(nil)
	_ memImpl = (*memoryOf[GCRAState])(nil)
)

// hashShard is one shard of a hashedOf: its lock and table.
type hashShard[S any] struct {
	mu      sync.Mutex
	tick    uint32       // guarded by mu: decisions, to sweep every hashSweepEvery
	t       hashTable[S] // guarded by mu
	scratch S            // guarded by mu: the state of a key not yet held
	max     int          // immutable: most keys held
	counts  MemoryStats  // guarded by mu; Keys is filled in by stats
	_       [64]byte     // keeps the next shard's lock off this cache line
}

const (
	// hashSweepEvery is how many decisions of a shard go by between two
	// incremental sweeps (a power of two); each looks at hashSweepSlots
	// consecutive slots (about a cache line and a half of GCRA entries).
	hashSweepEvery = 16
	hashSweepSlots = 4
)

func newHashedOf[S any](spec Spec, cfg MemoryConfig, algo memAlgo[S]) (*hashedOf[S], error) {
	m := &hashedOf[S]{shards: make([]hashShard[S], cfg.Shards)}
	if err := m.init(spec, cfg, algo); err != nil {
		return nil, err
	}
	for i := range m.shards {
		sh := &m.shards[i]
		sh.max = cfg.MaxKeys / cfg.Shards
		sh.t = newHashTable[S](sh.max, memHash(m.seed, fmt.Sprint("shard", i))|1)
	}
	return m, nil
}

func (m *hashedOf[S]) allowN(key string, class int, now float64, cost int, out *Decision) {
	ns := toNanos(now)
	c, dec := m.config(class)
	h := memHash(m.seed, key)
	sh := &m.shards[h>>m.shift]
	h = hashIdentity(h)
	sh.mu.Lock()
	// Sweep first: dropping an entry moves others, so no entry pointer may
	// be held across it. (A key dropped here was full: deciding it as a new
	// key is the same decision.)
	if sh.tick++; sh.tick&(hashSweepEvery-1) == 0 {
		m.sweepLocked(sh, ns, c, hashSweepSlots)
	}
	e := sh.t.find(h)
	if e == nil || dec == nil {
		*out = m.slowLocked(sh, e, h, now, ns, cost, c, dec)
		sh.mu.Unlock()
		return
	}
	if ns > e.used {
		e.used = ns
	}
	// Stored straight into the caller's Decision: see memoryOf.allowN.
	*out = dec.Decide(&e.state, now, cost)
	sh.mu.Unlock()
}

// slowLocked decides for a key not held (e nil) or in a closed class (dec
// nil); ns is toNanos(now).
func (m *hashedOf[S]) slowLocked(sh *hashShard[S], e *hashEntry[S], h uint64, now float64, ns int64, cost int, c *memConfig[S], dec Decider[S]) Decision {
	if e != nil {
		if ns > e.used {
			e.used = ns
		}
		return c.closed(cost)
	}
	var d Decision
	if dec != nil {
		d = dec.Decide(&sh.scratch, now, cost)
	} else {
		d = c.closed(cost)
	}
	if !c.isFull(&sh.scratch, ns) {
		if sh.t.n >= sh.max {
			m.evictLocked(sh, ns, c)
		}
		sh.t.insert(h, ns, sh.scratch)
		sh.counts.Inserts++
	}
	var zero S
	sh.scratch = zero
	return d
}

// evictLocked removes one key of a non-empty shard: the first expired one
// of a random sample, else the sample's least recently used.
func (m *hashedOf[S]) evictLocked(sh *hashShard[S], ns int64, c *memConfig[S]) {
	victim, oldest := -1, int64(math.MaxInt64)
	for range m.sample {
		p := sh.t.random()
		if m.dropLocked(sh, p, ns, c) {
			return
		}
		if u := sh.t.slots[p].used; victim < 0 || u < oldest {
			victim, oldest = p, u
		}
	}
	sh.t.removeAt(victim)
	sh.counts.Evicted++
}

// dropLocked removes the entry in slot p if it has expired at ns and
// reports whether it did.
func (m *hashedOf[S]) dropLocked(sh *hashShard[S], p int, ns int64, c *memConfig[S]) bool {
	e := &sh.t.slots[p]
	switch m.expiry(&e.state, e.used, ns, c) {
	case memExpired:
		sh.counts.Expired++
	case memIdleExpired:
		sh.counts.IdleExpired++
	default:
		return false
	}
	sh.t.removeAt(p)
	return true
}

// sweepLocked looks at the next k slots of the shard's sweep cursor, then
// shrinks the table if it has become nearly empty.
func (m *hashedOf[S]) sweepLocked(sh *hashShard[S], ns int64, c *memConfig[S], k int) {
	t := &sh.t
	for range k {
		if t.n == 0 {
			break
		}
		if t.cursor >= len(t.slots) {
			t.cursor = 0
		}
		// A removal shifts a later entry into the slot: look at it again.
		if t.slots[t.cursor].h == 0 || !m.dropLocked(sh, t.cursor, ns, c) {
			t.cursor++
		}
	}
	t.shrink()
}

func (m *hashedOf[S]) sweep(ns int64) int {
	dropped := 0
	for i := range m.shards {
		sh := &m.shards[i]
		size, restarts := -1, 0
		for j := 0; ; {
			sh.mu.Lock()
			c := m.cfg.Load()
			t := &sh.t
			if size >= 0 && len(t.slots) != size && restarts < 2 {
				// Resized by decisions between two batches: the positions
				// have changed, start the shard again (twice at most).
				j, restarts = 0, restarts+1
			}
			size = len(t.slots)
			for k := 0; k < memSweepBatch && j < size; k++ {
				if t.slots[j].h != 0 && m.dropLocked(sh, j, ns, c) {
					dropped++
				} else {
					j++
				}
			}
			done := j >= size
			if done {
				t.shrink()
			}
			sh.mu.Unlock()
			if done {
				break
			}
		}
	}
	return dropped
}

func (m *hashedOf[S]) stats() MemoryStats {
	var st MemoryStats
	for i := range m.shards {
		sh := &m.shards[i]
		sh.mu.Lock()
		c := sh.counts
		c.Keys = sh.t.n
		st.add(c)
		sh.mu.Unlock()
	}
	return st
}

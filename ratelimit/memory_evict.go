package ratelimit

import "math"

// Keys entering and leaving a Memory: insertion into a full shard,
// eviction, expiry sweeps, and the counters of what was dropped.

// insertLocked adds key with the shard's scratch state, making room first
// if the shard is full.
func (m *memoryOf[S]) insertLocked(sh *memShard[S], key string, frag uint32, ns int64, c *memConfig[S]) {
	if sh.t.n >= sh.max {
		m.evictLocked(sh, ns, c)
	}
	sh.t.insert(key, frag, ns, sh.scratch)
	sh.counts.Inserts++
}

// evictLocked removes one key of a non-empty shard: the first expired one
// of a random sample, else the sample's least recently used.
func (m *memoryOf[S]) evictLocked(sh *memShard[S], ns int64, c *memConfig[S]) {
	victim, oldest := -1, int64(math.MaxInt64)
	for range m.sample {
		i := sh.t.random()
		e := sh.t.at(i)
		if m.dropLocked(sh, i, ns, c) {
			return
		}
		if victim < 0 || e.used < oldest {
			victim, oldest = i, e.used
		}
	}
	sh.t.remove(victim)
	sh.counts.Evicted++
}

// dropLocked removes entry i if it has expired at ns and reports whether
// it did.
func (m *memoryOf[S]) dropLocked(sh *memShard[S], i int, ns int64, c *memConfig[S]) bool {
	e := sh.t.at(i)
	switch m.expiry(&e.state, e.used, ns, c) {
	case memExpired:
		sh.counts.Expired++
	case memIdleExpired:
		sh.counts.IdleExpired++
	default:
		return false
	}
	sh.t.remove(i)
	return true
}

// sweepLocked looks at the next k entries of the shard's sweep cursor.
func (m *memoryOf[S]) sweepLocked(sh *memShard[S], ns int64, c *memConfig[S], k int) {
	for range k {
		if sh.t.n == 0 {
			return
		}
		if sh.t.cursor >= sh.t.n {
			sh.t.cursor = 0
		}
		// A dropped entry's place is taken by the last one: look at it next.
		if !m.dropLocked(sh, sh.t.cursor, ns, c) {
			sh.t.cursor++
		}
	}
}

// memSweepBatch is how many entries Sweep looks at per lock acquisition.
const memSweepBatch = 256

func (m *memoryOf[S]) sweep(ns int64) int {
	dropped := 0
	for i := range m.shards {
		sh := &m.shards[i]
		for j := 0; ; {
			sh.mu.Lock()
			c := m.cfg.Load()
			for k := 0; k < memSweepBatch && j < sh.t.n; k++ {
				if m.dropLocked(sh, j, ns, c) {
					dropped++
				} else {
					j++
				}
			}
			done := j >= sh.t.n
			sh.mu.Unlock()
			if done {
				break
			}
		}
	}
	return dropped
}

func (m *memoryOf[S]) stats() MemoryStats {
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

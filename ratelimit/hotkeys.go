package ratelimit

import (
	"cmp"
	"fmt"
	"hash/maphash"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
)

// HeavyHitters finds the hot keys of a stream (seed 002: "heavy-hitter
// detection with a count-min sketch"): the few tenants or clients that send
// most of the traffic, for metrics, for an API that lists them, and for
// Leased, which can serve only hot keys from local leases.
//
// It is a count-min sketch (Cormode and Muthukrishnan, "An improved data
// stream summary: the count-min sketch and its applications", 2005) of Depth
// rows × Width counters, updated conservatively (Estan and Varghese, 2002:
// an observation of n raises each of the key's counters only up to the
// key's previous estimate + n), plus the TopK keys with the largest
// estimates in a min-heap. Memory is fixed: Shards × Depth × Width × 4 bytes
// of counters and Shards × TopK tracked keys.
//
// # Error bound
//
// For a key observed f times (units) since the last reset, the estimate est
// satisfies f ≤ est always (the sketch never under-counts), and
// est ≤ f + ε·N with probability at least 1 − δ, where ε = e/Width,
// δ = e^−Depth and N is the units observed by the key's shard (at most the
// whole stream's). Width 1024 and Depth 4 give ε ≈ 0.27 % and δ ≈ 1.8 %.
// The rows' hash functions are derived from one seeded 64-bit maphash, each
// row mixing it anew (SplitMix64's finaliser), so a key that collides with
// another in one row is independent of it in the next. A key enters the
// top-k set when its estimate exceeds the smallest tracked one, so a key
// heavier than the shard's k-th heaviest by more than ε·N is reported.
// Counters saturate at 2^32 − 1 units per interval.
//
// # Time
//
// With Interval > 0, counts are per interval: when now passes the end of an
// interval, every counter and tracked count is multiplied by Decay (0, the
// default, starts over; 0.5 halves, so older intervals weigh less). Decay is
// applied lazily, per shard, by Observe and by Tick, with now as a
// parameter. After a decay the bounds hold for the correspondingly decayed
// counts, up to the rounding down of each counter.
//
// # Concurrency
//
// Safe for concurrent use: keys are spread over Shards shards by hash, each
// with its own mutex, sketch and top-k heap (a key always lands in the same
// shard, so its shard's sketch sees all of it). Observe locks one shard;
// Top locks each shard in turn.
type HeavyHitters struct {
	seed     maphash.Seed
	shift    uint // 64 − log2(shards)
	width    uint64
	depth    int
	k        int
	minCount uint64
	interval int64 // nanoseconds; 0: no decay
	decay    float64
	shards   []hhShard
}

// HotKeysConfig configures NewHeavyHitters; the zero value is a 1024 × 4
// sketch per shard tracking 16 keys, counting from the start without decay.
type HotKeysConfig struct {
	// Width is the counters per row, 16 to 1<<24; 0 means 1024. The error
	// bound is ε = e/Width of the shard's traffic.
	Width int
	// Depth is the rows, 1 to 16; 0 means 4. The bound fails with
	// probability δ = e^−Depth.
	Depth int
	// TopK is how many keys are tracked per shard and returned by Top, 1 to
	// 1024; 0 means 16.
	TopK int
	// Shards is a power of two from 1 to 256; 0 means the smallest power of
	// two ≥ 2×GOMAXPROCS, at most 64.
	Shards int
	// Interval is the length of a counting interval in seconds; 0 means
	// counts never decay.
	Interval float64
	// Decay multiplies every count at the end of each interval, from 0
	// (start over: counts per interval) to below 1.
	Decay float64
	// MinCount is the estimate from which a tracked key is hot (see
	// Observe); 0 means 1: every tracked key is hot.
	MinCount uint64
}

// HotKey is a tracked key and its estimated count (an over-estimate, by at
// most ε·N with probability 1 − δ).
type HotKey struct {
	Key   string
	Count uint64
}

type hhShard struct {
	mu     sync.Mutex
	counts []uint32       // guarded by mu: depth rows of width counters
	top    []HotKey       // guarded by mu: min-heap by Count, len ≤ k
	pos    map[string]int // guarded by mu: key → index in top
	epoch  int64          // guarded by mu: start of the current interval, ns
	_      [64]byte
}

const hhMaxDepth = 16

// NewHeavyHitters returns a tracker for cfg, or an error wrapping
// ErrInvalidKeyedConfig that names the bad field.
func NewHeavyHitters(cfg HotKeysConfig) (*HeavyHitters, error) {
	bad := func(format string, args ...any) (*HeavyHitters, error) {
		return nil, fmt.Errorf("%w: "+format, append([]any{ErrInvalidKeyedConfig}, args...)...)
	}
	if cfg.Width == 0 {
		cfg.Width = 1024
	}
	if cfg.Depth == 0 {
		cfg.Depth = 4
	}
	if cfg.TopK == 0 {
		cfg.TopK = 16
	}
	if cfg.Shards == 0 {
		cfg.Shards = 1
		for cfg.Shards < 2*runtime.GOMAXPROCS(0) && cfg.Shards < 64 {
			cfg.Shards <<= 1
		}
	}
	if cfg.MinCount == 0 {
		cfg.MinCount = 1
	}
	switch {
	case cfg.Width < 16 || cfg.Width > 1<<24:
		return bad("Width must be from 16 to %d, got %d", 1<<24, cfg.Width)
	case cfg.Depth < 1 || cfg.Depth > hhMaxDepth:
		return bad("Depth must be from 1 to %d, got %d", hhMaxDepth, cfg.Depth)
	case cfg.TopK < 1 || cfg.TopK > 1024:
		return bad("TopK must be from 1 to 1024, got %d", cfg.TopK)
	case cfg.Shards < 1 || cfg.Shards > 256 || cfg.Shards&(cfg.Shards-1) != 0:
		return bad("Shards must be a power of two from 1 to 256, got %d", cfg.Shards)
	case !(cfg.Interval >= 0) || math.IsInf(cfg.Interval, 1):
		return bad("Interval must be a finite number of seconds ≥ 0, got %v", cfg.Interval)
	case !(cfg.Decay >= 0 && cfg.Decay < 1):
		return bad("Decay must be in [0, 1), got %v", cfg.Decay)
	}
	h := &HeavyHitters{seed: maphash.MakeSeed(), width: uint64(cfg.Width), depth: cfg.Depth, k: cfg.TopK,
		minCount: cfg.MinCount, interval: hhInterval(cfg.Interval), decay: cfg.Decay, shards: make([]hhShard, cfg.Shards)}
	bits := uint(0)
	for 1<<bits < cfg.Shards {
		bits++
	}
	h.shift = 64 - bits
	for i := range h.shards {
		sh := &h.shards[i]
		sh.counts = make([]uint32, cfg.Depth*cfg.Width)
		sh.top = make([]HotKey, 0, cfg.TopK)
		sh.pos = make(map[string]int, cfg.TopK)
	}
	return h, nil
}

// hash returns the key's shard and 64-bit hash.
func (h *HeavyHitters) hash(key string) (*hhShard, uint64) {
	x := maphash.String(h.seed, key)
	return &h.shards[(x*0x9e3779b97f4a7c15)>>h.shift], x
}

// cell returns the index of row i's counter for the key hash x: the hash
// offset by i golden-ratio steps, mixed by the SplitMix64 finaliser, so
// that keys colliding in one row are independent in the next.
func (h *HeavyHitters) cell(i int, x uint64) int {
	z := x + uint64(i+1)*0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	z ^= z >> 31
	return i*int(h.width) + int((z>>32)*h.width>>32)
}

// Observe counts n units (a request's cost, or 1) for key at now (seconds)
// and returns the key's estimate and whether it is hot: tracked in its
// shard's top-k set with an estimate of at least MinCount. An n ≤ 0 counts
// nothing (a query). It does not allocate unless the key enters the top-k
// set, which copies the key (a bounded allocation: at most one per entry to
// the set).
func (h *HeavyHitters) Observe(key string, n int, now float64) (estimate uint64, hot bool) {
	sh, x := h.hash(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	h.decayLocked(sh, toNanos(now))
	var cells [hhMaxDepth]int
	est := uint64(math.MaxUint32)
	for i := range h.depth {
		cells[i] = h.cell(i, x)
		est = min(est, uint64(sh.counts[cells[i]]))
	}
	if n <= 0 {
		i, ok := sh.pos[key]
		return est, ok && sh.top[i].Count >= h.minCount
	}
	est = min(est+uint64(n), math.MaxUint32)
	for _, c := range cells[:h.depth] {
		if uint64(sh.counts[c]) < est {
			sh.counts[c] = uint32(est)
		}
	}
	return est, h.trackLocked(sh, key, est)
}

// trackLocked records key's new estimate in the shard's top-k heap and
// reports whether the key is hot.
func (h *HeavyHitters) trackLocked(sh *hhShard, key string, est uint64) bool {
	if i, ok := sh.pos[key]; ok {
		sh.top[i].Count = est
		hhDown(sh, i)
		return est >= h.minCount
	}
	switch {
	case len(sh.top) < h.k:
		k := strings.Clone(key)
		sh.top = append(sh.top, HotKey{k, est})
		sh.pos[k] = len(sh.top) - 1
		hhUp(sh, len(sh.top)-1)
	case est > sh.top[0].Count:
		delete(sh.pos, sh.top[0].Key)
		k := strings.Clone(key)
		sh.top[0] = HotKey{k, est}
		sh.pos[k] = 0
		hhDown(sh, 0)
	default:
		return false
	}
	return est >= h.minCount
}

// Estimate returns key's estimated count (never below the true count).
func (h *HeavyHitters) Estimate(key string) uint64 {
	sh, x := h.hash(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	est := uint64(math.MaxUint32)
	for i := range h.depth {
		est = min(est, uint64(sh.counts[h.cell(i, x)]))
	}
	return est
}

// Tick applies the decays due at now to every shard; Observe does it for
// the shard it touches. Call it before Top when observations are rare.
func (h *HeavyHitters) Tick(now float64) {
	ns := toNanos(now)
	for i := range h.shards {
		sh := &h.shards[i]
		sh.mu.Lock()
		h.decayLocked(sh, ns)
		sh.mu.Unlock()
	}
}

// Top appends the TopK keys with the largest estimates, largest first (ties
// by key), to dst[:0] and returns it. The counts are the sketch's current
// estimates. Pass the previous result to reuse its array.
func (h *HeavyHitters) Top(dst []HotKey) []HotKey {
	dst = dst[:0]
	for i := range h.shards {
		sh := &h.shards[i]
		sh.mu.Lock()
		for _, hk := range sh.top {
			_, x := h.hash(hk.Key)
			est := uint64(math.MaxUint32)
			for r := range h.depth {
				est = min(est, uint64(sh.counts[h.cell(r, x)]))
			}
			if est > 0 {
				dst = append(dst, HotKey{hk.Key, est})
			}
		}
		sh.mu.Unlock()
	}
	slices.SortFunc(dst, func(a, b HotKey) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	if len(dst) > h.k {
		dst = dst[:h.k]
	}
	return dst
}

// hhInterval is HotKeysConfig.Interval in nanoseconds (0: no decay).
func hhInterval(seconds float64) int64 {
	if seconds > 0 {
		return durationNanos(seconds)
	}
	return 0
}

// decayLocked multiplies the shard's counts by Decay once per interval
// that has ended by now.
func (h *HeavyHitters) decayLocked(sh *hhShard, ns int64) {
	if h.interval == 0 || ns-sh.epoch < h.interval {
		return
	}
	periods := (ns - sh.epoch) / h.interval
	sh.epoch += periods * h.interval
	f := 0.0
	if h.decay > 0 {
		f = math.Pow(h.decay, float64(periods))
	}
	if f == 0 {
		clear(sh.counts)
		clear(sh.pos)
		sh.top = sh.top[:0]
		return
	}
	for i, c := range sh.counts {
		sh.counts[i] = uint32(float64(c) * f)
	}
	kept := sh.top[:0]
	for _, hk := range sh.top {
		if hk.Count = uint64(float64(hk.Count) * f); hk.Count > 0 {
			kept = append(kept, hk)
		} else {
			delete(sh.pos, hk.Key)
		}
	}
	clear(sh.top[len(kept):])
	sh.top = kept
	// Scaling keeps the heap order; dropping keys needs a rebuild.
	for i := len(sh.top)/2 - 1; i >= 0; i-- {
		hhDown(sh, i)
	}
	for i, hk := range sh.top {
		sh.pos[hk.Key] = i
	}
}

// hhUp and hhDown restore the min-heap property of sh.top around i,
// keeping sh.pos in step.
func hhUp(sh *hhShard, i int) {
	for i > 0 {
		p := (i - 1) / 2
		if sh.top[p].Count <= sh.top[i].Count {
			return
		}
		hhSwap(sh, i, p)
		i = p
	}
}

func hhDown(sh *hhShard, i int) {
	n := len(sh.top)
	for {
		c := 2*i + 1
		if c >= n {
			return
		}
		if c+1 < n && sh.top[c+1].Count < sh.top[c].Count {
			c++
		}
		if sh.top[i].Count <= sh.top[c].Count {
			return
		}
		hhSwap(sh, i, c)
		i = c
	}
}

func hhSwap(sh *hhShard, i, j int) {
	sh.top[i], sh.top[j] = sh.top[j], sh.top[i]
	sh.pos[sh.top[i].Key] = i
	sh.pos[sh.top[j].Key] = j
}

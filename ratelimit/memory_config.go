package ratelimit

import (
	"errors"
	"fmt"
	"math"
	"runtime"
)

// MemoryConfig configures NewMemory. The zero value is a million keys in
// 64 or 4×GOMAXPROCS shards, exact expiry only, one class at full rate,
// keys told apart by their keyed hash where the state allows it (see
// ExactKeys).
type MemoryConfig struct {
	// MaxKeys is the most keys the store holds; 0 means DefaultMaxKeys.
	// Each shard holds at most MaxKeys/Shards (rounded down); see Memory
	// for what happens when a shard is full.
	MaxKeys int
	// Shards is the number of shards, a power of two from 1 to MaxKeys (and
	// MaxKeys/Shards below 2^31); 0 means the smallest power of two
	// ≥ 4×GOMAXPROCS, at least 64 and at most 1024 (fewer if MaxKeys is
	// smaller). More shards, fewer goroutines waiting for one another.
	Shards int
	// IdleTTL drops a key unused for that many seconds even if its state is
	// not full (see Memory); 0 means never: keys expire only when full
	// again or to make room.
	IdleTTL float64
	// EvictSample is how many keys a full shard samples to find an expired
	// key or, failing that, the least recently used one; 1 to 64, 0 means 5.
	EvictSample int
	// Classes are the load classes' curves, most important first (see
	// ClassCurve); at most MaxLoadClasses. Empty means one class scaled
	// in proportion to health: {Low: 0, High: 1}.
	Classes []ClassCurve
	// Health, if not nil, returns the backend's health in [0, 1]; AllowN
	// calls it at most once per HealthInterval seconds (of the decisions'
	// now), in the deciding goroutine and without holding any lock, and
	// applies it as SetHealth does. It must be fast and must not block.
	Health func() float64
	// HealthInterval is the least time between two calls of Health, in
	// seconds; 0 means 1.
	HealthInterval float64
	// ExactKeys keeps each key's string and tells keys apart by comparing
	// strings, in the exact-key table, rather than by their 64-bit keyed
	// hash in the hashed table (see Memory's "Keys"). It rules out sharing
	// a budget by a hash collision, at the cost of a copy of every key,
	// more memory per key and about twice the time per decision with many
	// keys. The sliding log and the leaky queue always use the exact-key
	// table.
	ExactKeys bool
}

// DefaultMaxKeys is MemoryConfig.MaxKeys when zero.
const DefaultMaxKeys = 1 << 20

// ErrInvalidKeyedConfig is wrapped, with the field named, by the errors of
// NewMemory, NewLeased and NewHeavyHitters for a configuration they refuse.
var ErrInvalidKeyedConfig = errors.New("ratelimit: invalid keyed configuration")

// MemoryStats counts what a Memory holds and has dropped, for metrics.
type MemoryStats struct {
	Keys        int    // keys held now
	Inserts     uint64 // keys added since creation
	Expired     uint64 // keys dropped because their state was full again (changes no decision)
	IdleExpired uint64 // keys dropped by IdleTTL while not full (they restart full)
	Evicted     uint64 // keys evicted to make room at MaxKeys (they restart full)
}

// add adds o's counts to s.
func (s *MemoryStats) add(o MemoryStats) {
	s.Keys += o.Keys
	s.Inserts += o.Inserts
	s.Expired += o.Expired
	s.IdleExpired += o.IdleExpired
	s.Evicted += o.Evicted
}

func (cfg MemoryConfig) withDefaults() (MemoryConfig, error) {
	bad := func(format string, args ...any) (MemoryConfig, error) {
		return cfg, fmt.Errorf("%w: "+format, append([]any{ErrInvalidKeyedConfig}, args...)...)
	}
	if cfg.MaxKeys == 0 {
		cfg.MaxKeys = DefaultMaxKeys
	}
	if cfg.MaxKeys < 0 {
		return bad("MaxKeys must not be negative, got %d", cfg.MaxKeys)
	}
	if cfg.Shards == 0 {
		cfg.Shards = defaultShards(cfg.MaxKeys)
	}
	switch s := cfg.Shards; {
	case s < 0 || s&(s-1) != 0:
		return bad("Shards must be a power of two, got %d", s)
	case s > cfg.MaxKeys:
		return bad("Shards (%d) must not exceed MaxKeys (%d)", s, cfg.MaxKeys)
	case cfg.MaxKeys/s >= 1<<31:
		return bad("MaxKeys/Shards must be below 2^31, got %d", cfg.MaxKeys/s)
	}
	if !(cfg.IdleTTL >= 0) || math.IsInf(cfg.IdleTTL, 1) {
		return bad("IdleTTL must be a finite number of seconds ≥ 0, got %v", cfg.IdleTTL)
	}
	if cfg.EvictSample == 0 {
		cfg.EvictSample = 5
	}
	if cfg.EvictSample < 1 || cfg.EvictSample > 64 {
		return bad("EvictSample must be from 1 to 64, got %d", cfg.EvictSample)
	}
	if len(cfg.Classes) == 0 {
		cfg.Classes = []ClassCurve{{Low: 0, High: 1}}
	}
	if err := validateCurves(cfg.Classes); err != nil {
		return cfg, err
	}
	cfg.Classes = append([]ClassCurve(nil), cfg.Classes...)
	if cfg.HealthInterval == 0 {
		cfg.HealthInterval = 1
	}
	if !(cfg.HealthInterval > 0) || math.IsInf(cfg.HealthInterval, 1) {
		return bad("HealthInterval must be a positive finite number of seconds, got %v", cfg.HealthInterval)
	}
	return cfg, nil
}

// defaultShards is the smallest power of two ≥ 4×GOMAXPROCS, from 64 to
// 1024, and at most maxKeys.
func defaultShards(maxKeys int) int {
	n := 4 * runtime.GOMAXPROCS(0)
	n = min(max(n, 64), 1024)
	p := 1
	for p < n {
		p <<= 1
	}
	for p > 1 && p > maxKeys {
		p >>= 1
	}
	return p
}

package ratelimit

// Algorithm names an algorithm of this package, for the memory model.
type Algorithm int

// The algorithms.
const (
	AlgTokenBucket Algorithm = iota + 1
	AlgLeakyMeter
	AlgLeakyQueue
	AlgFixedWindow
	AlgSlidingLog
	AlgSlidingCounter
	AlgGCRA
)

var algNames = [...]string{"", "token bucket", "leaky bucket (meter)", "leaky bucket (queue)",
	"fixed window", "sliding log", "sliding window counter", "GCRA"}

// String returns the algorithm's name as the seed writes it.
func (a Algorithm) String() string {
	if a < AlgTokenBucket || a > AlgGCRA {
		return "unknown"
	}
	return algNames[a]
}

// The byte sizes of seed 002's memory model.
const (
	TimestampBytes      = 8  // a time or a token count: a float64
	CounterBytes        = 4  // a count or a window id: a uint32
	SortedSetEntryBytes = 64 // one member of a store's sorted set (Redis ZSET), with its overhead
)

// StateBytes is the per-key state of algorithm a in the seed's model, for a
// limit of limit units (Burst for the bucket algorithms, the queue size for
// the leaky queue, Limit for the windows): the payload only, without the key
// and the store's per-key overhead. The package's state types are this size
// (the ring-based ones plus a 32-byte slice header). It returns 0 for an
// unknown algorithm.
//
//	token bucket, leaky meter  tokens (float64) + last time          16
//	leaky queue                next free time + limit release times  8·(limit+1)
//	fixed window               count + window id                     8
//	sliding log                up to limit timestamps                8·limit
//	sliding window counter     current + previous count + window id  12
//	GCRA                       theoretical arrival time              8
func StateBytes(a Algorithm, limit int) int {
	switch a {
	case AlgTokenBucket, AlgLeakyMeter:
		return 2 * TimestampBytes
	case AlgLeakyQueue:
		return (limit + 1) * TimestampBytes
	case AlgFixedWindow:
		return 2 * CounterBytes
	case AlgSlidingLog:
		return limit * TimestampBytes
	case AlgSlidingCounter:
		return 3 * CounterBytes
	case AlgGCRA:
		return TimestampBytes
	}
	return 0
}

// SortedSetLogBytes is a sliding log of limit timestamps kept in a store's
// sorted set at SortedSetEntryBytes per entry, the seed's estimate for Redis.
func SortedSetLogBytes(limit int) int { return limit * SortedSetEntryBytes }

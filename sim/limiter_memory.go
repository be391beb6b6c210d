package sim

import (
	"strconv"

	"github.com/spillwayhq/spillway/ratelimit"
)

var limiterMemory = Scenario{
	Name:    "limiter-memory",
	Ref:     "limiter_memory",
	Summary: "bytes of limiter state per algorithm for millions of users (ratelimit.StateBytes)",
	Bind: func(f *Flags) Runner {
		users := f.Int("users", 10_000_000, Positive, 1e12, "users (keys) with limiter state (at most 1e12)")
		limit := f.Int("limit", 100, Positive, 1e9, "requests allowed per user per window; the sliding log keeps that many timestamps (at most 1e9)")
		keyBytes := f.Int("key-bytes", 64, NonNegative, 1e6, "flat overhead per key: key string plus hash-table entry, bytes (at most 1e6)")
		active := f.Float("active", 0.05, Fraction, "share of users active at peak; idle keys expire (TTL)")
		return func() (*Report, error) { return runLimiterMemory(*users, *limit, *keyBytes, *active), nil }
	},
}

func runLimiterMemory(users, limit, keyBytes int, active float64) *Report {
	algos := []struct {
		name  string
		state int
		what  string
	}{
		{"sliding log", ratelimit.StateBytes(ratelimit.AlgSlidingLog, limit), "up to " + Int(limit) + " timestamps x 8 B"},
		{"sliding log, 64 B/entry", ratelimit.SortedSetLogBytes(limit), "assume ~64 B per entry in a sorted set"},
		{"fixed window", ratelimit.StateBytes(ratelimit.AlgFixedWindow, limit), "count + window id"},
		{"sliding window counter", ratelimit.StateBytes(ratelimit.AlgSlidingCounter, limit), "current + previous count + window id"},
		{"token bucket", ratelimit.StateBytes(ratelimit.AlgTokenBucket, limit), "tokens (double) + last refill time"},
		{"GCRA", ratelimit.StateBytes(ratelimit.AlgGCRA, limit), "one timestamp: theoretical arrival time"},
	}
	n := float64(users)
	r := &Report{}
	r.Println("algorithm                state B  +key B" + PadStart("total for "+Num(n/1e6)+"M users", 21) + "  stored")
	table := r.Table("algorithms", "algorithm", "state_bytes", "per_key_bytes", "total_bytes", "stored")
	for _, a := range algos {
		per := a.state + keyBytes
		total := float64(per) * n
		r.Println(PadEnd(a.name, 24) + PadStart(Int(a.state), 8) + PadStart(Int(per), 8) + PadStart(memHuman(total), 21) + "  " + a.what)
		table.Add(a.name, a.state, per, total, a.what)
	}
	activeUsers := active * n
	logBytes := float64(ratelimit.StateBytes(ratelimit.AlgSlidingLog, limit)+keyBytes) * activeUsers
	bucketBytes := float64(ratelimit.StateBytes(ratelimit.AlgTokenBucket, limit)+keyBytes) * activeUsers
	r.Println("")
	r.Println("if only " + memPercent(active) + "% (" + Num(activeUsers/1e6) + "M) are active: sliding log " +
		memHuman(logBytes) + ", token bucket " + memHuman(bucketBytes))
	r.Table("active", "active_share", "active_users", "sliding_log_bytes", "token_bucket_bytes").
		Add(active, activeUsers, logBytes, bucketBytes)
	return r
}

// memHuman writes bytes as GB with two decimals from 1e9 up, else as whole MB.
func memHuman(b float64) string {
	if b >= 1e9 {
		return Fixed(b/1e9, 2) + " GB"
	}
	return Fixed(b/1e6, 0) + " MB"
}

// memPercent writes a share as a percentage without float noise
// (0.07 → "7", not "7.000000000000001").
func memPercent(share float64) string {
	p, _ := strconv.ParseFloat(Fixed(share*100, 6), 64)
	return Num(p)
}

//go:build !race

package h2wire

// raceEnabled reports whether the race detector is on: its sync.Pool drops
// items at random, so allocation counts are checked only without it.
const raceEnabled = false

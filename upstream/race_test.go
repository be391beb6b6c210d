//go:build race

package upstream

// raceEnabled reports whether the race detector is on: its sync.Pool drops
// items at random, so allocation counts are checked only without it.
const raceEnabled = true

//go:build !race

package route

// raceEnabled reports whether the race detector is on: its sync.Pool drops
// items on purpose, so allocation counts are not the program's.
const raceEnabled = false

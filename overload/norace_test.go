//go:build !race

package overload

// raceOn: the race detector changes allocation counts.
const raceOn = false

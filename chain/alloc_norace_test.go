//go:build !race

package chain

// raceOn: the race detector drops sync.Pool items on purpose, so
// allocation counts under it are not the program's.
const raceOn = false

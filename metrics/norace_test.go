//go:build !race

package metrics

// raceOn: allocation counts under the race detector are not the
// program's.
const raceOn = false

//go:build !race

package listener

// raceOn: the race detector slows the proxy several times over.
const raceOn = false

//go:build !race

package clientgrpc_test

// raceEnabled reports whether the race detector is on.
const raceEnabled = false

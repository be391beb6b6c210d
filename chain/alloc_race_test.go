//go:build race

package chain

const raceOn = true

//go:build race

package listener

const raceOn = true

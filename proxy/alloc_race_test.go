//go:build race

package proxy

const raceOn = true

//go:build race

package metrics

const raceOn = true

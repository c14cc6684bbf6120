//go:build race

package storetest

// raceEnabled relaxes timing bounds: the race detector slows code ~20×.
const raceEnabled = true

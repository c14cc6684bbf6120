package main

import (
	"log/slog"
	"runtime"
)

// minProcs is the fewest processors (GOMAXPROCS) a server on SQLite runs
// Go code on. The group commit's writer holds its processor through the
// WAL's fsync (0.3–1 ms here), and the runtime gives a processor blocked
// in a system call to other goroutines only once its monitor (sysmon) has
// seen the same call on two of its ticks: 20 µs apart at the least, up to
// 10 ms when it finds little to do, and ~0.3 ms on average on this
// machine kind (~3,500 ticks a second, BENCHMARKS.md session 21), so an
// fsync mostly ends first. With one processor nothing else then runs while
// the disk syncs: requests queue behind every commit and the batches
// shrink to one or two writes.
// Measured on one CPU (BENCHMARKS.md, "Issue 22 (session 23)"): route_item
// 1,779 calls/s with one processor and 4,243 with two, the capability call
// 553 and 1,588. Go picks one processor for one CPU, and since Go 1.25 for
// a container's CPU limit of one.
const minProcs = 2

// procsFor is the GOMAXPROCS a SQLite server runs with, given the
// runtime's current one and the GOMAXPROCS variable: at least minProcs,
// unless the variable sets it (an operator's explicit choice stands).
func procsFor(current int, env string) int {
	if env != "" || current >= minProcs {
		return current
	}
	return minProcs
}

// raiseProcs gives a server on SQLite at least minProcs processors, and
// logs the change; with GOMAXPROCS set below that it only warns. Setting
// it stops the runtime's own updates of GOMAXPROCS when a container's CPU
// limit changes, so it is done only where the default is too few.
func raiseProcs(getenv func(string) string, log *slog.Logger) {
	cur, env := runtime.GOMAXPROCS(0), getenv("GOMAXPROCS")
	switch n := procsFor(cur, env); {
	case n != cur:
		runtime.GOMAXPROCS(n)
		log.Info(procsRaised, "from", cur, "to", n)
	case cur < minProcs:
		log.Warn(procsLow, "GOMAXPROCS", env)
	}
}

// The log messages of raiseProcs, which the tests look for.
const (
	procsRaised = "GOMAXPROCS raised: the writer's fsync would otherwise stall every request"
	procsLow    = "GOMAXPROCS below 2: every request waits while the writer's fsync holds the one processor"
)

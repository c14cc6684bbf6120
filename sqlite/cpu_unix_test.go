//go:build unix

package sqlite

import (
	"syscall"
	"testing"
	"time"
)

// processCPU is the CPU the process has used, user and kernel.
func processCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

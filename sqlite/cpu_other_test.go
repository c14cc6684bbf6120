//go:build !unix

package sqlite

import (
	"testing"
	"time"
)

// processCPU is not read here: the benchmarks report 0 CPU.
func processCPU(testing.TB) time.Duration { return 0 }

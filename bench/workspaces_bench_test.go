package bench

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/ladderhq/ladder/internal/testenv"
	"github.com/ladderhq/ladder/mcp"
)

// BenchmarkMCPWorkspaceHeap reports the heap an MCP handler keeps for each
// workspace it serves (its tool definitions, schemas and SDK server), live
// for as long as the process runs, and twice that at the collector's peak
// (GOGC 100): a deployment's memory grows with its workspaces by this much.
// "plain" is a config of 100 workspaces of four steps each (no capability,
// no gate case); "demo" is the demo's config, whose four workspaces have
// capabilities and gate cases.
//
//	go test ./bench -run '^$' -bench '^BenchmarkMCPWorkspaceHeap$' -benchtime 5x
func BenchmarkMCPWorkspaceHeap(b *testing.B) {
	var y strings.Builder
	y.WriteString("server:\n  listen: 127.0.0.1:0\nworkspaces:\n")
	for i := range 100 {
		fmt.Fprintf(&y, `  - id: ws-%03d
    name: Workspace %d
    queues:
      - id: check_calls
        name: Check calls
        steps:
          - {id: capture_eta, name: Capture the ETA, lane: auto, weekly_volume: 900}
          - {id: call_driver, name: Call the driver, lane: propose, weekly_volume: 250}
          - {id: flag_late, name: Flag a late load, lane: shadow, weekly_volume: 80}
          - {id: update_customer, name: Update the customer, lane: propose, weekly_volume: 80}
`, i, i)
	}
	b.Run("plain", func(b *testing.B) { workspaceHeap(b, y.String(), 100) })
	b.Run("demo", func(b *testing.B) { workspaceHeap(b, "", 4) })
}

// workspaceHeap measures the heap mcp.New keeps for config (the demo's
// when empty), which has the given number of workspaces.
func workspaceHeap(b *testing.B, config string, workspaces int) {
	e := testenv.StartWith(b, config, testenv.Options{})
	if n := len(e.Svc.WorkspaceIDs()); n != workspaces {
		b.Fatalf("%d workspaces, want %d", n, workspaces)
	}
	// The process-wide parts (shared schema documents, the SDK's own
	// package state) are built once, before the measure.
	if _, err := mcp.New(mcp.Options{Service: e.Svc}); err != nil {
		b.Fatal(err)
	}
	var kept uint64
	for b.Loop() {
		before := heapAfterGC()
		h, err := mcp.New(mcp.Options{Service: e.Svc})
		if err != nil {
			b.Fatal(err)
		}
		kept += heapAfterGC() - before
		runtime.KeepAlive(h)
	}
	b.ReportMetric(float64(kept)/float64(b.N)/float64(workspaces), "heap-B/workspace")
}

// heapAfterGC is the live heap after a full collection.
func heapAfterGC() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

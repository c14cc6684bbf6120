package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/internal/groupcommit"
)

func TestLaneChanges(t *testing.T) {
	reg := prometheus.NewRegistry()
	observe := LaneChanges(reg)
	for _, c := range []ladder.LaneChange{
		{Workspace: "ops", From: ladder.LaneAuto, To: ladder.LanePropose},
		{Workspace: "ops", From: ladder.LaneShadow, To: ladder.LanePropose},
		{Workspace: "ops", From: ladder.LanePropose, To: ladder.LaneHumanOnly},
		{Workspace: "ops", From: ladder.LaneShadow, To: ladder.LaneShadow},
	} {
		observe(c)
	}
	want := `
# HELP ladder_lane_changes_total Lane changes committed by this replica, by workspace and direction: promotion, demotion (toward human_only), or same (a pin or unpin that keeps the lane).
# TYPE ladder_lane_changes_total counter
ladder_lane_changes_total{direction="demotion",workspace="ops"} 2
ladder_lane_changes_total{direction="promotion",workspace="ops"} 1
ladder_lane_changes_total{direction="same",workspace="ops"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "ladder_lane_changes_total"); err != nil {
		t.Error(err)
	}
}

func TestStoreWrites(t *testing.T) {
	reg := prometheus.NewRegistry()
	stats := groupcommit.Stats{Batches: 3, Ops: 40, Lingers: 6, Expired: 2, Grown: 3}
	StoreWrites(reg, func() groupcommit.Stats { return stats })
	want := `
# HELP ladder_store_commit_waits_total Waits for more writes before a small commit (the SQLite store's linger), by what ended them: writes (the batch grew) or timer.
# TYPE ladder_store_commit_waits_total counter
ladder_store_commit_waits_total{ended="timer"} 2
ladder_store_commit_waits_total{ended="writes"} 3
# HELP ladder_store_commits_total Write transactions the store committed or tried to (group commit: each carries every write that arrived while the last one ran, and syncs once).
# TYPE ladder_store_commits_total counter
ladder_store_commits_total 3
# HELP ladder_store_writes_total Writes the store ran in those transactions; its rate over ladder_store_commits_total's is the batch size.
# TYPE ladder_store_writes_total counter
ladder_store_writes_total 40
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "ladder_store_commits_total", "ladder_store_writes_total", "ladder_store_commit_waits_total"); err != nil {
		t.Error(err)
	}
	// Read when scraped, not when registered.
	stats.Ops = 41
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP ladder_store_writes_total Writes the store ran in those transactions; its rate over ladder_store_commits_total's is the batch size.
# TYPE ladder_store_writes_total counter
ladder_store_writes_total 41
`), "ladder_store_writes_total"); err != nil {
		t.Error(err)
	}
}

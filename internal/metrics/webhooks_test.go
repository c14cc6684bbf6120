package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ladderhq/ladder"
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

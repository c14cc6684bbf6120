package service

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ladderhq/ladder"
)

// TestRouteAuditData holds a route's audit data to the map it was built
// from before: the same canonical bytes, so records and their hashes are
// unchanged.
func TestRouteAuditData(t *testing.T) {
	tests := []ladder.Route{
		{Queue: "bills", Step: "post_tms", Item: "B-1", Decision: ladder.DecisionActAlone, Lane: ladder.LaneAuto, AuditRate: 0.05},
		{Queue: "bills", Step: "post_tms", Item: `<a&b> "q" é`, Decision: ladder.DecisionActAlone, Lane: ladder.LaneShadow, Audit: true, AuditRate: 1, LaneEpoch: 7,
			Features: json.RawMessage(`{"weight":1.50,"carrier":"x"}`)},
		{Queue: "q", Step: "s", Item: "i", Features: json.RawMessage(`[]`), AuditRate: 1e-7},
	}
	for _, r := range tests {
		old := map[string]any{
			"queue": r.Queue, "step": r.Step, "item": r.Item, "decision": r.Decision, "lane": r.Lane, "lane_epoch": r.LaneEpoch,
			"audit": r.Audit, "audit_rate": r.AuditRate, "features": r.Features,
		}
		want, err := ladder.CanonicalJSON(old)
		if err != nil {
			t.Fatal(err)
		}
		data, err := r.AuditData()
		if err != nil {
			t.Fatal(err)
		}
		got, err := ladder.CanonicalJSON(data)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(string(want), string(got)); diff != "" {
			t.Errorf("route %q audit data (-want +got):\n%s", r.Item, diff)
		}
	}
}

package console_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ladderhq/ladder"
)

// TestDeliveriesPage: a person reads where the workspace's events went,
// with the tries and the last error of each, and filters to dead letters.
func TestDeliveriesPage(t *testing.T) {
	e := seeded(t)
	requestApproval(t, e, "BILL-HOOK-1")
	// Fan the events out as a configured webhook "ops" would, and record
	// one failed try of each.
	if _, err := e.Store.FanOut(t.Context(), 1000, func(ev ladder.Event) []string { return []string{ev.Workspace + "/ops"} }); err != nil {
		t.Fatal(err)
	}
	ds, err := e.Store.ClaimDeliveries(t.Context(), 1000, time.Minute, map[string]int{ws + "/ops": 1000})
	if err != nil || len(ds) == 0 {
		t.Fatalf("claim: %v %v", ds, err)
	}
	for _, d := range ds {
		if err := e.Store.FinishDelivery(t.Context(), ladder.DeliveryResult{ID: d.ID, Dead: true, Error: "the endpoint answered HTTP 503", StatusCode: 503}); err != nil {
			t.Fatal(err)
		}
	}
	c := signedIn(t, e, ws)
	p := c.get("/console/webhooks?status=dead")
	if p.Status != 200 {
		t.Fatalf("deliveries page: %d %s", p.Status, p.Body)
	}
	contains(t, p.Body, "Webhook deliveries", ladder.EventApprovalRequested, ws+"/ops", "the endpoint answered HTTP 503 (HTTP 503)", "ladder webhooks redeliver")
	if n := strings.Count(p.Body, `<tr id="dlv_`); n != len(ds) {
		t.Errorf("%d rows, want %d", n, len(ds))
	}
	if p := c.get("/console/webhooks?status=delivered"); !strings.Contains(p.Body, "No deliveries match.") {
		t.Errorf("delivered filter shows rows: %s", p.Body)
	}
	if p := c.get("/console/webhooks?status=lost"); p.Status != 400 || !strings.Contains(p.Body, "allowed values: pending, delivered, dead") {
		t.Errorf("bad status: %d", p.Status)
	}
}

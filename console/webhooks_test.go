package console_test

import (
	"net/http"
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

// TestRedeliverFromConsole: the nav links the deliveries page; a dead
// letter has a Send again button whose form (with the CSRF token) makes
// it pending and due now; a form without the token, or naming a delivery
// that is not the workspace's, changes nothing.
func TestRedeliverFromConsole(t *testing.T) {
	e := seeded(t)
	requestApproval(t, e, "BILL-HOOK-2")
	if _, err := e.Store.FanOut(t.Context(), 1000, func(ev ladder.Event) []string { return []string{ev.Workspace + "/ops"} }); err != nil {
		t.Fatal(err)
	}
	ds, err := e.Store.ClaimDeliveries(t.Context(), 1, time.Minute, map[string]int{ws + "/ops": 1})
	if err != nil || len(ds) != 1 {
		t.Fatalf("claim: %v %v", ds, err)
	}
	dead := ds[0]
	if err := e.Store.FinishDelivery(t.Context(), ladder.DeliveryResult{ID: dead.ID, Dead: true, Error: "HTTP 503", StatusCode: 503}); err != nil {
		t.Fatal(err)
	}
	c := signedIn(t, e, ws)
	p := c.get("/console/webhooks")
	contains(t, p.Body, `<a href="/console/webhooks" aria-current="page">Webhooks</a>`, `action="/console/webhooks/`+dead.ID+`/redeliver"`)
	if n, rows := strings.Count(p.Body, `class="redeliver"`), strings.Count(p.Body, `<tr id="dlv_`); n != 1 || rows < 2 {
		t.Errorf("%d Send again buttons over %d rows, want one: only the dead letter's", n, rows)
	}
	if o := c.get("/console/overview"); !strings.Contains(o.Body, `<a href="/console/webhooks">Webhooks</a>`) {
		t.Errorf("the nav lacks the webhooks link")
	}
	status := func() (ladder.DeliveryStatus, int) {
		t.Helper()
		got, err := e.Store.ListDeliveries(t.Context(), ladder.DeliveryQuery{Workspace: ws, Limit: 500})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range got {
			if d.ID == dead.ID {
				return d.Status, d.Attempts
			}
		}
		t.Fatalf("delivery %s is gone", dead.ID)
		return "", 0
	}

	if r := c.post("/console/webhooks/"+dead.ID+"/redeliver", nil); r.Status == http.StatusSeeOther {
		t.Fatalf("redeliver without the CSRF token: %d %s", r.Status, r.Location)
	}
	if st, _ := status(); st != ladder.DeliveryDead {
		t.Fatalf("a form without the CSRF token changed the delivery to %s", st)
	}
	if r := c.action("/console/webhooks", "/console/webhooks/dlv_not_ours/redeliver", nil); r.Status != http.StatusNotFound {
		t.Errorf("redeliver of an unknown delivery: %d", r.Status)
	}
	r := c.action("/console/webhooks", "/console/webhooks/"+dead.ID+"/redeliver", nil)
	if r.Status != http.StatusSeeOther || !strings.Contains(r.Location, "done=redelivered") {
		t.Fatalf("redeliver: %d %s %.300s", r.Status, r.Location, r.Body)
	}
	if st, _ := status(); st != ladder.DeliveryPending {
		t.Fatalf("after Send again the delivery is %s, want pending", st)
	}
	if f := c.get(r.Location); !strings.Contains(f.Body, "Sent again") {
		t.Errorf("no confirmation after Send again")
	}
}

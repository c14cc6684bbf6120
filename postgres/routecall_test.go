package postgres

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/internal/groupcommit"
)

// TestRouteAndBeginCallInABatch runs RouteAndBeginCall's op in one
// optimistic batch beside routes that RecordRoute queues: the routes
// queued before it are inserted first (so a route of the same item queued
// earlier is the item's route, and the op begins no call), a fresh item's
// route and call are created, and the audit records follow op order, the
// call's right after its route.
func TestRouteAndBeginCallInABatch(t *testing.T) {
	schema := newSchema(t)
	s := openTest(t, schema)
	ctx := context.Background()
	if _, err := adminConn(t, schema).Exec(ctx, `INSERT INTO step_states (workspace, queue, step, lane, epoch, pinned, pin_reason, audit_rate, version, lane_epoch)
		VALUES ($1, $2, $3, 'auto', 0, false, '', 0.05, 1, 0)`, testStep.Workspace, testStep.Queue, testStep.Step); err != nil {
		t.Fatal(err)
	}
	at := testRoute("", "").At
	entry := func(kind, subject string) ladder.AuditEntry {
		e, err := ladder.NewAuditEntry(testStep.Workspace, "system", kind, subject, at, nil)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	call := func(id, routeID string) ladder.Call {
		return ladder.Call{ID: id, Workspace: testStep.Workspace, Capability: "tms:postBill", IdempotencyKey: id, Status: ladder.CallRunning,
			Payload: json.RawMessage(`{}`), RouteID: routeID, StartedAt: at, Guard: &ladder.LaneGuard{Key: testStep, LaneEpoch: 0}}
	}
	var (
		deferred  []bool
		routes    [4]ladder.Route
		created   [4]bool
		out       [4]ladder.RouteCall
		recs      [4][]ladder.AuditRecord
		routeOnly = func(i int, r ladder.Route) groupcommit.Op[*wtx] {
			return func(w *wtx) error {
				if i == 0 {
					deferred = append(deferred, w.deferRoutes)
				}
				return w.recordRoute(r, entry(ladder.AuditRoute, r.ID), &routes[i], &created[i])
			}
		}
		withCall = func(i int, r ladder.Route, c ladder.Call) groupcommit.Op[*wtx] {
			return func(w *wtx) error {
				return w.routeAndBeginCall(r, entry(ladder.AuditRoute, r.ID), c, entry(ladder.AuditCall, c.ID), &out[i], &recs[i])
			}
		}
	)
	ops := []groupcommit.Op[*wtx]{
		routeOnly(0, testRoute("rt_a", "bill-1")),
		withCall(1, testRoute("rt_b", "bill-1"), call("cl_b", "rt_b")), // bill-1's route is rt_a
		withCall(2, testRoute("rt_c", "bill-2"), call("cl_c", "rt_c")),
		routeOnly(3, testRoute("rt_d", "bill-3")),
	}
	for i, err := range s.runBatch(ctx, ops) {
		if err != nil {
			t.Errorf("op %d: %v", i, err)
		}
	}
	if diff := cmp.Diff([]bool{true}, deferred); diff != "" {
		t.Errorf("runs queuing routes (-want +got):\n%s", diff)
	}
	if routes[0].ID != "rt_a" || !created[0] || routes[3].ID != "rt_d" || !created[3] {
		t.Errorf("routes alone: %s %v, %s %v", routes[0].ID, created[0], routes[3].ID, created[3])
	}
	if out[1].Route.ID != "rt_a" || out[1].RouteCreated || out[1].CallCreated || out[1].Call.ID != "" {
		t.Errorf("the item routed earlier in the batch: %+v, want rt_a and no call", out[1])
	}
	if out[2].Route.ID != "rt_c" || !out[2].RouteCreated || !out[2].CallCreated || out[2].Call.ID != "cl_c" || len(recs[2]) != 1 {
		t.Errorf("a fresh item: %+v (%d call records), want rt_c and cl_c created", out[2], len(recs[2]))
	}
	if _, err := s.CallByKey(ctx, testStep.Workspace, "tms:postBill", "cl_b"); err == nil {
		t.Error("the call of the item routed earlier in the batch was stored")
	}
	if diff := cmp.Diff([]string{"rt_a", "rt_c", "cl_c", "rt_d"}, auditSubjects(t, s)); diff != "" {
		t.Errorf("audit records (-want +got):\n%s", diff)
	}
}

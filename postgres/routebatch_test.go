package postgres

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/internal/groupcommit"
)

// TestQueuedRoutesOfOneBatch runs one batch of several routes, which
// queues them into one insert (flushRoutes): a second route of an item
// gets the first one, a route of a lane epoch the step has left, and one
// decided at an audit rate the step no longer has, each fail alone (the
// batch runs again op by op), and only created routes are audited, in op
// order.
func TestQueuedRoutesOfOneBatch(t *testing.T) {
	schema := newSchema(t)
	s := openTest(t, schema)
	ctx := context.Background()
	// The step is in lane epoch 1: a route of epoch 0 is refused.
	if _, err := adminConn(t, schema).Exec(ctx, `INSERT INTO step_states (workspace, queue, step, lane, epoch, pinned, pin_reason, audit_rate, version, lane_epoch)
		VALUES ($1, $2, $3, 'shadow', 0, false, '', 0.05, 1, 1)`, testStep.Workspace, testStep.Queue, testStep.Step); err != nil {
		t.Fatal(err)
	}
	route := func(id, item string, epoch int) ladder.Route {
		r := testRoute(id, item)
		r.LaneEpoch = epoch
		return r
	}
	in := []ladder.Route{
		route("rt_a", "bill-1", 1),
		route("rt_b", "bill-1", 1), // the same item: gets rt_a
		route("rt_c", "bill-2", 0), // an epoch the step left
		route("rt_d", "bill-3", 1),
		route("rt_e", "bill-4", 1), // decided at another rate (below)
	}
	in[4].StateAuditRate = 0.1
	got := make([]ladder.Route, len(in))
	created := make([]bool, len(in))
	var deferred []bool
	ops := make([]groupcommit.Op[*wtx], len(in))
	for i, r := range in {
		e := routeEntry(t, r)
		ops[i] = func(w *wtx) error {
			if i == 0 {
				deferred = append(deferred, w.deferRoutes)
			}
			return w.recordRoute(r, e, &got[i], &created[i])
		}
	}
	errs := s.runBatch(ctx, ops)
	if diff := cmp.Diff([]bool{true, false}, deferred); diff != "" {
		t.Errorf("runs queuing routes (-want +got):\n%s", diff)
	}
	wantErrs := []error{nil, nil, ladder.ErrLaneChanged, nil, ladder.ErrAuditRateChanged}
	for i, err := range errs {
		if want := wantErrs[i]; (want == nil) != (err == nil) || !errors.Is(err, want) {
			t.Errorf("op %d: err %v, want %v", i, err, want)
		}
	}
	var ids []string
	for i := range in {
		ids = append(ids, got[i].ID)
	}
	if diff := cmp.Diff([]string{"rt_a", "rt_a", "", "rt_d", ""}, ids); diff != "" {
		t.Errorf("routes got (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]bool{true, false, false, true, false}, created); diff != "" {
		t.Errorf("created (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"rt_a", "rt_d"}, auditSubjects(t, s)); diff != "" {
		t.Errorf("audited routes (-want +got):\n%s", diff)
	}
}

// TestQueuedRoutesAllCreated runs a batch of routes that all succeed: one
// optimistic run, every new item's route created and audited in op order;
// a second route of an item, last, gets the first and is not audited.
func TestQueuedRoutesAllCreated(t *testing.T) {
	s := openTest(t, newSchema(t))
	ctx := context.Background()
	var want []string
	ops := make([]groupcommit.Op[*wtx], 6)
	got := make([]ladder.Route, len(ops))
	created := make([]bool, len(ops))
	runs := 0
	for i := range ops {
		r := testRoute("rt_"+string(rune('a'+i)), "bill-"+string(rune('a'+i)))
		if i == len(ops)-1 {
			r.Item = "bill-a"
		} else {
			want = append(want, r.ID)
		}
		e := routeEntry(t, r)
		ops[i] = func(w *wtx) error {
			if i == 0 {
				runs++
			}
			return w.recordRoute(r, e, &got[i], &created[i])
		}
	}
	for i, err := range s.runBatch(ctx, ops) {
		wantID, wantCreated := "rt_a", false
		if i < len(want) {
			wantID, wantCreated = want[i], true
		}
		if err != nil || created[i] != wantCreated || got[i].ID != wantID {
			t.Errorf("op %d: %v, created %v, route %q; want created %v, route %q", i, err, created[i], got[i].ID, wantCreated, wantID)
		}
	}
	if runs != 1 {
		t.Errorf("batch ran %d times, want 1", runs)
	}
	if diff := cmp.Diff(want, auditSubjects(t, s)); diff != "" {
		t.Errorf("audited routes (-want +got):\n%s", diff)
	}

	// A batch of routes the insert all skips appends no record; the batch
	// after it chains on from the first.
	batch := func(items ...string) {
		t.Helper()
		ops := make([]groupcommit.Op[*wtx], len(items))
		for i, item := range items {
			r := testRoute("rt_"+item, item)
			e := routeEntry(t, r)
			ops[i] = func(w *wtx) error {
				var (
					got     ladder.Route
					created bool
				)
				return w.recordRoute(r, e, &got, &created)
			}
		}
		for i, err := range s.runBatch(ctx, ops) {
			if err != nil {
				t.Fatalf("route of %s: %v", items[i], err)
			}
		}
	}
	batch("bill-a", "bill-b")
	batch("bill-x", "bill-y")
	if n, err := ladder.VerifyAudit(ctx, s); err != nil || n != int64(len(want)+2) {
		t.Errorf("VerifyAudit = %d, %v; want %d records in one chain", n, err, len(want)+2)
	}
}

// TestQueuedRouteFailureNotSwallowed has the op after a queued route run a
// statement (which inserts the queued route first) and ignore its error:
// the route's lane change still fails the route's op, not the other's.
func TestQueuedRouteFailureNotSwallowed(t *testing.T) {
	schema := newSchema(t)
	s := openTest(t, schema)
	ctx := context.Background()
	if _, err := adminConn(t, schema).Exec(ctx, `INSERT INTO step_states (workspace, queue, step, lane, epoch, pinned, pin_reason, audit_rate, version, lane_epoch)
		VALUES ($1, $2, $3, 'shadow', 0, false, '', 0.05, 1, 1)`, testStep.Workspace, testStep.Queue, testStep.Step); err != nil {
		t.Fatal(err)
	}
	r := testRoute("rt_old", "bill-1") // lane epoch 0, which the step left
	e := routeEntry(t, r)
	var (
		got     ladder.Route
		created bool
	)
	errs := s.runBatch(ctx, []groupcommit.Op[*wtx]{
		func(w *wtx) error { return w.recordRoute(r, e, &got, &created) },
		func(w *wtx) error {
			_, _ = w.exec(`SELECT 1`) // an op careless with errors
			return nil
		},
	})
	if !errors.Is(errs[0], ladder.ErrLaneChanged) || errs[1] != nil {
		t.Errorf("errs %v, want [ErrLaneChanged, nil]", errs)
	}
	if created {
		t.Errorf("route %q created, want none", got.ID)
	}
}

package sqlite

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/internal/groupcommit"
	"github.com/ladderhq/ladder/storetest"
)

// batchCase is one op of a mixed batch: a route to record, an audit
// append, or an op that appends and then fails.
type batchCase struct {
	route  *ladder.Route // RecordRoute's op
	audit  string        // AppendAudit's op in this workspace
	failWS string        // appends in this workspace, then fails
}

// batchResult is what a batch did, as a test compares it.
type batchResult struct {
	Errs    []string
	Routes  []string // the route each route op got, and whether created
	Records []string // every audit record: seq, workspace, subject, ws_idx, prev_hash, hash
	Heads   []string // audit_ws_head
	Steps   []string // each route's stored lane epoch
}

var errBatchBoom = errors.New("boom")

// runMixed runs cases on a fresh store whose step in ws-a is in lane epoch
// 1 and in ws-b in lane epoch 0, either as one batch (run) or one op per
// batch (the reference: each op alone in its transaction, as runBatch ran
// a lone op before batches ran optimistically). It also counts how often
// the first op ran.
func runMixed(t *testing.T, cases []batchCase, oneBatch bool) (batchResult, int) {
	t.Helper()
	ctx := context.Background()
	s := openTest(t)
	defer s.Close()
	storetest.AskFed(s, "ws-a", "ws-b", "ws-c")
	appendN(t, s, 2) // chain heads that exist before the batch
	for _, ws := range []string{"ws-a", "ws-b"} {
		if err := s.EnsureSteps(ctx, []ladder.StepState{{Workspace: ws, Queue: "q", Step: "s", Lane: ladder.LaneShadow, AuditRate: 0.05}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.batch.Do(ctx, func(w *wtx) error {
		_, err := w.exec(`UPDATE step_states SET lane_epoch = 1 WHERE workspace = 'ws-a'`)
		return err
	}); err != nil {
		t.Fatal(err)
	}

	runs := 0
	got := make([]ladder.Route, len(cases))
	created := make([]bool, len(cases))
	ops := make([]groupcommit.Op[*wtx], len(cases))
	for i, c := range cases {
		switch {
		case c.route != nil:
			e, err := ladder.NewAuditEntry(c.route.Workspace, "system", ladder.AuditRoute, c.route.ID, c.route.At,
				map[string]string{"queue": c.route.Queue, "step": c.route.Step, "item": c.route.Item})
			if err != nil {
				t.Fatal(err)
			}
			ready, err := s.readyAudit([]ladder.AuditEntry{e})
			if err != nil {
				t.Fatal(err)
			}
			ops[i] = func(w *wtx) error { return w.recordRoute(*c.route, ready, &got[i], &created[i]) }
		case c.audit != "":
			e, err := ladder.NewAuditEntry(c.audit, "system", ladder.AuditCall, fmt.Sprint("call-", i), t0.Add(time.Duration(i)*time.Second), nil)
			if err != nil {
				t.Fatal(err)
			}
			ops[i] = func(w *wtx) error { _, err := w.appendAudit(e); return err }
		default:
			e, err := ladder.NewAuditEntry(c.failWS, "system", ladder.AuditCall, fmt.Sprint("failed-", i), t0, nil)
			if err != nil {
				t.Fatal(err)
			}
			ops[i] = func(w *wtx) error {
				if _, err := w.appendAudit(e); err != nil {
					return err
				}
				return errBatchBoom
			}
		}
		if i == 0 {
			op := ops[0]
			ops[0] = func(w *wtx) error { runs++; return op(w) }
		}
	}
	var errs []error
	if oneBatch {
		errs = s.runBatch(ctx, ops)
	} else {
		for _, op := range ops {
			errs = append(errs, s.runBatch(ctx, []groupcommit.Op[*wtx]{op})...)
		}
	}

	var res batchResult
	for i, err := range errs {
		switch {
		case err == nil:
			res.Errs = append(res.Errs, "ok")
		case errors.Is(err, ladder.ErrLaneChanged):
			res.Errs = append(res.Errs, "lane changed")
		case errors.Is(err, errBatchBoom):
			res.Errs = append(res.Errs, "boom")
		default:
			t.Fatalf("op %d: unexpected error %v", i, err)
		}
		if cases[i].route != nil {
			res.Routes = append(res.Routes, fmt.Sprintf("%s created=%v", got[i].ID, created[i]))
		}
	}
	rows, err := s.readers.QueryContext(ctx, `SELECT seq, workspace, subject, ws_idx, prev_hash, hash FROM audit ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	res.Records, err = collect(rows, func(r scanner) (string, error) {
		var (
			seq, idx                int64
			ws, subject, prev, hash string
		)
		err := r.Scan(&seq, &ws, &subject, &idx, &prev, &hash)
		return fmt.Sprint(seq, " ", ws, " ", subject, " ", idx, " ", prev, " ", hash), err
	})
	if err != nil {
		t.Fatal(err)
	}
	rows, err = s.readers.QueryContext(ctx, `SELECT workspace, size, hash FROM audit_ws_head ORDER BY workspace`)
	if err != nil {
		t.Fatal(err)
	}
	res.Heads, err = collect(rows, func(r scanner) (string, error) {
		var (
			ws, hash string
			size     int64
		)
		err := r.Scan(&ws, &size, &hash)
		return fmt.Sprint(ws, " ", size, " ", hash), err
	})
	if err != nil {
		t.Fatal(err)
	}
	rows, err = s.readers.QueryContext(ctx, `SELECT id, workspace, item, lane_epoch FROM routes ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	res.Steps, err = collect(rows, func(r scanner) (string, error) {
		var (
			id, ws, item string
			epoch        int
		)
		err := r.Scan(&id, &ws, &item, &epoch)
		return fmt.Sprint(id, " ", ws, " ", item, " ", epoch), err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ladder.VerifyAudit(ctx, s); err != nil {
		t.Errorf("VerifyAudit: %v", err)
	}
	storetest.CheckFed(t, s)
	return res, runs
}

func batchRoute(id, ws, item string, epoch, i int) *ladder.Route {
	return &ladder.Route{ID: id, Workspace: ws, Queue: "q", Step: "s", Item: item,
		Decision: ladder.DecisionHumanOnly, Lane: ladder.LaneShadow, AuditRate: 0.05, Reason: "shadow", KeyID: "k1",
		At: t0.Add(time.Duration(i) * time.Minute), LaneEpoch: epoch, StateAuditRate: 0.05}
}

// TestMixedBatchMatchesOpByOp runs a batch mixing two workspaces, a
// duplicate item, a route of a lane epoch its step has left, an op that
// fails after appending, and plain appends: as one batch it must leave the
// database, the chains and every op's result exactly as running each op
// in its own transaction does. The failing op makes the optimistic run
// give way to a run op by op, so the first op runs twice.
func TestMixedBatchMatchesOpByOp(t *testing.T) {
	cases := []batchCase{
		{route: batchRoute("rt_1", "ws-a", "bill-1", 1, 1)},
		{route: batchRoute("rt_2", "ws-b", "bill-1", 0, 2)},
		{route: batchRoute("rt_3", "ws-a", "bill-1", 1, 3)}, // the same item: gets rt_1
		{route: batchRoute("rt_4", "ws-a", "bill-2", 0, 4)}, // ws-a left epoch 0
		{audit: "ws-b"},
		{failWS: "ws-a"},
		{route: batchRoute("rt_5", "ws-b", "bill-2", 0, 5)},
		{audit: "ws-c"}, // a workspace with no chain yet
		{route: batchRoute("rt_6", "ws-a", "bill-3", 1, 6)},
	}
	want, _ := runMixed(t, cases, false)
	got, runs := runMixed(t, cases, true)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("one batch differs from op by op (-want +got):\n%s", diff)
	}
	if runs != 2 {
		t.Errorf("first op ran %d times, want 2 (optimistic, then op by op)", runs)
	}
	if diff := cmp.Diff([]string{"ok", "ok", "ok", "lane changed", "ok", "boom", "ok", "ok", "ok"}, got.Errs); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"rt_1 created=true", "rt_2 created=true", "rt_1 created=false", " created=false",
		"rt_5 created=true", "rt_6 created=true"}, got.Routes); diff != "" {
		t.Errorf("routes (-want +got):\n%s", diff)
	}
}

// TestSucceedingBatchRunsOnce runs a batch in which every op succeeds,
// across two workspaces and with a duplicate item: it runs once, without
// savepoints, and matches op by op.
func TestSucceedingBatchRunsOnce(t *testing.T) {
	cases := []batchCase{
		{route: batchRoute("rt_1", "ws-a", "bill-1", 1, 1)},
		{route: batchRoute("rt_2", "ws-b", "bill-1", 0, 2)},
		{audit: "ws-a"},
		{route: batchRoute("rt_3", "ws-a", "bill-1", 1, 3)}, // the same item: gets rt_1
		{route: batchRoute("rt_4", "ws-b", "bill-2", 0, 4)},
		{audit: "ws-b"},
	}
	want, _ := runMixed(t, cases, false)
	got, runs := runMixed(t, cases, true)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("one batch differs from op by op (-want +got):\n%s", diff)
	}
	if runs != 1 {
		t.Errorf("first op ran %d times, want 1", runs)
	}
}

// TestBatchWritesHeadsOncePerWorkspace: the chain heads of a batch are
// written at its end, once per workspace whose chain moved, and a second
// batch starts from them.
func TestBatchWritesHeadsOncePerWorkspace(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	defer s.Close()
	var moved [][]string
	ops := make([]groupcommit.Op[*wtx], 6)
	for i := range ops {
		ws := []string{"ws-a", "ws-b"}[i%2]
		e, err := ladder.NewAuditEntry(ws, "system", ladder.AuditCall, fmt.Sprint(i), t0, nil)
		if err != nil {
			t.Fatal(err)
		}
		ops[i] = func(w *wtx) error {
			_, err := w.appendAudit(e)
			if i == len(ops)-1 {
				moved = append(moved, append([]string(nil), w.moved...))
			}
			return err
		}
	}
	for _, err := range s.runBatch(ctx, ops) {
		if err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff([][]string{{"ws-a", "ws-b"}}, moved); diff != "" {
		t.Errorf("heads to write at the end of the batch (-want +got):\n%s", diff)
	}
	for _, err := range s.runBatch(ctx, ops[:2]) {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n, err := ladder.VerifyAudit(ctx, s); err != nil || n != 8 {
		t.Fatalf("VerifyAudit = %d, %v; want 8 records", n, err)
	}
}

// TestWriterKeepsStatements: the statements of a committed batch are kept
// on the writer's connection, so the next batch prepares none of them
// again and still writes what it should.
func TestWriterKeepsStatements(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	defer s.Close()
	var fresh []int
	for i := range 3 {
		e, err := ladder.NewAuditEntry("ws-a", "system", ladder.AuditCall, fmt.Sprint(i), t0, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.batch.Do(ctx, func(w *wtx) error {
			if _, err := w.appendAudit(e); err != nil {
				return err
			}
			if err := w.flush(); err != nil {
				return err
			}
			fresh = append(fresh, len(w.fresh))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if fresh[0] == 0 || fresh[1] != 0 || fresh[2] != 0 {
		t.Errorf("statements prepared afresh per batch = %v, want some, then none", fresh)
	}
	if n, err := ladder.VerifyAudit(ctx, s); err != nil || n != 3 {
		t.Fatalf("VerifyAudit = %d, %v; want 3 records", n, err)
	}
}

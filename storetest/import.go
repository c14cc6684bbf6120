package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ladderhq/ladder"
)

// testImportRecords: ImportRecords runs its function in one write
// transaction. What it writes through the transaction (routes, reviews by
// RecordReviewTx, outcomes, audit) commits together, and an error from it
// leaves nothing behind.
func testImportRecords(t *testing.T, s ladder.Store) {
	ctx := t.Context()
	check(t, s.EnsureSteps(ctx, []ladder.StepState{stateOf(stepKey, ladder.LaneShadow)}))
	r1 := newRoute("rt_imp_1", wsA, "bill-1", t0)
	o1 := ladder.Outcome{ID: "oc_imp_1", Workspace: wsA, Queue: stepKey.Queue, Step: stepKey.Step, Item: "bill-1", HandledBy: ladder.HandledByPerson, OK: false, At: t0.Add(2 * time.Hour)}
	before := auditKinds(t, s)
	check(t, s.ImportRecords(ctx, func(tx ladder.ImportTx) error {
		if rec, err := tx.StepRecord(stepKey); err != nil || rec.Has || rec.Outcomes != (ladder.OutcomeCounts{}) {
			t.Errorf("StepRecord of a step with no record: %+v, %v", rec, err)
		}
		if _, ok, err := tx.ReviewedRoute(stepKey, "bill-1"); err != nil || ok {
			t.Errorf("ReviewedRoute before any review: %v, %v", ok, err)
		}
		if err := tx.InsertRoute(r1); err != nil {
			return err
		}
		if _, _, err := ladder.RecordReviewTx(tx, review(t, "rv_imp_1", r1, t0.Add(time.Hour), ladder.ReviewShadow, ladder.VerdictAgree, keep), t0.Add(time.Hour)); err != nil {
			return err
		}
		if id, ok, err := tx.ReviewedRoute(stepKey, "bill-1"); err != nil || !ok || id != r1.ID {
			t.Errorf("ReviewedRoute after the review: %q, %v, %v; want %q", id, ok, err, r1.ID)
		}
		if err := tx.InsertOutcome(o1); err != nil {
			return err
		}
		// The step's record as the import sees it, inside the transaction:
		// the review just recorded and the outcome just counted.
		rec, err := tx.StepRecord(stepKey)
		if err != nil {
			return err
		}
		want := ladder.StepRecord{Latest: t0.Add(time.Hour), Has: true, Outcomes: ladder.OutcomeCounts{PersonN: 1, PersonFailures: 1}}
		if diff := cmp.Diff(want, rec); diff != "" {
			t.Errorf("StepRecord inside the import (-want +got):\n%s", diff)
		}
		return tx.AppendAudit(entry(t, wsA, ladder.AuditHistoryImport, "imp_1", t0, map[string]any{"rows": 2}))
	}))
	got := must(s.GetRoute(ctx, wsA, r1.ID))
	if diff := cmp.Diff(r1.Item, got.Item); diff != "" {
		t.Errorf("imported route (-want +got):\n%s", diff)
	}
	wantOC := ladder.OutcomeCounts{PersonN: 1, PersonFailures: 1}
	if diff := cmp.Diff(wantOC, must(s.OutcomeCounts(ctx, stepKey))); diff != "" {
		t.Errorf("outcome counts (-want +got):\n%s", diff)
	}
	weeks := must(s.WeekAggs(ctx, stepKey))
	if len(weeks) != 1 || weeks[0].N != 1 || weeks[0].Agreements != 1 {
		t.Errorf("week aggregates after the import: %+v", weeks)
	}
	after := auditKinds(t, s)
	wantKinds := map[string]int{ladder.AuditReview: before[ladder.AuditReview] + 1, ladder.AuditHistoryImport: before[ladder.AuditHistoryImport] + 1}
	for kind, n := range wantKinds {
		if after[kind] != n {
			t.Errorf("%d %s audit records after the import, want %d", after[kind], kind, n)
		}
	}

	// All or nothing: an error from fn after writes rolls them all back.
	stop := errors.New("stop")
	r2 := newRoute("rt_imp_2", wsA, "bill-2", t0)
	err := s.ImportRecords(ctx, func(tx ladder.ImportTx) error {
		if err := tx.InsertRoute(r2); err != nil {
			return err
		}
		if _, _, err := ladder.RecordReviewTx(tx, review(t, "rv_imp_2", r2, t0.Add(3*time.Hour), ladder.ReviewShadow, ladder.VerdictDisagree, keep), t0.Add(3*time.Hour)); err != nil {
			return err
		}
		o2 := o1
		o2.ID, o2.Item = "oc_imp_2", "bill-2"
		if err := tx.InsertOutcome(o2); err != nil {
			return err
		}
		if err := tx.AppendAudit(entry(t, wsA, ladder.AuditHistoryImport, "imp_2", t0, map[string]any{"rows": 2})); err != nil {
			return err
		}
		return stop
	})
	wantErr(t, "import that fails", err, stop)
	_, err = s.GetRoute(ctx, wsA, r2.ID)
	wantErr(t, "route of a failed import", err, ladder.ErrNotFound)
	if diff := cmp.Diff(wantOC, must(s.OutcomeCounts(ctx, stepKey))); diff != "" {
		t.Errorf("outcome counts after a failed import (-want +got):\n%s", diff)
	}
	if w := must(s.WeekAggs(ctx, stepKey)); len(w) != 1 || w[0].N != 1 {
		t.Errorf("week aggregates after a failed import: %+v", w)
	}
	if diff := cmp.Diff(after, auditKinds(t, s)); diff != "" {
		t.Errorf("audit after a failed import (-want +got):\n%s", diff)
	}
	if rv := must(s.Reviews(ctx, ladder.ReviewQuery{Key: stepKey})); len(rv) != 1 {
		t.Errorf("%d reviews after a failed import, want 1", len(rv))
	}

	// A second route for the item in the same lane epoch is ErrConflict.
	dup := newRoute("rt_imp_3", wsA, "bill-1", t0)
	err = s.ImportRecords(ctx, func(tx ladder.ImportTx) error { return tx.InsertRoute(dup) })
	wantErr(t, "second route of an item in one epoch", err, ladder.ErrConflict)
}

package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/ladderhq/ladder"
)

// gateTests are the conformance tests of ladder.GateStore; Run appends them
// to its list.
var gateTests = []struct {
	name string
	fn   func(t *testing.T, s ladder.Store)
}{
	{"GateRecordAndHistory", testGateRecord},
	{"GateHistoryFilters", testGateFilters},
	{"GateHistoryPagesWithoutGapOrRepeat", testGatePaging},
	{"GateDuplicateID", testGateDuplicate},
	{"GateAuditInSameWrite", testGateAuditAtomic},
}

// gateDecision builds a decision of workspace ws at time at.
func gateDecision(id, ws string, at time.Time) ladder.GateDecisionRecord {
	return ladder.GateDecisionRecord{
		ID: id, Workspace: ws, KeyID: "k1", Case: "ai_investment", PreconditionFn: "score_invest_governance", ActionID: "invest_decision",
		GateState: "ESCALATE", ReasonCode: "QUALITY_BELOW_REPAIR_THRESHOLD",
		R: 0.2, C: 1.0 / 3.0, O: 0.4, Ro: 0.3, Q: 0.30833333333333335, RepairAttempts: 0, VerifiableExt: true,
		HumanReadable: "ESCALATE: below τ_repair", Notes: "note [REDACTED]",
		Evidence: json.RawMessage(`{"analyst_note":"[REDACTED]","safety_certified":true}`), At: at,
	}
}

func gateAudit(t *testing.T, d ladder.GateDecisionRecord) ladder.AuditEntry {
	t.Helper()
	return entry(t, d.Workspace, ladder.AuditGateDecision, d.ID, d.At, map[string]any{"case": d.Case, "gate_state": d.GateState})
}

func mustGate(t *testing.T, s ladder.Store, d ladder.GateDecisionRecord) ladder.GateDecisionRecord {
	t.Helper()
	got, err := s.RecordGateDecision(t.Context(), d, gateAudit(t, d))
	check(t, err)
	return got
}

func gateIDs(ds []ladder.GateDecisionRecord) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.ID
	}
	return out
}

func testGateRecord(t *testing.T, s ladder.Store) {
	ctx := t.Context()
	d1 := mustGate(t, s, gateDecision("gd_1", wsA, t0))
	if d1.Seq <= 0 {
		t.Fatalf("Seq = %d, want > 0", d1.Seq)
	}
	d2 := gateDecision("gd_2", wsA, t0.Add(time.Minute+1234*time.Nanosecond)) // sub-µs part is dropped
	d2.GateState, d2.ReasonCode, d2.R, d2.C, d2.O, d2.Ro, d2.Q = "PASS", "PASS_ABOVE_THRESHOLD", 1, 1, 1, 1, 1
	d2.RepairAttempts, d2.VerifiableExt, d2.Notes, d2.Evidence = 2, false, "", nil
	d2 = mustGate(t, s, d2)
	if d2.Seq <= d1.Seq {
		t.Errorf("second Seq %d not above first %d", d2.Seq, d1.Seq)
	}
	mustGate(t, s, gateDecision("gd_other", wsB, t0))

	got := must(s.GateHistory(ctx, ladder.GateHistoryQuery{Workspace: wsA}))
	want := []ladder.GateDecisionRecord{d2, d1}
	want[0].At = t0.Add(time.Minute + time.Microsecond)
	if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-12)); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}
	// A workspace sees only its own decisions.
	if got := gateIDs(must(s.GateHistory(ctx, ladder.GateHistoryQuery{Workspace: wsB}))); !cmp.Equal(got, []string{"gd_other"}) {
		t.Errorf("history of %s = %v", wsB, got)
	}
	if got := must(s.GateHistory(ctx, ladder.GateHistoryQuery{Workspace: "ws-none"})); len(got) != 0 {
		t.Errorf("history of an unknown workspace = %v", gateIDs(got))
	}
	wantAuditKinds(t, s, map[string]int{ladder.AuditGateDecision: 3})
	recs := must(s.ListAudit(ctx, ladder.AuditQuery{Workspace: wsA, Kind: ladder.AuditGateDecision}))
	if len(recs) != 2 || recs[0].Subject != "gd_1" || recs[1].Subject != "gd_2" {
		t.Errorf("audit records = %+v", recs)
	}
}

func testGateFilters(t *testing.T, s ladder.Store) {
	ctx := t.Context()
	type spec struct {
		id, fn, action, state string
		at                    time.Time
	}
	for _, sp := range []spec{
		{"gd_a", "score_invest_governance", "invest_decision", "PASS", t0},
		{"gd_b", "score_landing_level", "valuation", "ESCALATE", t0.Add(time.Hour)},
		{"gd_c", "score_invest_governance", "invest_decision", "ESCALATE", t0.Add(2 * time.Hour)},
		{"gd_d", "", "team_capability", "BYPASS_TO_HUMAN", t0.Add(3 * time.Hour)},
	} {
		d := gateDecision(sp.id, wsA, sp.at)
		d.PreconditionFn, d.ActionID, d.GateState = sp.fn, sp.action, sp.state
		mustGate(t, s, d)
	}
	other := gateDecision("gd_x", wsA, t0)
	other.Case = "release_payment"
	mustGate(t, s, other)

	tests := []struct {
		name string
		q    ladder.GateHistoryQuery
		want []string
	}{
		{"all", ladder.GateHistoryQuery{}, []string{"gd_x", "gd_d", "gd_c", "gd_b", "gd_a"}},
		{"case", ladder.GateHistoryQuery{Case: "ai_investment"}, []string{"gd_d", "gd_c", "gd_b", "gd_a"}},
		{"precondition_fn", ladder.GateHistoryQuery{PreconditionFn: "score_invest_governance"}, []string{"gd_x", "gd_c", "gd_a"}},
		{"action_id", ladder.GateHistoryQuery{ActionID: "valuation"}, []string{"gd_b"}},
		{"gate_state", ladder.GateHistoryQuery{GateState: "ESCALATE"}, []string{"gd_x", "gd_c", "gd_b"}},
		{"since (inclusive)", ladder.GateHistoryQuery{Since: t0.Add(time.Hour)}, []string{"gd_d", "gd_c", "gd_b"}},
		{"until (exclusive)", ladder.GateHistoryQuery{Until: t0.Add(time.Hour)}, []string{"gd_x", "gd_a"}},
		{"since and until", ladder.GateHistoryQuery{Since: t0.Add(time.Hour), Until: t0.Add(3 * time.Hour)}, []string{"gd_c", "gd_b"}},
		{"combined", ladder.GateHistoryQuery{Case: "ai_investment", GateState: "ESCALATE", PreconditionFn: "score_invest_governance"}, []string{"gd_c"}},
		{"limit", ladder.GateHistoryQuery{Limit: 2}, []string{"gd_x", "gd_d"}},
		{"no match", ladder.GateHistoryQuery{Case: "nope"}, nil},
	}
	for _, tt := range tests {
		tt.q.Workspace = wsA
		got := gateIDs(must(s.GateHistory(ctx, tt.q)))
		if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
	// BeforeSeq pages past the decisions already seen.
	first := must(s.GateHistory(ctx, ladder.GateHistoryQuery{Workspace: wsA, Limit: 2}))
	rest := must(s.GateHistory(ctx, ladder.GateHistoryQuery{Workspace: wsA, BeforeSeq: first[1].Seq}))
	if diff := cmp.Diff([]string{"gd_c", "gd_b", "gd_a"}, gateIDs(rest)); diff != "" {
		t.Errorf("page after BeforeSeq (-want +got):\n%s", diff)
	}
}

// testGatePaging records decisions from many goroutines (so the backends
// batch them) and pages through them: every decision exactly once.
func testGatePaging(t *testing.T, s ladder.Store) {
	ctx := context.Background()
	const total, workers = 1200, 16
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < total; i += workers {
				d := gateDecision(fmt.Sprintf("gd_%05d", i), wsA, t0.Add(time.Duration(i)*time.Second))
				e, err := ladder.NewAuditEntry(d.Workspace, "system", ladder.AuditGateDecision, d.ID, d.At, nil)
				if err == nil {
					_, err = s.RecordGateDecision(ctx, d, e)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var before int64
	pages := 0
	for {
		page := must(s.GateHistory(ctx, ladder.GateHistoryQuery{Workspace: wsA, BeforeSeq: before, Limit: 97}))
		if len(page) == 0 {
			break
		}
		pages++
		for i, d := range page {
			if seen[d.ID] {
				t.Fatalf("page %d repeats %s", pages, d.ID)
			}
			seen[d.ID] = true
			if i > 0 && d.Seq >= page[i-1].Seq {
				t.Fatalf("page %d not newest first: seq %d after %d", pages, d.Seq, page[i-1].Seq)
			}
		}
		before = page[len(page)-1].Seq
	}
	if len(seen) != total {
		t.Errorf("paged through %d decisions, want %d", len(seen), total)
	}
	if want := (total + 96) / 97; pages != want {
		t.Errorf("%d pages, want %d", pages, want)
	}
}

func testGateDuplicate(t *testing.T, s ladder.Store) {
	d := gateDecision("gd_dup", wsA, t0)
	mustGate(t, s, d)
	_, err := s.RecordGateDecision(t.Context(), d, gateAudit(t, d))
	wantErr(t, "second decision with the same id", err, ladder.ErrConflict)
	wantAuditKinds(t, s, map[string]int{ladder.AuditGateDecision: 1})
	if got := must(s.GateHistory(t.Context(), ladder.GateHistoryQuery{Workspace: wsA})); len(got) != 1 {
		t.Errorf("history holds %d decisions, want 1", len(got))
	}
}

// testGateAuditAtomic: a decision whose audit entry cannot be written is
// not kept either.
func testGateAuditAtomic(t *testing.T, s ladder.Store) {
	d := gateDecision("gd_bad_audit", wsA, t0)
	bad := ladder.AuditEntry{Workspace: wsA, Actor: "system", Kind: ladder.AuditGateDecision, Subject: d.ID, At: t0, Data: json.RawMessage(`{not json`)}
	if _, err := s.RecordGateDecision(t.Context(), d, bad); err == nil {
		t.Fatal("RecordGateDecision with an unwritable audit entry succeeded")
	}
	if got := must(s.GateHistory(t.Context(), ladder.GateHistoryQuery{Workspace: wsA})); len(got) != 0 {
		t.Errorf("history holds %v after a failed audit write", gateIDs(got))
	}
	wantAuditKinds(t, s, map[string]int{})
	// The store still works afterwards.
	mustGate(t, s, gateDecision("gd_ok", wsA, t0))
}

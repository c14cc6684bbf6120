package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ladderhq/ladder"
)

// approvalTests exercise ApprovalStore and CallStore.
var approvalTests = []struct {
	name string
	fn   func(t *testing.T, s ladder.Store)
}{
	{"ApprovalCreateGetList", testApprovalCreate},
	{"ApprovalDecidedOnce", testApprovalOnce},
	{"CallIdempotent", testCallIdempotent},
}

func approval(id, ws, key string) ladder.Approval {
	return ladder.Approval{ID: id, Workspace: ws, Capability: "ticket6:approveCommission", Kind: ladder.ApprovalHumanGate, Status: ladder.ApprovalPending,
		Payload: json.RawMessage(`{"amount":10}`), Scope: map[string]string{"program": "partner-2027"}, IdempotencyKey: key,
		RequestedBy: "k_agent", CreatedAt: t0, ExpiresAt: t0.Add(72 * time.Hour)}
}

func testApprovalCreate(t *testing.T, s ladder.Store) {
	ctx := t.Context()
	a := approval("ap_1", wsA, "idem-1")
	got, created := must2(s.CreateApproval(ctx, a, entry(t, wsA, ladder.AuditApproval, a.ID, t0, map[string]any{"status": "pending"})))
	if !created || got.Seq == 0 {
		t.Fatalf("CreateApproval: created %v, seq %d", created, got.Seq)
	}
	// The same idempotency key returns the first approval.
	dup := approval("ap_2", wsA, "idem-1")
	again, created := must2(s.CreateApproval(ctx, dup, entry(t, wsA, ladder.AuditApproval, dup.ID, t0, nil)))
	if created || again.ID != "ap_1" {
		t.Fatalf("repeat with the same key: created %v, id %s", created, again.ID)
	}
	for i := 3; i <= 7; i++ {
		b := approval(fmt.Sprintf("ap_%d", i), wsA, "")
		must2(s.CreateApproval(ctx, b, entry(t, wsA, ladder.AuditApproval, b.ID, t0, nil)))
	}
	other := approval("ap_other", wsB, "")
	must2(s.CreateApproval(ctx, other, entry(t, wsB, ladder.AuditApproval, other.ID, t0, nil)))

	stored := must(s.GetApproval(ctx, wsA, "ap_1"))
	if diff := cmp.Diff(got, stored); diff != "" {
		t.Errorf("GetApproval (-created +stored):\n%s", diff)
	}
	_, err := s.GetApproval(ctx, wsB, "ap_1")
	wantErr(t, "another workspace's approval", err, ladder.ErrNotFound)

	page1 := must(s.ListApprovals(ctx, ladder.ApprovalQuery{Workspace: wsA, Limit: 4}))
	page2 := must(s.ListApprovals(ctx, ladder.ApprovalQuery{Workspace: wsA, Limit: 4, BeforeSeq: page1[len(page1)-1].Seq}))
	var ids []string
	for _, p := range append(page1, page2...) {
		ids = append(ids, p.ID)
	}
	if diff := cmp.Diff([]string{"ap_7", "ap_6", "ap_5", "ap_4", "ap_3", "ap_1"}, ids); diff != "" {
		t.Errorf("pages, newest first (-want +got):\n%s", diff)
	}
	if n := len(must(s.ListApprovals(ctx, ladder.ApprovalQuery{Workspace: wsA, Status: ladder.ApprovalRejected}))); n != 0 {
		t.Errorf("%d rejected approvals, want 0", n)
	}
	if n := len(must(s.ListApprovals(ctx, ladder.ApprovalQuery{Workspace: wsA, RequestedBy: "nobody"}))); n != 0 {
		t.Errorf("%d approvals by nobody, want 0", n)
	}
	wantAuditKinds(t, s, map[string]int{ladder.AuditApproval: 7})
}

// testApprovalOnce: many approvers race; exactly one compare-and-set wins.
func testApprovalOnce(t *testing.T, s ladder.Store) {
	ctx := t.Context()
	a := approval("ap_race", wsA, "")
	must2(s.CreateApproval(ctx, a, entry(t, wsA, ladder.AuditApproval, a.ID, t0, nil)))
	var wins, conflicts atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			b := a
			b.Status, b.DecidedBy = ladder.ApprovalExecuting, fmt.Sprintf("k_human_%d", i)
			_, err := s.UpdateApproval(ctx, b, ladder.ApprovalPending, []ladder.AuditEntry{entry(t, wsA, ladder.AuditApproval, a.ID, t0, map[string]any{"by": i})})
			switch {
			case err == nil:
				wins.Add(1)
			case errors.Is(err, ladder.ErrConflict):
				conflicts.Add(1)
			default:
				t.Errorf("approver %d: %v", i, err)
			}
		}(i)
	}
	wg.Wait()
	if wins.Load() != 1 || conflicts.Load() != 15 {
		t.Fatalf("wins %d, conflicts %d; want 1 and 15", wins.Load(), conflicts.Load())
	}
	got := must(s.GetApproval(ctx, wsA, a.ID))
	if got.Status != ladder.ApprovalExecuting {
		t.Fatalf("status %s", got.Status)
	}
	done := got
	done.Status = ladder.ApprovalApproved
	must(s.UpdateApproval(ctx, done, ladder.ApprovalExecuting, nil))
	_, err := s.UpdateApproval(ctx, approval("ap_missing", wsA, ""), ladder.ApprovalPending, nil)
	wantErr(t, "UpdateApproval of an unknown id", err, ladder.ErrNotFound)
	// One audit record for the creation and one for the winning decision.
	wantAuditKinds(t, s, map[string]int{ladder.AuditApproval: 2})
}

func testCallIdempotent(t *testing.T, s ladder.Store) {
	ctx := t.Context()
	c := ladder.Call{ID: "cl_1", Workspace: wsA, Capability: "tms:postBill", KeyID: "k_agent", IdempotencyKey: "bill-42", Status: ladder.CallRunning,
		Payload: json.RawMessage(`{"bill":"42"}`), StartedAt: t0}
	var created atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			d := c
			d.ID = fmt.Sprintf("cl_%d", i+1)
			got, ok, err := s.BeginCall(ctx, d, entry(t, wsA, ladder.AuditCall, d.ID, t0, nil))
			if err != nil {
				t.Errorf("BeginCall: %v", err)
				return
			}
			if ok {
				created.Add(1)
				if got.AuditSeq == 0 {
					t.Errorf("a created call reports no audit seq")
				}
			}
		}(i)
	}
	wg.Wait()
	if created.Load() != 1 {
		t.Fatalf("%d calls created for one idempotency key, want 1", created.Load())
	}
	first, _ := must2(s.BeginCall(ctx, ladder.Call{ID: "cl_x", Workspace: wsA, Capability: "tms:postBill", IdempotencyKey: "bill-42", Status: ladder.CallRunning, StartedAt: t0},
		entry(t, wsA, ladder.AuditCall, "cl_x", t0, nil)))
	fin := first
	fin.Status, fin.Result = ladder.CallOK, json.RawMessage(`{"posted":true}`)
	at := t0.Add(time.Second)
	fin.FinishedAt = &at
	must(s.FinishCall(ctx, fin, entry(t, wsA, ladder.AuditCallResult, fin.ID, at, nil)))
	_, err := s.FinishCall(ctx, fin, entry(t, wsA, ladder.AuditCallResult, fin.ID, at, nil))
	wantErr(t, "finishing a finished call", err, ladder.ErrConflict)
	got := must(s.GetCall(ctx, wsA, fin.ID))
	if got.Status != ladder.CallOK || string(got.Result) != `{"posted":true}` {
		t.Fatalf("stored call %+v", got)
	}
	_, err = s.GetCall(ctx, wsB, fin.ID)
	wantErr(t, "another workspace's call", err, ladder.ErrNotFound)
	wantAuditKinds(t, s, map[string]int{ladder.AuditCall: 1, ladder.AuditCallResult: 1})
}

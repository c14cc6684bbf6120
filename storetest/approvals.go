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
	{"ApprovalDeadlineByStoreClock", testApprovalDeadline},
	{"ApprovalPendingCap", testApprovalPendingCap},
	{"ApprovalShadowCap", testApprovalShadowCap},
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

// lifetime returns an approval that waits d, as a caller whose clock is an
// hour behind the store's asks for it: the store counts d from its clock.
func lifetime(a ladder.Approval, d time.Duration) ladder.Approval {
	a.CreatedAt = time.Now().Add(-time.Hour)
	a.ExpiresAt = a.CreatedAt.Add(d)
	return a
}

// decide is a decision on a pending approval: it starts to execute.
func decide(t *testing.T, s ladder.Store, a ladder.Approval) error {
	b := a
	b.Status, b.DecidedBy = ladder.ApprovalExecuting, "k_human"
	_, err := s.UpdateApproval(t.Context(), b, ladder.ApprovalPending, []ladder.AuditEntry{entry(t, b.Workspace, ladder.AuditApproval, b.ID, t0, map[string]any{"event": "approved"})})
	return err
}

// testApprovalDeadline: the store's clock decides expiry. A deadline is
// counted from the store's clock; a decision before it commits; one after
// it gets ErrExpired and leaves the approval stored as expired; every read
// past it (by id, by key, in a list) stores the expiry and says expired;
// and expired is final.
func testApprovalDeadline(t *testing.T, s ladder.Store) {
	ctx := t.Context()
	create := func(a ladder.Approval) ladder.Approval {
		got, created := must2(s.CreateApproval(ctx, a, entry(t, a.Workspace, ladder.AuditApproval, a.ID, t0, map[string]any{"event": "requested"})))
		if !created {
			t.Fatalf("CreateApproval %s: not created", a.ID)
		}
		return got
	}
	const life = 700 * time.Millisecond
	late := create(lifetime(approval("ap_late", wsA, "idem-late"), life))
	if d := late.ExpiresAt.Sub(late.CreatedAt); d != life {
		t.Errorf("stored lifetime %v, want %v", d, life)
	}
	if off := time.Since(late.CreatedAt); off > time.Minute || off < -time.Minute {
		t.Errorf("CreatedAt %v is the caller's clock, not the store's (off by %v)", late.CreatedAt, off)
	}
	read := create(lifetime(approval("ap_read", wsA, ""), life))
	byKey := create(lifetime(approval("ap_bykey", wsA, "idem-bykey"), life))
	listed := create(lifetime(approval("ap_listed", wsA, ""), life))
	inTime := create(lifetime(approval("ap_intime", wsA, ""), time.Hour))
	if st := must(s.GetApproval(ctx, wsA, late.ID)).Status; st != ladder.ApprovalPending {
		t.Fatalf("before its deadline, an approval is %s", st)
	}
	check(t, decide(t, s, inTime))

	time.Sleep(time.Until(listed.ExpiresAt) + 100*time.Millisecond)

	// A decision past the deadline loses, and the expiry is what commits.
	err := decide(t, s, late)
	wantErr(t, "a decision past the deadline", err, ladder.ErrExpired)
	wantErr(t, "a decision past the deadline", err, ladder.ErrConflict)
	if got := must(s.GetApproval(ctx, wsA, late.ID)); got.Status != ladder.ApprovalExpired || got.DecidedBy != "" {
		t.Errorf("after a late decision the approval is %s, decided by %q; want expired, by nobody", got.Status, got.DecidedBy)
	}
	// Expired is final: another decision, and a reject, lose too.
	wantErr(t, "a second decision on an expired approval", decide(t, s, late), ladder.ErrExpired)
	rej := late
	rej.Status = ladder.ApprovalRejected
	_, err = s.UpdateApproval(ctx, rej, ladder.ApprovalPending, nil)
	wantErr(t, "a reject of an expired approval", err, ladder.ErrExpired)

	// Reads past the deadline store the expiry, by id, by key and in a
	// list, before saying expired; a decision after that loses.
	if got := must(s.GetApproval(ctx, wsA, read.ID)); got.Status != ladder.ApprovalExpired {
		t.Errorf("GetApproval past the deadline: %s", got.Status)
	}
	wantErr(t, "a decision after a read saw expired", decide(t, s, read), ladder.ErrExpired)
	if got := must(s.ApprovalByKey(ctx, wsA, byKey.Capability, "idem-bykey")); got.Status != ladder.ApprovalExpired {
		t.Errorf("ApprovalByKey past the deadline: %s", got.Status)
	}
	pending := must(s.ListApprovals(ctx, ladder.ApprovalQuery{Workspace: wsA, Status: ladder.ApprovalPending}))
	for _, a := range pending {
		if a.Status != ladder.ApprovalExpired {
			t.Errorf("ListApprovals(pending): %s is %s, want it back expired", a.ID, a.Status)
		}
	}
	var expired []string
	for _, a := range must(s.ListApprovals(ctx, ladder.ApprovalQuery{Workspace: wsA, Status: ladder.ApprovalExpired})) {
		if a.Status != ladder.ApprovalExpired {
			t.Errorf("ListApprovals(expired): %s is %s", a.ID, a.Status)
		}
		expired = append(expired, a.ID)
	}
	if diff := cmp.Diff([]string{listed.ID, byKey.ID, read.ID, late.ID}, expired); diff != "" {
		t.Errorf("ListApprovals(expired) (-want +got):\n%s", diff)
	}
	wantErr(t, "a decision after a list saw expired", decide(t, s, listed), ladder.ErrExpired)
	// A repeat of the request answers with the expired approval.
	again, created := must2(s.CreateApproval(ctx, lifetime(approval("ap_late_again", wsA, "idem-late"), life), entry(t, wsA, ladder.AuditApproval, "ap_late_again", t0, nil)))
	if created || again.ID != late.ID || again.Status != ladder.ApprovalExpired {
		t.Errorf("repeat of an expired request: %s %s created %v", again.ID, again.Status, created)
	}
	if got := must(s.GetApproval(ctx, wsA, inTime.ID)); got.Status != ladder.ApprovalExecuting {
		t.Errorf("the approval decided in time is %s", got.Status)
	}
	// Five requests, one decision, four expiries: each once.
	var expiries int
	check(t, s.WalkAudit(ctx, 0, func(r ladder.AuditRecord) error {
		var d struct{ Event string }
		if err := json.Unmarshal(r.Data, &d); err == nil && d.Event == "expired" {
			expiries++
		}
		return nil
	}))
	if expiries != 4 {
		t.Errorf("%d expiry audit records, want 4", expiries)
	}
	wantAuditKinds(t, s, map[string]int{ladder.AuditApproval: 5 + 1 + 4})
}

// testApprovalShadowCap: concurrent shadow records of one key and step
// leave exactly the cap stored; a repeat of a stored one still answers at
// the cap; another key and another step of the key are not counted; a
// review of a route frees the places of its records, and a record for a
// route reviewed already is not stored; a cap of 0 stores everything.
func testApprovalShadowCap(t *testing.T, s ladder.Store) {
	ctx := t.Context()
	const maxShadow, callers = 10, 40
	routes := setupRoutes(t, s, ladder.LaneShadow, 12)
	shadow := func(id, key string, rt ladder.Route) ladder.Approval {
		a := approval(id, wsA, key)
		a.Kind, a.Status, a.ExpiresAt = ladder.ApprovalShadowRec, ladder.ApprovalShadow, time.Time{}
		a.RouteID, a.Queue, a.Step, a.Item = rt.ID, rt.Queue, rt.Step, rt.Item
		a.MaxShadow = maxShadow
		return a
	}
	create := func(a ladder.Approval) (ladder.Approval, bool, error) {
		return s.CreateApproval(ctx, a, entry(t, a.Workspace, ladder.AuditApproval, a.ID, t0, nil))
	}
	// An agent repeating one item with fresh idempotency keys: every
	// record names route 0.
	first, _ := must2(create(shadow("ap_sh_first", "idem-sh-first", routes[0])))
	var created, refused atomic.Int32
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			_, ok, err := create(shadow(fmt.Sprintf("ap_sh_%d", i), "", routes[0]))
			switch {
			case errors.Is(err, ladder.ErrTooManyShadow):
				refused.Add(1)
			case err != nil:
				t.Errorf("CreateApproval ap_sh_%d: %v", i, err)
			case ok:
				created.Add(1)
			}
		})
	}
	wg.Wait()
	if created.Load() != maxShadow-1 || refused.Load() != callers-maxShadow+1 {
		t.Fatalf("%d created and %d refused; want %d and %d", created.Load(), refused.Load(), maxShadow-1, callers-maxShadow+1)
	}
	stored := func() int {
		return len(must(s.ListApprovals(ctx, ladder.ApprovalQuery{Workspace: wsA, Status: ladder.ApprovalShadow, RequestedBy: "k_agent", Limit: 500})))
	}
	if n := stored(); n != maxShadow {
		t.Fatalf("%d shadow records stored, want the cap, %d", n, maxShadow)
	}
	// At the cap, a repeat answers with its record.
	if again, ok := must2(create(shadow("ap_sh_again", "idem-sh-first", routes[0]))); ok || again.ID != first.ID {
		t.Errorf("a repeat at the cap: %s created %v, want %s", again.ID, ok, first.ID)
	}
	// Another key, another step of this key, and pending approvals are
	// counted apart.
	other := shadow("ap_sh_other_key", "", routes[1])
	other.RequestedBy = "k_other"
	must2(create(other))
	otherStep := shadow("ap_sh_other_step", "", routes[1])
	otherStep.Step = "other_step"
	must2(create(otherStep))
	pending := approval("ap_sh_pending", wsA, "")
	pending.MaxPending = maxShadow
	must2(create(pending))

	// The review of route 0 frees all its records' places.
	must2(s.RecordReview(ctx, review(t, "rv_sh_0", routes[0], t0, ladder.ReviewShadow, ladder.VerdictAgree, keep)))
	for i := 1; i <= maxShadow; i++ {
		must2(create(shadow(fmt.Sprintf("ap_sh_after_%d", i), "", routes[i])))
	}
	_, _, err := create(shadow("ap_sh_over", "", routes[11]))
	wantErr(t, "one over the cap after a review", err, ladder.ErrTooManyShadow)
	// The review of route 1 frees one place (its record of another step
	// and of another key had none here).
	must2(s.RecordReview(ctx, review(t, "rv_sh_1", routes[1], t0, ladder.ReviewShadow, ladder.VerdictAgree, keep)))
	must2(create(shadow("ap_sh_freed", "", routes[11])))
	_, _, err = create(shadow("ap_sh_over2", "", routes[11]))
	wantErr(t, "one over the cap after the freed place", err, ladder.ErrTooManyShadow)
	// A route reviewed already takes no record, at the cap or not.
	k2 := shadow("ap_sh_reviewed", "", routes[0])
	k2.RequestedBy = "k_second"
	_, _, err = create(k2)
	wantErr(t, "a record for a reviewed route", err, ladder.ErrRouteReviewed)
	// An adjudication is a review too; it closes nothing twice.
	adj := review(t, "rv_sh_adj", routes[2], t0.Add(time.Hour), ladder.ReviewShadow, ladder.VerdictDisagree, keep)
	adj.Review.Adjudication = true
	must2(s.RecordReview(ctx, adj))
	must2(create(shadow("ap_sh_after_adj", "", routes[11])))
	// Without a cap, records are stored as before.
	uncapped := shadow("ap_sh_uncapped", "", routes[11])
	uncapped.MaxShadow = 0
	if _, ok := must2(create(uncapped)); !ok {
		t.Error("an uncapped record was not stored")
	}
	// The cap of route 0's, the cap after its review, and four more: the
	// freed place, the one after the adjudication, the uncapped one and
	// the other step's.
	if n, want := stored(), 2*maxShadow+4; n != want {
		t.Errorf("%d shadow records stored, want %d", n, want)
	}
}

// testApprovalPendingCap: concurrent requests of one key leave exactly the
// cap pending; a repeat of an existing request still answers at the cap;
// other keys, shadow records, decided and expired approvals do not count.
func testApprovalPendingCap(t *testing.T, s ladder.Store) {
	ctx := t.Context()
	const maxPending, callers = 10, 40
	capped := func(id, key string) ladder.Approval {
		a := approval(id, wsA, key)
		a.MaxPending = maxPending
		return a
	}
	first, _ := must2(s.CreateApproval(ctx, capped("ap_cap_first", "idem-first"), entry(t, wsA, ladder.AuditApproval, "ap_cap_first", t0, nil)))
	var created, refused atomic.Int32
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			a := capped(fmt.Sprintf("ap_cap_%d", i), "")
			_, ok, err := s.CreateApproval(ctx, a, entry(t, wsA, ladder.AuditApproval, a.ID, t0, nil))
			switch {
			case errors.Is(err, ladder.ErrTooManyPending):
				refused.Add(1)
			case err != nil:
				t.Errorf("CreateApproval %s: %v", a.ID, err)
			case ok:
				created.Add(1)
			}
		})
	}
	wg.Wait()
	if created.Load() != maxPending-1 || refused.Load() != callers-maxPending+1 {
		t.Fatalf("%d created and %d refused; want %d and %d", created.Load(), refused.Load(), maxPending-1, callers-maxPending+1)
	}
	pendingOf := func(key string) int {
		n := 0
		for _, a := range must(s.ListApprovals(ctx, ladder.ApprovalQuery{Workspace: wsA, Status: ladder.ApprovalPending, RequestedBy: key, Limit: 500})) {
			if a.Status == ladder.ApprovalPending {
				n++
			}
		}
		return n
	}
	if n := pendingOf("k_agent"); n != maxPending {
		t.Fatalf("%d pending, want the cap, %d", n, maxPending)
	}
	// At the cap, a repeat of a request answers with its approval.
	again, ok := must2(s.CreateApproval(ctx, capped("ap_cap_again", "idem-first"), entry(t, wsA, ladder.AuditApproval, "ap_cap_again", t0, nil)))
	if ok || again.ID != first.ID {
		t.Errorf("a repeat at the cap: %s created %v, want %s", again.ID, ok, first.ID)
	}
	// Another key, and a shadow record, are not this key's pending.
	other := capped("ap_cap_other", "")
	other.RequestedBy = "k_other"
	must2(s.CreateApproval(ctx, other, entry(t, wsA, ladder.AuditApproval, other.ID, t0, nil)))
	shadow := capped("ap_cap_shadow", "")
	shadow.Status, shadow.ExpiresAt = ladder.ApprovalShadow, time.Time{}
	must2(s.CreateApproval(ctx, shadow, entry(t, wsA, ladder.AuditApproval, shadow.ID, t0, nil)))
	// A decided approval frees its place, once.
	check(t, decide(t, s, first))
	must2(s.CreateApproval(ctx, capped("ap_cap_freed", ""), entry(t, wsA, ladder.AuditApproval, "ap_cap_freed", t0, nil)))
	_, _, err := s.CreateApproval(ctx, capped("ap_cap_over", ""), entry(t, wsA, ladder.AuditApproval, "ap_cap_over", t0, nil))
	wantErr(t, "one over the cap after a decision", err, ladder.ErrTooManyPending)
	// Approvals past their deadline do not count, read or not.
	var last ladder.Approval
	for i := range maxPending {
		a := lifetime(capped(fmt.Sprintf("ap_short_%d", i), ""), 500*time.Millisecond)
		a.RequestedBy = "k_short"
		last, _ = must2(s.CreateApproval(ctx, a, entry(t, wsA, ladder.AuditApproval, a.ID, t0, nil)))
	}
	over := capped("ap_short_over", "")
	over.RequestedBy = "k_short"
	_, _, err = s.CreateApproval(ctx, over, entry(t, wsA, ladder.AuditApproval, over.ID, t0, nil))
	wantErr(t, "one over the cap of short approvals", err, ladder.ErrTooManyPending)
	time.Sleep(time.Until(last.ExpiresAt) + 100*time.Millisecond)
	if _, ok := must2(s.CreateApproval(ctx, over, entry(t, wsA, ladder.AuditApproval, over.ID, t0, nil))); !ok {
		t.Error("a request after the others expired was not created")
	}
}

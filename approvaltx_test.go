package ladder_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ladderhq/ladder"
)

func TestExpireTx(t *testing.T) {
	deadline := time.Date(2026, 9, 1, 9, 0, 0, 0, time.UTC)
	pending := ladder.Approval{ID: "ap1", Workspace: "ws", Status: ladder.ApprovalPending, ExpiresAt: deadline, Seq: 7}
	tests := []struct {
		name      string
		due       bool
		failOn    string
		want      ladder.ApprovalStatus
		wantErr   error
		wantWrite bool
	}{
		{name: "not due: returned as read", due: false, want: ladder.ApprovalPending},
		{name: "due: stored expired with its audit", due: true, want: ladder.ApprovalExpired, wantWrite: true},
		{name: "a failing store fails", due: true, failOn: "StoreApproval", wantErr: errFake},
		{name: "a failing audit fails", due: true, failOn: "AppendAudit", wantErr: errFake},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeTx()
			f.failOn = tt.failOn
			got, err := ladder.ExpireTx(f, ladder.DueApproval{Approval: pending, Due: tt.due}, txNow)
			if !errors.Is(err, tt.wantErr) || (err != nil) != (tt.wantErr != nil) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if got.Status != tt.want || got.Seq != 7 {
				t.Errorf("approval %+v: want status %s, seq 7", got, tt.want)
			}
			if !tt.wantWrite {
				if len(f.approvals)+len(f.audit) != 0 {
					t.Errorf("not due, yet wrote %v and %v", f.approvals, f.audit)
				}
				return
			}
			if len(f.approvals) != 1 || f.approvals[0].Status != ladder.ApprovalExpired || f.approvals[0].Seq != 7 {
				t.Errorf("stored %+v: want the approval, expired, by its seq", f.approvals)
			}
			want, _ := ladder.ExpiryAudit(got, txNow)
			// The expiry's event rides on its audit entry, so the store
			// writes it in the same transaction.
			if len(f.audit) == 1 {
				ev := f.audit[0].Event
				if ev == nil || ev.Type != ladder.EventApprovalExpired || ev.Data.ApprovalID != "ap1" || !ev.At.Equal(txNow.Truncate(time.Microsecond)) || ev.ID == "" {
					t.Errorf("expiry event %+v", ev)
				}
				want.Event = ev
			}
			if diff := cmp.Diff([]ladder.AuditEntry{want}, f.audit); diff != "" {
				t.Errorf("audit (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSplitDue(t *testing.T) {
	a, b, c := ladder.Approval{ID: "a"}, ladder.Approval{ID: "b"}, ladder.Approval{ID: "c"}
	out, due := ladder.SplitDue([]ladder.DueApproval{{Approval: a}, {Approval: b, Due: true}, {Approval: c, Due: true}})
	if diff := cmp.Diff([]ladder.Approval{a, b, c}, out); diff != "" {
		t.Errorf("out (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{1, 2}, due); diff != "" {
		t.Errorf("due (-want +got):\n%s", diff)
	}
	if out, due := ladder.SplitDue(nil); len(out) != 0 || due != nil {
		t.Errorf("SplitDue(nil) = %v, %v; want nothing", out, due)
	}
}

func TestDecodeApproval(t *testing.T) {
	a, err := ladder.DecodeApproval(9, []byte(`{"approval_id":"ap1","status":"pending"}`))
	if err != nil || a.ID != "ap1" || a.Status != ladder.ApprovalPending || a.Seq != 9 {
		t.Errorf("DecodeApproval = %+v, %v; want ap1, pending, seq 9", a, err)
	}
	if _, err := ladder.DecodeApproval(1, []byte(`{`)); err == nil {
		t.Error("DecodeApproval of a broken document: no error")
	}
	if c, err := ladder.DecodeCall([]byte(`{"call_id":"c1"}`)); err != nil || c.ID != "c1" {
		t.Errorf("DecodeCall = %+v, %v; want c1", c, err)
	}
}

func TestApprovalForCreateAndCaps(t *testing.T) {
	shadow := ladder.Approval{Status: ladder.ApprovalShadow, Queue: "q", Step: "s", RouteID: "rt1", RequestedBy: "k1", MaxShadow: 2, CreatedAt: txNow}
	a, caps := shadow.ForCreate()
	if a.MaxShadow != 0 || a.MaxPending != 0 || a.CreatedAt != ladder.NormTime(txNow) {
		t.Errorf("stored approval %+v: want no caps, times normalised", a)
	}
	if diff := cmp.Diff(ladder.ApprovalCaps{MaxShadow: 2, ShadowStep: "q/s"}, caps); diff != "" {
		t.Errorf("caps (-want +got):\n%s", diff)
	}
	if !caps.Capped(a) || caps.CountsPending(a) {
		t.Errorf("shadow under a shadow cap: Capped %v, CountsPending %v; want true, false", caps.Capped(a), caps.CountsPending(a))
	}
	if _, c := (ladder.Approval{Status: ladder.ApprovalShadow, Step: "s"}).ForCreate(); c.ShadowStep != "" {
		t.Errorf("a shadow record without a route has shadow step %q, want none", c.ShadowStep)
	}

	tests := []struct {
		name     string
		caps     ladder.ApprovalCaps
		reviewed bool
		open     int // the key's open records of the step
		want     string
		wantErr  error
	}{
		{name: "unreviewed, under the cap: open", caps: caps, open: 1, want: "q/s"},
		{name: "unreviewed, at the cap: refused", caps: caps, open: 2, wantErr: ladder.ErrTooManyShadow},
		{name: "unreviewed, no cap: open, not counted", caps: ladder.ApprovalCaps{ShadowStep: "q/s"}, open: 99, want: "q/s"},
		{name: "reviewed, no cap: closed", caps: ladder.ApprovalCaps{ShadowStep: "q/s"}, reviewed: true},
		{name: "reviewed, capped: refused", caps: caps, reviewed: true, wantErr: ladder.ErrRouteReviewed},
	}
	for _, tt := range tests {
		got, err := tt.caps.OpenShadow(shadowTx{reviewed: tt.reviewed, open: tt.open}, a)
		if got != tt.want || !errors.Is(err, tt.wantErr) || (err != nil) != (tt.wantErr != nil) {
			t.Errorf("%s: OpenShadow = %q, %v; want %q, %v", tt.name, got, err, tt.want, tt.wantErr)
		}
	}
	if err := caps.CheckShadow(a, 1); err != nil {
		t.Errorf("CheckShadow under the cap: %v", err)
	}
	if err := caps.CheckShadow(a, 2); !errors.Is(err, ladder.ErrTooManyShadow) {
		t.Errorf("CheckShadow at the cap: %v, want ErrTooManyShadow", err)
	}

	p, pc := (ladder.Approval{Status: ladder.ApprovalPending, RequestedBy: "k1", MaxPending: 3}).ForCreate()
	if !pc.Capped(p) || !pc.CountsPending(p) {
		t.Errorf("pending under a pending cap: Capped %v, CountsPending %v; want true, true", pc.Capped(p), pc.CountsPending(p))
	}
	if err := pc.CheckPending(p, 2); err != nil {
		t.Errorf("CheckPending under the cap: %v", err)
	}
	if err := pc.CheckPending(p, 3); !errors.Is(err, ladder.ErrTooManyPending) {
		t.Errorf("CheckPending at the cap: %v, want ErrTooManyPending", err)
	}
	if _, none := (ladder.Approval{Status: ladder.ApprovalPending}).ForCreate(); none.Capped(p) {
		t.Error("an approval without caps is capped")
	}
}

// shadowTx is a ShadowTx that answers from its fields.
type shadowTx struct {
	reviewed bool
	open     int
}

func (s shadowTx) RouteReviewed(string) (bool, error) { return s.reviewed, nil }

func (s shadowTx) OpenShadows(string, string, string) (int, error) { return s.open, nil }

package service

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ladderhq/ladder"
)

func TestStepsRunAlone(t *testing.T) {
	s := newDemoService(t)
	ctx := context.Background()
	view, err := s.StepsRunAlone(ctx, demoWS, "", "https://ladder.example/")
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Step      string
		Lane      ladder.Lane
		RunsAlone bool
		Evidence  string
	}
	var got []row
	for _, r := range view.Steps {
		got = append(got, row{r.Step, r.Lane, r.RunsAlone, r.Evidence})
	}
	ev := func(step string) string { return "https://ladder.example/v1/steps/bills/" + step + "/evidence" }
	want := []row{
		{"read_bill", ladder.LaneAuto, true, ev("read_bill")},
		{"match_load", ladder.LanePropose, false, ev("match_load")},
		{"rate_check", ladder.LanePropose, false, ev("rate_check")},
		{"check_accessorials", ladder.LaneShadow, false, ev("check_accessorials")},
		{"decide_hold", ladder.LaneShadow, false, ev("decide_hold")},
		{"post_tms", ladder.LaneAuto, true, ev("post_tms")},
		{"send_remittance", ladder.LaneHumanOnly, false, ev("send_remittance")},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
	if want := "Runs alone (Auto): Read the bill; Post to the TMS. 5 other steps need a person."; view.Sentence != want {
		t.Errorf("sentence %q, want %q", view.Sentence, want)
	}
	for _, tt := range []struct {
		ws, queue string
		want      refusal
	}{
		{demoWS, "bills", refusal{}},
		{demoWS, "nope", refusal{Code: ladder.CodeStepNotFound, Field: "queue"}},
	} {
		_, err := s.StepsRunAlone(ctx, tt.ws, tt.queue, "")
		if diff := cmp.Diff(tt.want, refusalOf(t, err)); diff != "" {
			t.Errorf("StepsRunAlone(%s, %s) (-want +got):\n%s", tt.ws, tt.queue, diff)
		}
	}
	none, err := s.StepsRunAlone(ctx, "partner-programs", "", "")
	if err != nil || len(none.Steps) != 0 || none.Sentence != "Runs alone (Auto): none. 0 other steps need a person." {
		t.Errorf("a workspace without steps: %+v, %v", none, err)
	}
}

func TestEvidencePack(t *testing.T) {
	s := newDemoService(t)
	ctx := context.Background()
	for _, tt := range []struct {
		queue, step string
		want        refusal
	}{
		{"", "post_tms", refusal{}},
		{"", "Post to the TMS", refusal{}},
		{"nope", "post_tms", refusal{Code: ladder.CodeStepNotFound, Field: "queue"}},
		{"", "", invalid("step")},
	} {
		pack, err := s.Evidence(ctx, demoWS, tt.queue, tt.step)
		if diff := cmp.Diff(tt.want, refusalOf(t, err)); diff != "" {
			t.Errorf("Evidence(%q, %q) (-want +got):\n%s", tt.queue, tt.step, diff)
		}
		if err == nil && (pack.Step != "post_tms" || pack.Lane != ladder.LaneAuto || pack.AuditRate != 0.1 || pack.LaneChanges == nil || pack.RecentAudits == nil) {
			t.Errorf("pack of post_tms: %+v", pack)
		}
	}
}

// TestApprovalExpiry: a proposal nobody decides expires at its TTL by the
// store's clock; deciding it then is refused, and the lists say so.
func TestApprovalExpiry(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 9, 1, 9, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	s := newDemoServiceClock(t, clock, func(o *Options) { o.ApprovalTTL = time.Hour })
	ctx := context.Background()
	res, err := s.CallCapability(ctx, demoAgent, "rates:approveRate", json.RawMessage(`{"bill_id":"B-1","linehaul_usd":1850,"fuel_surcharge_usd":212.5}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := now.Add(time.Hour); res.ExpiresAt == nil || !res.ExpiresAt.Equal(want) {
		t.Errorf("expires at %v, want %v", res.ExpiresAt, want)
	}
	if n, err := s.ExpireDue(ctx); err != nil || n != 0 {
		t.Errorf("ExpireDue before the TTL: %d, %v", n, err)
	}
	mu.Lock()
	now = now.Add(2 * time.Hour)
	mu.Unlock()
	if n, err := s.ExpireDue(ctx); err != nil || n != 1 {
		t.Errorf("ExpireDue after the TTL: %d, %v", n, err)
	}
	for _, decide := range []func() error{
		func() error { _, err := s.Approve(ctx, demoHuman, res.ApprovalID, ladder.DecideRequest{}); return err },
		func() error {
			_, err := s.Reject(ctx, demoHuman, res.ApprovalID, ladder.DecideRequest{Reason: "late"})
			return err
		},
	} {
		if diff := cmp.Diff(refusal{Code: ladder.CodeApprovalExpired}, refusalOf(t, decide())); diff != "" {
			t.Errorf("deciding an expired approval (-want +got):\n%s", diff)
		}
	}
	count := func(status string) int {
		t.Helper()
		page, err := s.ListApprovals(ctx, demoHuman, status, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		return len(page.Approvals)
	}
	if p, e := count("pending"), count("expired"); p != 0 || e != 1 {
		t.Errorf("%d pending and %d expired, want 0 and 1", p, e)
	}
}

// TestApprovalLanes: a proposal remembers the lane it was made in, and
// tells the approver when the step has moved since.
func TestApprovalLanes(t *testing.T) {
	s := newDemoService(t)
	ctx := context.Background()
	res, err := s.CallCapability(ctx, demoAgent, "rates:approveRate", json.RawMessage(`{"bill_id":"B-1","linehaul_usd":1850,"fuel_surcharge_usd":212.5}`))
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.store.GetApproval(ctx, demoWS, res.ApprovalID)
	if err != nil {
		t.Fatal(err)
	}
	lanes := func(p ladder.Principal) ladder.StepLanes {
		t.Helper()
		l, err := s.ApprovalLanes(ctx, p, a)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	if diff := cmp.Diff(ladder.StepLanes{Proposed: ladder.LanePropose, Now: ladder.LanePropose}, lanes(demoHuman)); diff != "" {
		t.Errorf("lanes before a pin (-want +got):\n%s", diff)
	}
	if _, err := s.Pin(ctx, demoHuman, "", "rate_check", ladder.PinRequest{Lane: string(ladder.LaneHumanOnly), Reason: "new carrier contracts"}, true); err != nil {
		t.Fatal(err)
	}
	l := lanes(demoHuman)
	if diff := cmp.Diff(ladder.StepLanes{Proposed: ladder.LanePropose, Now: ladder.LaneHumanOnly}, l); diff != "" || !l.Changed() {
		t.Errorf("lanes after a pin to human_only (-want +got):\n%s(changed %v)", diff, l.Changed())
	}
	if diff := cmp.Diff(ladder.StepLanes{}, lanes(partnerAgent)); diff != "" {
		t.Errorf("lanes seen from another workspace (-want +got):\n%s", diff)
	}
	view, err := s.ApprovalStatus(ctx, demoHuman, a.ID)
	if err != nil || view.StepLane != ladder.LaneHumanOnly {
		t.Errorf("approval status after the pin: step lane %q, %v", view.StepLane, err)
	}
	// A proposal made now, with the step in human_only, is refused.
	_, err = s.CallCapability(ctx, demoAgent, "rates:approveRate", json.RawMessage(`{"bill_id":"B-2","linehaul_usd":1850,"fuel_surcharge_usd":212.5}`))
	if diff := cmp.Diff(refusal{Code: ladder.CodeStepNeedsPerson}, refusalOf(t, err)); diff != "" {
		t.Errorf("a call at a step in human_only (-want +got):\n%s", diff)
	}
}

func TestBacktestWithoutHistory(t *testing.T) {
	s := newDemoService(t)
	steps, err := s.Backtest(context.Background(), demoWS, time.Time{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	type end struct {
		Step        string
		Actual, Sim ladder.Lane
		Moves       int
	}
	var got []end
	for _, b := range steps {
		got = append(got, end{b.Step, b.EndActual, b.EndSim, len(b.Actual) + len(b.Simulated)})
	}
	want := []end{
		{"read_bill", ladder.LaneAuto, ladder.LaneAuto, 0},
		{"match_load", ladder.LanePropose, ladder.LanePropose, 0},
		{"rate_check", ladder.LanePropose, ladder.LanePropose, 0},
		{"check_accessorials", ladder.LaneShadow, ladder.LaneShadow, 0},
		{"decide_hold", ladder.LaneShadow, ladder.LaneShadow, 0},
		{"post_tms", ladder.LaneAuto, ladder.LaneAuto, 0},
		{"send_remittance", ladder.LaneHumanOnly, ladder.LaneHumanOnly, 0},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("backtest with no reviews (-want +got):\n%s", diff)
	}
}

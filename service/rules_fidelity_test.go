package service

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/rules"
)

// TestDemotionReadsWholeWindow: DESIGN.md §4 limits only promotion to the
// reviews taken after a demotion; demotions keep reading the whole rolling
// window. One disagreement right after auto → propose (0/1 in the new
// epoch, Wilson upper 0.79) must not demote again to shadow while the
// rolling-2 window across epochs holds 10/15 (upper 0.855 ≥ 0.8); a window
// that stays poor does demote again.
func TestDemotionReadsWholeWindow(t *testing.T) {
	step := ladder.Step{ID: "s", Queue: "q", Class: ladder.ClassB}
	th := rules.Defaults(ladder.ClassB)
	th.ProposeLower = 0.8
	now := time.Date(2026, 9, 16, 12, 0, 0, 0, time.UTC) // a Wednesday
	_, monday := ladder.ISOWeek(now)
	iso, _ := ladder.ISOWeek(now)
	week := func(epoch, n, agree int) ladder.WeekAgg {
		return ladder.WeekAgg{Workspace: "w", Queue: "q", Step: "s", ISOWeek: iso, WeekStart: monday, Epoch: epoch, N: n, Agreements: agree}
	}
	state := ladder.StepState{Workspace: "w", Queue: "q", Step: "s", Lane: ladder.LanePropose, LaneSince: now.Add(-time.Hour), Epoch: 1}
	for _, tc := range []struct {
		name   string
		weeks  []ladder.WeekAgg
		wantTo ladder.Lane // "" for no move
	}{
		{"window holds 10/15", []ladder.WeekAgg{week(0, 14, 10), week(1, 1, 0)}, ""},
		{"window poor 4/15", []ladder.WeekAgg{week(0, 14, 4), week(1, 1, 0)}, ladder.LaneShadow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := RuleInput(step, state, tc.weeks, ladder.OutcomeCounts{}, now)
			if in.Rolling2.N != 15 || in.Rolling4.N != 1 {
				t.Errorf("rolling-2 n %d (want 15, every epoch), rolling-4 n %d (want 1, the current epoch)", in.Rolling2.N, in.Rolling4.N)
			}
			res := rules.Evaluate(th, in)
			var got ladder.Lane
			if res.Move != nil {
				got = res.Move.To
			}
			if got != tc.wantTo {
				t.Errorf("move to %q, want %q (move %+v)", got, tc.wantTo, res.Move)
			}
		})
	}
}

// TestFailedAuditDoublesRateInAnyLane: a failed audit of an item routed in
// auto doubles the step's audit rate whatever the lane when its review
// arrives (DESIGN.md §4) — here after a person pinned the step to propose.
func TestFailedAuditDoublesRateInAnyLane(t *testing.T) {
	s := newDemoService(t)
	ctx := context.Background()
	before, err := s.StepState(ctx, demoHuman, "bills", "read_bill")
	if err != nil {
		t.Fatal(err)
	}
	if before.Lane != ladder.LaneAuto {
		t.Fatalf("read_bill starts in %s, want auto", before.Lane)
	}
	rt, err := s.Route(ctx, demoAgent, ladder.RouteRequest{Step: "read_bill", Item: "B-77"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pin(ctx, demoHuman, "bills", "read_bill", ladder.PinRequest{Lane: string(ladder.LanePropose), Reason: "a carrier changed its format"}, true); err != nil {
		t.Fatal(err)
	}
	res, err := s.Review(ctx, demoHuman, rt.ID, ladder.ReviewRequest{Verdict: "disagree", Severity: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.Review.Kind != ladder.ReviewAudit {
		t.Fatalf("review kind %s, want audit (the item was routed in auto)", res.Review.Kind)
	}
	after, err := s.StepState(ctx, demoHuman, "bills", "read_bill")
	if err != nil {
		t.Fatal(err)
	}
	want := math.Min(2*before.AuditRate, 1)
	if after.AuditRate != want {
		t.Errorf("audit rate %v after a failed audit in propose, want %v (doubled from %v)", after.AuditRate, want, before.AuditRate)
	}
	if after.LastAuditFailAt.IsZero() {
		t.Error("the failed audit is not recorded as the step's last audit failure")
	}
}

// TestAdjudicatedSev1NoLongerBlocksAuto: a severity-1 disagreement
// adjudicated to agree is replaced in every rule, so it no longer holds
// propose → auto's "no severity-1 error in 2 weeks".
func TestAdjudicatedSev1NoLongerBlocksAuto(t *testing.T) {
	s := newDemoService(t)
	ctx := context.Background()
	sev1Need := func() ladder.Requirement {
		t.Helper()
		pack, err := s.Evidence(ctx, "vantrow-bills", "bills", "match_load")
		if err != nil {
			t.Fatal(err)
		}
		if pack.NextMove == nil {
			t.Fatalf("match_load has no next move: %+v", pack)
		}
		return pack.NextMove.Needs["days_since_severity_1"]
	}
	// Agreements first, so one disagreement does not demote the step.
	for i := range 10 {
		r, err := s.Route(ctx, demoAgent, ladder.RouteRequest{Step: "match_load", Item: fmt.Sprintf("B-%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Review(ctx, demoHuman, r.ID, ladder.ReviewRequest{Verdict: "agree"}); err != nil {
			t.Fatal(err)
		}
	}
	rt, err := s.Route(ctx, demoAgent, ladder.RouteRequest{Step: "match_load", Item: "B-99"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Review(ctx, demoHuman, rt.ID, ladder.ReviewRequest{Verdict: "disagree", Severity: 1}); err != nil {
		t.Fatal(err)
	}
	if need := sev1Need(); need.Met {
		t.Fatalf("right after a severity-1 error the clean-weeks need is met: %+v", need)
	}
	if _, err := s.Review(ctx, demoHuman, rt.ID, ladder.ReviewRequest{Verdict: "agree", Adjudication: true}); err != nil {
		t.Fatal(err)
	}
	if need := sev1Need(); !need.Met || need.Have != nil {
		t.Errorf("after the error was adjudicated to agree, days_since_severity_1 is %+v; want met with no error on record", need)
	}
}

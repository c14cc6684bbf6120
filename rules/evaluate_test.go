package rules

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/stats"
)

var now = time.Date(2026, 9, 14, 12, 0, 0, 0, time.UTC)

// in builds an Input of class in lane, entered weeks ago, with the rolling-4
// and rolling-2 counts, and everything else clean: operator error 1 in 100,
// outcome test PASS, no severity-1 error. Each case changes what it tests.
func in(t *testing.T, class ladder.RiskClass, lane ladder.Lane, inLane time.Duration, r4, r2 stats.Counts, opts ...func(*Input)) Input {
	t.Helper()
	x := Input{
		Class: class, Lane: lane, LaneSince: now.Add(-inLane), Now: now,
		Rolling2: r2, Rolling4: r4,
		OperatorN: 100, OperatorErrors: 1,
		Outcome: stats.NonInferiority(1000, 20, 1000, 25, stats.DefaultMargin, stats.DefaultAlpha),
	}
	if x.Outcome.State != ladder.NIPass {
		t.Fatalf("fixture outcome test is %s, want PASS", x.Outcome.State)
	}
	for _, o := range opts {
		o(&x)
	}
	return x
}

func c(agree, n int) stats.Counts { return stats.Counts{N: n, Agreements: agree} }

func weeks(w float64) time.Duration { return time.Duration(w * float64(Week)) }

// lower and upper are the Wilson bounds at z = 1.96 (checked in package
// stats against published and independently computed values).
func lower(t *testing.T, cnt stats.Counts) float64 {
	t.Helper()
	lo, _ := stats.Wilson(cnt.Agreements, cnt.N, stats.Z95)
	return lo
}

func upper(t *testing.T, cnt stats.Counts) float64 {
	t.Helper()
	_, hi := stats.Wilson(cnt.Agreements, cnt.N, stats.Z95)
	return hi
}

// outcome is a compact view of a Result: the move (or the promotion worked
// toward and the names of its unmet requirements) and the hold.
type outcome struct {
	Hold     string
	To       ladder.Lane
	Rule     string
	NewEpoch bool
	Moves    bool
	Unmet    []string
}

func summarize(t *testing.T, r Result) outcome {
	t.Helper()
	if r.Move != nil && r.Next != nil {
		t.Fatalf("Result has both Move and Next: %+v", r)
	}
	o := outcome{Hold: r.Hold}
	switch {
	case r.Move != nil:
		o.Moves, o.To, o.Rule, o.NewEpoch = true, r.Move.To, r.Move.Rule, r.Move.NewEpoch
	case r.Next != nil:
		o.To, o.Rule = r.Next.To, r.Next.Rule
		for k, req := range r.Next.Needs {
			if !req.Met {
				o.Unmet = append(o.Unmet, k)
			}
		}
		slices.Sort(o.Unmet)
	}
	return o
}

func moved(to ladder.Lane, rule string, newEpoch bool) outcome {
	return outcome{Moves: true, To: to, Rule: rule, NewEpoch: newEpoch}
}

func next(to ladder.Lane, rule string, unmet ...string) outcome {
	return outcome{To: to, Rule: rule, Unmet: unmet}
}

func TestEvaluate(t *testing.T) {
	A, B := ladder.ClassA, ladder.ClassB
	shadow, propose, auto := ladder.LaneShadow, ladder.LanePropose, ladder.LaneAuto
	defA, defB := Defaults(A), Defaults(B)
	f := func(v float64) *float64 { return &v }
	i := func(v int) *int { return &v }

	// 149/150: lower 0.9632, upper 0.9988. 143/150: lower 0.9068, upper 0.9772.
	// 97/100: lower 0.9155. 95/100: lower 0.8882. 300/300: lower 0.9874.
	// 295/300: lower 0.9616, upper 0.9929. 196/200: lower 0.9497. 190/200:
	// upper 0.9726. 80/100: upper 0.8707. 130/150: upper 0.9169.
	good := c(300, 300)

	tests := []struct {
		name string
		t    ladder.Thresholds
		in   Input
		want outcome
	}{
		// shadow → propose, class A: 2 weeks, n 150, lower 0.95.
		{"A shadow→propose at every threshold", defA, in(t, A, shadow, 2*Week, c(149, 150), c(70, 70)), moved(propose, RuleShadowToPropose, false)},
		{"A shadow one second short of 2 weeks", defA, in(t, A, shadow, 2*Week-time.Second, c(149, 150), c(70, 70)), next(propose, RuleShadowToPropose, "weeks_in_lane")},
		{"A shadow n one short", defA, in(t, A, shadow, 3*Week, c(149, 149), c(70, 70)), next(propose, RuleShadowToPropose, "n")},
		{"A shadow lower bound short", defA, in(t, A, shadow, 3*Week, c(143, 150), c(70, 70)), next(propose, RuleShadowToPropose, "wilson_lower")},
		{"A shadow lower exactly at an overridden threshold", defA.With(&ladder.ThresholdOverrides{ProposeLower: f(lower(t, c(143, 150)))}), in(t, A, shadow, 3*Week, c(143, 150), c(70, 70)), moved(propose, RuleShadowToPropose, false)},
		{"A shadow lower a hair under an overridden threshold", defA.With(&ladder.ThresholdOverrides{ProposeLower: f(lower(t, c(143, 150)) + 1e-12)}), in(t, A, shadow, 3*Week, c(143, 150), c(70, 70)), next(propose, RuleShadowToPropose, "wilson_lower")},
		{"A shadow nothing yet", defA, in(t, A, shadow, 0, c(0, 0), c(0, 0)), next(propose, RuleShadowToPropose, "n", "weeks_in_lane", "wilson_lower")},
		{"A shadow: class-B numbers do not promote class A", defA, in(t, A, shadow, 2*Week, c(97, 100), c(50, 50)), next(propose, RuleShadowToPropose, "n", "wilson_lower")},
		{"A shadow never demotes", defA, in(t, A, shadow, 5*Week, c(80, 100), c(0, 100)), next(propose, RuleShadowToPropose, "n", "wilson_lower")},

		// shadow → propose, class B: 2 weeks, n 100, lower 0.90.
		{"B shadow→propose", defB, in(t, B, shadow, 2*Week, c(97, 100), c(50, 50)), moved(propose, RuleShadowToPropose, false)},
		{"B shadow n one short", defB, in(t, B, shadow, 2*Week, c(99, 99), c(50, 50)), next(propose, RuleShadowToPropose, "n")},
		{"B shadow lower short", defB, in(t, B, shadow, 2*Week, c(95, 100), c(50, 50)), next(propose, RuleShadowToPropose, "wilson_lower")},
		{"B shadow one second short", defB, in(t, B, shadow, 2*Week-time.Second, c(97, 100), c(50, 50)), next(propose, RuleShadowToPropose, "weeks_in_lane")},
		{"B shadow with overridden weeks and n", defB.With(&ladder.ThresholdOverrides{ProposeMinWeeks: i(1), ProposeMinN: i(50)}), in(t, B, shadow, Week, c(50, 50), c(50, 50)), moved(propose, RuleShadowToPropose, false)},

		// propose → auto, class A: 4 weeks, n 300, lower 0.98, agent error ≤
		// operator error, outcome not FAIL, no severity 1 in 2 weeks.
		{"A propose→auto at every threshold", defA, in(t, A, propose, 4*Week, good, c(150, 150)), moved(auto, RuleProposeToAuto, false)},
		{"A propose one second short of 4 weeks", defA, in(t, A, propose, 4*Week-time.Second, good, c(150, 150)), next(auto, RuleProposeToAuto, "weeks_in_lane")},
		{"A propose n one short", defA, in(t, A, propose, 4*Week, c(299, 299), c(150, 150)), next(auto, RuleProposeToAuto, "n")},
		{"A propose lower short", defA, in(t, A, propose, 4*Week, c(295, 300), c(150, 150)), next(auto, RuleProposeToAuto, "agent_error", "wilson_lower")},
		{"A propose agent error above operator error", defA, in(t, A, propose, 4*Week, c(598, 600), c(150, 150), func(x *Input) { x.OperatorErrors = 0 }), next(auto, RuleProposeToAuto, "agent_error")},
		{"A propose agent error equal to operator error", defA, in(t, A, propose, 4*Week, good, c(150, 150), func(x *Input) { x.OperatorErrors = 0 }), moved(auto, RuleProposeToAuto, false)},
		{"A propose without operator data", defA, in(t, A, propose, 4*Week, good, c(150, 150), func(x *Input) { x.OperatorN, x.OperatorErrors = 0, 0 }), next(auto, RuleProposeToAuto, "agent_error", "operator_n")},
		{"A propose outcome FAIL blocks", defA, in(t, A, propose, 4*Week, good, c(150, 150), func(x *Input) { x.Outcome.State = ladder.NIFail }), next(auto, RuleProposeToAuto, "outcome_test")},
		{"A propose outcome INCONCLUSIVE allows", defA, in(t, A, propose, 4*Week, good, c(150, 150), func(x *Input) { x.Outcome.State = ladder.NIInconclusive }), moved(auto, RuleProposeToAuto, false)},
		{"A propose outcome not started allows", defA, in(t, A, propose, 4*Week, good, c(150, 150), func(x *Input) { x.Outcome = stats.NIResult{} }), moved(auto, RuleProposeToAuto, false)},
		{"A propose severity 1 exactly 2 weeks ago", defA, in(t, A, propose, 4*Week, good, c(150, 150), func(x *Input) { x.LastSev1At = now.Add(-2 * Week) }), moved(auto, RuleProposeToAuto, false)},
		{"A propose severity 1 one second under 2 weeks ago", defA, in(t, A, propose, 4*Week, good, c(150, 150), func(x *Input) { x.LastSev1At = now.Add(-2*Week + time.Second) }), next(auto, RuleProposeToAuto, "days_since_severity_1")},
		{"A propose severity-1 window overridden", defA.With(&ladder.ThresholdOverrides{Sev1CleanWeeks: i(3)}), in(t, A, propose, 4*Week, good, c(150, 150), func(x *Input) { x.LastSev1At = now.Add(-2 * Week) }), next(auto, RuleProposeToAuto, "days_since_severity_1")},
		{"A propose lower exactly at an overridden threshold", defA.With(&ladder.ThresholdOverrides{AutoLower: f(lower(t, c(295, 300)))}), in(t, A, propose, 4*Week, c(295, 300), c(150, 150), func(x *Input) { x.OperatorErrors = 5 }), moved(auto, RuleProposeToAuto, false)},

		// propose → auto, class B: 4 weeks, n 200, lower 0.95.
		{"B propose→auto", defB, in(t, B, propose, 4*Week, c(200, 200), c(100, 100)), moved(auto, RuleProposeToAuto, false)},
		{"B propose n one short", defB, in(t, B, propose, 4*Week, c(199, 199), c(100, 100)), next(auto, RuleProposeToAuto, "n")},
		{"B propose lower just short (196/200 gives 0.9497)", defB, in(t, B, propose, 4*Week, c(196, 200), c(100, 100), func(x *Input) { x.OperatorErrors = 5 }), next(auto, RuleProposeToAuto, "wilson_lower")},
		{"B propose with overridden n", defB.With(&ladder.ThresholdOverrides{AutoMinN: i(150)}), in(t, B, propose, 4*Week, c(150, 150), c(100, 100)), moved(auto, RuleProposeToAuto, false)},

		// propose → shadow: rolling-2 upper < propose threshold.
		{"A propose→shadow", defA, in(t, A, propose, 6*Week, c(240, 300), c(80, 100)), moved(shadow, RuleProposeToShadowUpperBound, true)},
		{"A propose hysteresis: lower < 0.95 ≤ upper stays", defA, in(t, A, propose, 6*Week, c(143, 150), c(143, 150)), next(auto, RuleProposeToAuto, "agent_error", "n", "wilson_lower")},
		{"A propose upper exactly at an overridden threshold stays", defA.With(&ladder.ThresholdOverrides{ProposeLower: f(upper(t, c(80, 100)))}), in(t, A, propose, 6*Week, good, c(80, 100)), moved(auto, RuleProposeToAuto, false)},
		{"A propose upper a hair under an overridden threshold demotes", defA.With(&ladder.ThresholdOverrides{ProposeLower: f(upper(t, c(80, 100)) + 1e-12)}), in(t, A, propose, 6*Week, good, c(80, 100)), moved(shadow, RuleProposeToShadowUpperBound, true)},
		{"A propose with no recent reviews stays", defA, in(t, A, propose, 6*Week, c(0, 0), c(0, 0)), next(auto, RuleProposeToAuto, "agent_error", "n", "wilson_lower")},
		{"B propose: 130/150 (upper 0.9169) stays", defB, in(t, B, propose, 6*Week, c(130, 150), c(130, 150)), next(auto, RuleProposeToAuto, "agent_error", "n", "wilson_lower")},
		{"A propose: 130/150 (upper 0.9169) demotes", defA, in(t, A, propose, 6*Week, c(130, 150), c(130, 150)), moved(shadow, RuleProposeToShadowUpperBound, true)},
		{"B propose→shadow", defB, in(t, B, propose, 6*Week, c(80, 100), c(80, 100)), moved(shadow, RuleProposeToShadowUpperBound, true)},

		// auto → propose.
		{"A auto stays", defA, in(t, A, auto, 10*Week, good, c(150, 150)), outcome{}},
		{"A auto severity-1 audit failure demotes despite the figures", defA, in(t, A, auto, 10*Week, good, c(150, 150), func(x *Input) { x.Sev1AuditFailure = true }), moved(propose, RuleAutoToProposeSev1Audit, true)},
		{"B auto severity-1 audit failure does not demote", defB, in(t, B, auto, 10*Week, good, c(150, 150), func(x *Input) { x.Sev1AuditFailure = true }), outcome{}},
		{"A auto upper below 0.98", defA, in(t, A, auto, 10*Week, good, c(190, 200)), moved(propose, RuleAutoToProposeUpperBound, true)},
		{"B auto same figures stay (0.9726 ≥ 0.95)", defB, in(t, B, auto, 10*Week, good, c(190, 200)), outcome{}},
		{"B auto upper below 0.95", defB, in(t, B, auto, 10*Week, good, c(130, 150)), moved(propose, RuleAutoToProposeUpperBound, true)},
		{"A auto hysteresis: lower < 0.98 ≤ upper stays", defA, in(t, A, auto, 10*Week, c(295, 300), c(295, 300)), outcome{}},
		{"A auto upper exactly at an overridden threshold stays", defA.With(&ladder.ThresholdOverrides{AutoLower: f(upper(t, c(190, 200)))}), in(t, A, auto, 10*Week, good, c(190, 200)), outcome{}},
		{"A auto upper a hair under an overridden threshold demotes", defA.With(&ladder.ThresholdOverrides{AutoLower: f(upper(t, c(190, 200)) + 1e-12)}), in(t, A, auto, 10*Week, good, c(190, 200)), moved(propose, RuleAutoToProposeUpperBound, true)},
		{"A auto with no recent reviews stays", defA, in(t, A, auto, 10*Week, c(0, 0), c(0, 0)), outcome{}},
		{"A auto outcome FAIL demotes", defA, in(t, A, auto, 10*Week, good, c(150, 150), func(x *Input) { x.Outcome = stats.NonInferiority(100, 20, 100, 5, 0.02, 0.05) }), moved(propose, RuleAutoToProposeOutcomeFail, true)},
		{"B auto outcome FAIL demotes", defB, in(t, B, auto, 10*Week, good, c(150, 150), func(x *Input) { x.Outcome.State = ladder.NIFail }), moved(propose, RuleAutoToProposeOutcomeFail, true)},
		{"A auto outcome INCONCLUSIVE stays", defA, in(t, A, auto, 10*Week, good, c(150, 150), func(x *Input) { x.Outcome.State = ladder.NIInconclusive }), outcome{}},
		{"A auto every demotion at once: severity 1 first", defA, in(t, A, auto, 10*Week, good, c(190, 200), func(x *Input) { x.Sev1AuditFailure, x.Outcome.State = true, ladder.NIFail }), moved(propose, RuleAutoToProposeSev1Audit, true)},
		{"A auto upper bound before outcome", defA, in(t, A, auto, 10*Week, good, c(190, 200), func(x *Input) { x.Outcome.State = ladder.NIFail }), moved(propose, RuleAutoToProposeUpperBound, true)},
		{"A auto moves one lane only, even far below propose", defA, in(t, A, auto, 10*Week, c(0, 100), c(0, 100)), moved(propose, RuleAutoToProposeUpperBound, true)},

		// Pinned and human_only steps never move by rule.
		{"pinned shadow with promoting figures", defA, in(t, A, shadow, 9*Week, good, good, func(x *Input) { x.Pinned = true }), outcome{Hold: HoldPinned}},
		{"pinned auto with a severity-1 audit failure", defA, in(t, A, auto, 9*Week, good, c(0, 100), func(x *Input) { x.Pinned, x.Sev1AuditFailure = true, true }), outcome{Hold: HoldPinned}},
		{"human_only with promoting figures", defB, in(t, B, ladder.LaneHumanOnly, 9*Week, good, good), outcome{Hold: HoldHumanOnly}},
		{"unknown lane is left to a person", defB, in(t, B, "sideways", 9*Week, good, good), outcome{Hold: HoldHumanOnly}},

		// Cooldown: a demotion resets LaneSince and starts an epoch, so the
		// step must earn its promotion again from nothing.
		{"A just demoted to propose", defA, in(t, A, propose, 0, c(0, 0), c(0, 0)), next(auto, RuleProposeToAuto, "agent_error", "n", "weeks_in_lane", "wilson_lower")},
		{"A 3 weeks after demotion, perfect new epoch, still cooling", defA, in(t, A, propose, weeks(3.99), good, c(150, 150)), next(auto, RuleProposeToAuto, "weeks_in_lane")},
		{"A 4 weeks after demotion, promotes again", defA, in(t, A, propose, 4*Week, good, c(150, 150)), moved(auto, RuleProposeToAuto, false)},
		{"B just demoted to shadow", defB, in(t, B, shadow, time.Hour, c(0, 0), c(0, 0)), next(propose, RuleShadowToPropose, "n", "weeks_in_lane", "wilson_lower")},
		{"clock behind LaneSince counts as 0 weeks", defB, in(t, B, shadow, -Week, c(100, 100), c(0, 0)), next(propose, RuleShadowToPropose, "weeks_in_lane")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := summarize(t, Evaluate(tt.t, tt.in))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Evaluate mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestEvaluateNumbers checks that each move records every number its rule
// used, and that a NextMove reports have, need and met for each condition.
func TestEvaluateNumbers(t *testing.T) {
	A := ladder.ClassA
	defA := Defaults(A)
	fail := stats.NonInferiority(100, 20, 100, 5, 0.02, 0.05)
	tests := []struct {
		name string
		in   Input
		want Result
	}{
		{
			name: "shadow→propose",
			in:   in(t, A, ladder.LaneShadow, weeks(2.5), c(149, 150), c(70, 70)),
			want: Result{Move: &Move{From: ladder.LaneShadow, To: ladder.LanePropose, Rule: RuleShadowToPropose, Numbers: map[string]float64{
				"weeks_in_lane": 2, "rolling_4_n": 150, "rolling_4_agreements": 149, "rolling_4_wilson_lower": lower(t, c(149, 150)), "z": 1.96,
				"propose_min_weeks": 2, "propose_min_n": 150, "propose_lower": 0.95,
			}}},
		},
		{
			name: "propose→auto",
			in:   in(t, A, ladder.LanePropose, 4*Week, c(300, 300), c(150, 150), func(x *Input) { x.LastSev1At = now.Add(-20 * 24 * time.Hour) }),
			want: Result{Move: &Move{From: ladder.LanePropose, To: ladder.LaneAuto, Rule: RuleProposeToAuto, Numbers: map[string]float64{
				"weeks_in_lane": 4, "rolling_4_n": 300, "rolling_4_agreements": 300, "rolling_4_wilson_lower": lower(t, c(300, 300)), "z": 1.96,
				"auto_min_weeks": 4, "auto_min_n": 300, "auto_lower": 0.98,
				"agent_error": 0, "operator_n": 100, "operator_errors": 1, "operator_error": 0.01,
				"outcome_p_value": 8.1635884792929936e-05, "sev1_clean_weeks": 2, "days_since_severity_1": 20,
			}}},
		},
		{
			name: "propose next move",
			in: in(t, A, ladder.LanePropose, weeks(1.5), c(99, 100), c(50, 50), func(x *Input) {
				x.LastSev1At = now.Add(-3*24*time.Hour - time.Hour)
				x.OperatorN, x.OperatorErrors = 0, 0
				x.Outcome = stats.NIResult{}
			}),
			want: Result{Next: &NextMove{To: ladder.LaneAuto, Rule: RuleProposeToAuto, Needs: map[string]ladder.Requirement{
				"weeks_in_lane":         {Have: 1.0, Need: 4.0},
				"n":                     {Have: 100.0, Need: 300.0},
				"wilson_lower":          {Have: lower(t, c(99, 100)), Need: 0.98},
				"operator_n":            {Have: 0.0, Need: 1.0},
				"agent_error":           {Have: 1 - 0.99, Need: nil},
				"outcome_test":          {Have: "NOT_STARTED", Need: "not FAIL", Met: true},
				"days_since_severity_1": {Have: 3.0, Need: 14.0},
			}}},
		},
		{
			name: "shadow next move with no reviews",
			in:   in(t, A, ladder.LaneShadow, 3*Week, c(0, 0), c(0, 0)),
			want: Result{Next: &NextMove{To: ladder.LanePropose, Rule: RuleShadowToPropose, Needs: map[string]ladder.Requirement{
				"weeks_in_lane": {Have: 3.0, Need: 2.0, Met: true},
				"n":             {Have: 0.0, Need: 150.0},
				"wilson_lower":  {Have: 0.0, Need: 0.95},
			}}},
		},
		{
			name: "auto→propose on the upper bound",
			in:   in(t, A, ladder.LaneAuto, 9*Week, c(300, 300), c(190, 200)),
			want: Result{Move: &Move{From: ladder.LaneAuto, To: ladder.LanePropose, Rule: RuleAutoToProposeUpperBound, NewEpoch: true, Numbers: map[string]float64{
				"rolling_2_n": 200, "rolling_2_agreements": 190, "rolling_2_wilson_upper": upper(t, c(190, 200)), "z": 1.96, "auto_lower": 0.98,
			}}},
		},
		{
			name: "propose→shadow on the upper bound",
			in:   in(t, A, ladder.LanePropose, 9*Week, c(300, 300), c(80, 100)),
			want: Result{Move: &Move{From: ladder.LanePropose, To: ladder.LaneShadow, Rule: RuleProposeToShadowUpperBound, NewEpoch: true, Numbers: map[string]float64{
				"rolling_2_n": 100, "rolling_2_agreements": 80, "rolling_2_wilson_upper": upper(t, c(80, 100)), "z": 1.96, "propose_lower": 0.95,
			}}},
		},
		{
			name: "auto→propose on a severity-1 audit failure",
			in:   in(t, A, ladder.LaneAuto, 9*Week, c(300, 300), c(150, 150), func(x *Input) { x.Sev1AuditFailure = true }),
			want: Result{Move: &Move{From: ladder.LaneAuto, To: ladder.LanePropose, Rule: RuleAutoToProposeSev1Audit, NewEpoch: true, Numbers: map[string]float64{"severity": 1}}},
		},
		{
			name: "auto→propose on the outcome test",
			in:   in(t, A, ladder.LaneAuto, 9*Week, c(300, 300), c(150, 150), func(x *Input) { x.Outcome = fail }),
			want: Result{Move: &Move{From: ladder.LaneAuto, To: ladder.LanePropose, Rule: RuleAutoToProposeOutcomeFail, NewEpoch: true, Numbers: map[string]float64{
				"outcome_agent_n": 100, "outcome_agent_failures": 20, "outcome_person_n": 100, "outcome_person_failures": 5,
				"outcome_margin": 0.02, "outcome_alpha": 0.05, "outcome_diff": fail.Diff, "outcome_diff_lower": fail.DiffLower, "outcome_p_value": fail.PValue,
			}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Evaluate(defA, tt.in)
			if diff := cmp.Diff(tt.want, got, approx); diff != "" {
				t.Errorf("Evaluate mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWeeksInLane(t *testing.T) {
	tests := []struct {
		since time.Duration
		want  int
	}{
		{0, 0},
		{Week - time.Nanosecond, 0},
		{Week, 1},
		{weeks(3.9), 3},
		{-Week, 0},
	}
	for _, tt := range tests {
		x := Input{LaneSince: now.Add(-tt.since), Now: now}
		if got := x.WeeksInLane(); got != tt.want {
			t.Errorf("WeeksInLane() with %v in lane = %d, want %d", tt.since, got, tt.want)
		}
	}
}

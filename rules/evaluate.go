package rules

import (
	"time"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/stats"
)

// Week is the length of a ladder week. Weeks in a lane are whole weeks of
// elapsed time since LaneSince, not calendar weeks, so a step that entered
// shadow on a Sunday does not gain a week on Monday.
const Week = 7 * 24 * time.Hour

// The rule names a Move or NextMove carries; a LaneChange records them.
const (
	RuleShadowToPropose           = "shadow_to_propose"
	RuleProposeToAuto             = "propose_to_auto"
	RuleAutoToProposeSev1Audit    = "auto_to_propose_sev1_audit_failure"
	RuleAutoToProposeUpperBound   = "auto_to_propose_upper_bound"
	RuleAutoToProposeOutcomeFail  = "auto_to_propose_outcome_fail"
	RuleProposeToShadowUpperBound = "propose_to_shadow_upper_bound"
)

// Reasons Evaluate gives in Result.Hold for a step that cannot move by rule.
const (
	HoldPinned    = "pinned"
	HoldHumanOnly = "human_only"
)

// Input is what one evaluation of one step needs, gathered by the caller.
//
// After a demotion the caller starts a new epoch (see Move.NewEpoch): the
// promotion figures (Rolling4, OperatorN, OperatorErrors) count reviews of
// the current epoch only, while the demotion figure (Rolling2) reads the
// whole rolling window across epochs, as DESIGN.md §4 says. A step whose
// window stays poor after one demotion may so demote again at the next
// review; one whose window holds up does not fall on a single new
// disagreement.
type Input struct {
	// Class is the step's risk class; only class A demotes on a severity-1
	// audit failure.
	Class ladder.RiskClass
	// Lane is the step's current lane.
	Lane ladder.Lane
	// LaneSince is when the step entered Lane; a demotion resets it, which is
	// the cooldown: the step must serve the minimum weeks again.
	LaneSince time.Time
	// Now is the caller's clock reading.
	Now time.Time
	// Pinned is set when a person pinned the step; a pinned step never
	// moves by rule.
	Pinned bool

	// Rolling2 is the pooled review count of the last 2 weeks, every epoch;
	// Rolling4 that of the last 4 weeks of the current epoch.
	Rolling2, Rolling4 stats.Counts

	// OperatorN and OperatorErrors are the double-reviewed, human-handled
	// items and how many of them the second reviewer found wrong: the
	// operator error rate the agent's error rate (1 − rolling-4 accuracy)
	// must not exceed for propose → auto.
	OperatorN, OperatorErrors int

	// Outcome is the outcome test (agent- vs person-handled failure rates).
	// Its zero value counts as NOT_STARTED.
	Outcome stats.NIResult

	// LastSev1At is when the step last had a severity-1 error; zero if never.
	LastSev1At time.Time
	// Sev1AuditFailure is set when an adjudicated severity-1 audit failure
	// was recorded since the step entered its lane; on a class-A step in
	// auto it demotes at once, whatever the figures say.
	Sev1AuditFailure bool
}

// WeeksInLane returns the whole weeks between LaneSince and Now (0 if Now is
// before LaneSince).
func (in Input) WeeksInLane() int {
	d := in.Now.Sub(in.LaneSince)
	if d < 0 {
		return 0
	}
	return int(d / Week)
}

// Result is what Evaluate decided. At most one of Move and Next is set: a
// step that moves is evaluated again in its new lane by the caller. Neither
// is set for a step that cannot move by rule (Hold says why) or a step in
// auto that keeps its lane (there is nothing above auto).
type Result struct {
	Move *Move
	Next *NextMove
	Hold string
}

// Move is a lane change the rules call for now.
//
// Numbers holds every number the rule used, so a LaneChange can record
// them: the figures ("weeks_in_lane", "rolling_4_n",
// "rolling_4_wilson_lower", "rolling_2_wilson_upper", …) and the thresholds
// they were compared with ("propose_min_weeks", "auto_lower", …).
type Move struct {
	From    ladder.Lane        `json:"from"`
	To      ladder.Lane        `json:"to"`
	Rule    string             `json:"rule"`
	Numbers map[string]float64 `json:"numbers"`
	// NewEpoch is set on every demotion: the caller must start a new epoch,
	// so that only reviews taken after it count toward promotion again.
	NewEpoch bool `json:"new_epoch"`
}

// NextMove is the promotion a step is working toward and how far it is from
// it: one Requirement per condition of the rule, keyed by the figure's name.
type NextMove struct {
	To    ladder.Lane                   `json:"to"`
	Rule  string                        `json:"rule"`
	Needs map[string]ladder.Requirement `json:"needs"`
}

// Evaluate applies the lane rules of DESIGN.md §4 with thresholds t to in.
//
// Demotions are checked before promotions and a step moves at most one lane
// per evaluation. From auto, in order: an adjudicated severity-1 audit
// failure on a class-A step; the rolling 2-week Wilson upper bound below
// AutoLower; the outcome test in FAIL. From propose: the rolling 2-week
// upper bound below ProposeLower. Promotions use the rolling 4-week lower
// bound (see the Rule constants). A pinned step and a human_only step never
// move by rule: only a person moves them.
func Evaluate(t ladder.Thresholds, in Input) Result {
	if in.Pinned {
		return Result{Hold: HoldPinned}
	}
	switch in.Lane {
	case ladder.LaneShadow:
		return promote(shadowToPropose(t, in), in)
	case ladder.LanePropose:
		if m := proposeDemotion(t, in); m != nil {
			return Result{Move: m}
		}
		return promote(proposeToAuto(t, in), in)
	case ladder.LaneAuto:
		if m := autoDemotion(t, in); m != nil {
			return Result{Move: m}
		}
		return Result{}
	}
	// human_only, and any lane the rules do not know: leave it to a person.
	return Result{Hold: HoldHumanOnly}
}

// promote turns a candidate promotion into a Move when every requirement is
// met, and into a NextMove otherwise.
func promote(c candidate, in Input) Result {
	for _, r := range c.next.Needs {
		if !r.Met {
			return Result{Next: &c.next}
		}
	}
	return Result{Move: &Move{From: in.Lane, To: c.next.To, Rule: c.next.Rule, Numbers: c.numbers}}
}

// candidate is a promotion rule evaluated: its requirements and the numbers
// a Move would record.
type candidate struct {
	next    NextMove
	numbers map[string]float64
}

// accuracyNeeds fills the requirements and numbers shared by both
// promotions: weeks in lane, rolling-4 n and rolling-4 Wilson lower bound.
func accuracyNeeds(c *candidate, in Input, minWeeks, minN int, lower float64) {
	weeks := in.WeeksInLane()
	r4 := in.Rolling4
	lo, _ := stats.Wilson(r4.Agreements, r4.N, stats.Z95)
	c.next.Needs["weeks_in_lane"] = ladder.Requirement{Have: float64(weeks), Need: float64(minWeeks), Met: weeks >= minWeeks}
	c.next.Needs["n"] = ladder.Requirement{Have: float64(r4.N), Need: float64(minN), Met: r4.N >= minN}
	c.next.Needs["wilson_lower"] = ladder.Requirement{Have: lo, Need: lower, Met: lo >= lower}
	c.numbers["weeks_in_lane"] = float64(weeks)
	c.numbers["rolling_4_n"] = float64(r4.N)
	c.numbers["rolling_4_agreements"] = float64(r4.Agreements)
	c.numbers["rolling_4_wilson_lower"] = lo
	c.numbers["z"] = stats.Z95
}

func newCandidate(to ladder.Lane, rule string) candidate {
	return candidate{
		next:    NextMove{To: to, Rule: rule, Needs: map[string]ladder.Requirement{}},
		numbers: map[string]float64{},
	}
}

// shadowToPropose: ≥ ProposeMinWeeks in shadow, rolling-4 n ≥ ProposeMinN,
// rolling-4 Wilson lower bound ≥ ProposeLower.
func shadowToPropose(t ladder.Thresholds, in Input) candidate {
	c := newCandidate(ladder.LanePropose, RuleShadowToPropose)
	accuracyNeeds(&c, in, t.ProposeMinWeeks, t.ProposeMinN, t.ProposeLower)
	c.numbers["propose_min_weeks"] = float64(t.ProposeMinWeeks)
	c.numbers["propose_min_n"] = float64(t.ProposeMinN)
	c.numbers["propose_lower"] = t.ProposeLower
	return c
}

// proposeToAuto: ≥ AutoMinWeeks in propose, rolling-4 n ≥ AutoMinN, lower
// bound ≥ AutoLower, agent error ≤ operator error, outcome test not FAIL,
// no severity-1 error in Sev1CleanWeeks.
func proposeToAuto(t ladder.Thresholds, in Input) candidate {
	c := newCandidate(ladder.LaneAuto, RuleProposeToAuto)
	accuracyNeeds(&c, in, t.AutoMinWeeks, t.AutoMinN, t.AutoLower)
	c.numbers["auto_min_weeks"] = float64(t.AutoMinWeeks)
	c.numbers["auto_min_n"] = float64(t.AutoMinN)
	c.numbers["auto_lower"] = t.AutoLower

	// Agent error against operator error. Without double-reviewed items
	// there is no operator error rate to compare with, and the condition is
	// unmet rather than waived: acting alone must be earned on evidence.
	var agentErr, opErr any
	met := false
	if acc, ok := in.Rolling4.Accuracy(); ok {
		agentErr = 1 - acc
		c.numbers["agent_error"] = 1 - acc
	}
	c.numbers["operator_n"] = float64(in.OperatorN)
	c.numbers["operator_errors"] = float64(in.OperatorErrors)
	if in.OperatorN > 0 {
		rate := float64(in.OperatorErrors) / float64(in.OperatorN)
		opErr = rate
		c.numbers["operator_error"] = rate
		if a, ok := agentErr.(float64); ok {
			met = a <= rate
		}
	}
	c.next.Needs["operator_n"] = ladder.Requirement{Have: float64(in.OperatorN), Need: float64(1), Met: in.OperatorN > 0}
	c.next.Needs["agent_error"] = ladder.Requirement{Have: agentErr, Need: opErr, Met: met}

	state := in.Outcome.State
	if state == "" {
		state = ladder.NINotStarted
	}
	c.next.Needs["outcome_test"] = ladder.Requirement{Have: string(state), Need: "not " + string(ladder.NIFail), Met: state != ladder.NIFail}
	if state != ladder.NINotStarted {
		c.numbers["outcome_p_value"] = in.Outcome.PValue
	}

	// Severity-1 errors: the step needs Sev1CleanWeeks clean weeks, counted
	// in days so the evidence pack can say how many remain.
	needDays := float64(t.Sev1CleanWeeks * 7)
	c.numbers["sev1_clean_weeks"] = float64(t.Sev1CleanWeeks)
	sev1 := ladder.Requirement{Need: needDays, Met: true}
	if !in.LastSev1At.IsZero() {
		since := in.Now.Sub(in.LastSev1At)
		days := float64(max(since, 0) / (24 * time.Hour))
		sev1.Have = days
		sev1.Met = since >= time.Duration(t.Sev1CleanWeeks)*Week
		c.numbers["days_since_severity_1"] = days
	}
	c.next.Needs["days_since_severity_1"] = sev1
	return c
}

// proposeDemotion: rolling-2 Wilson upper bound < ProposeLower.
func proposeDemotion(t ladder.Thresholds, in Input) *Move {
	if m := upperBoundDemotion(in, t.ProposeLower, "propose_lower"); m != nil {
		m.To, m.Rule = ladder.LaneShadow, RuleProposeToShadowUpperBound
		return m
	}
	return nil
}

// autoDemotion applies the three demotion rules of auto, in order.
func autoDemotion(t ladder.Thresholds, in Input) *Move {
	if in.Sev1AuditFailure && in.Class != ladder.ClassB {
		return &Move{
			From: ladder.LaneAuto, To: ladder.LanePropose, Rule: RuleAutoToProposeSev1Audit,
			Numbers: map[string]float64{"severity": 1}, NewEpoch: true,
		}
	}
	if m := upperBoundDemotion(in, t.AutoLower, "auto_lower"); m != nil {
		m.To, m.Rule = ladder.LanePropose, RuleAutoToProposeUpperBound
		return m
	}
	if in.Outcome.State == ladder.NIFail {
		o := in.Outcome
		return &Move{
			From: ladder.LaneAuto, To: ladder.LanePropose, Rule: RuleAutoToProposeOutcomeFail,
			Numbers: map[string]float64{
				"outcome_agent_n": float64(o.Agent.N), "outcome_agent_failures": float64(o.Agent.Failures),
				"outcome_person_n": float64(o.Person.N), "outcome_person_failures": float64(o.Person.Failures),
				"outcome_margin": o.Margin, "outcome_alpha": o.Alpha,
				"outcome_diff": o.Diff, "outcome_diff_lower": o.DiffLower, "outcome_p_value": o.PValue,
			},
			NewEpoch: true,
		}
	}
	return nil
}

// upperBoundDemotion returns a demotion (without To and Rule) when the
// rolling-2 Wilson upper bound is below threshold. With no reviews the
// upper bound is 1, so an idle step never demotes.
func upperBoundDemotion(in Input, threshold float64, name string) *Move {
	r2 := in.Rolling2
	_, hi := stats.Wilson(r2.Agreements, r2.N, stats.Z95)
	if hi >= threshold {
		return nil
	}
	return &Move{
		From: in.Lane,
		Numbers: map[string]float64{
			"rolling_2_n": float64(r2.N), "rolling_2_agreements": float64(r2.Agreements),
			"rolling_2_wilson_upper": hi, "z": stats.Z95, name: threshold,
		},
		NewEpoch: true,
	}
}

// Package demo makes the history `ladder demo` starts with: fourteen weeks
// of synthetic reviews for every step of the demo config, drawn from a
// per-step true accuracy and weekly volume and run through the real lane
// rules week by week, so the figures a person reads agree with the lanes.
package demo

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/rules"
	"github.com/ladderhq/ladder/service"
)

// Weeks is how many weeks of history the demo seeds.
const Weeks = 14

// Profile is how a step's agent behaves in the synthetic history.
type Profile struct {
	Accuracy     float64 // true probability that a review agrees
	OperatorErr  float64 // true operator error rate of double-reviewed items
	AgentFailure float64 // downstream failure rate of agent-handled items
	PersonFail   float64 // downstream failure rate of person-handled items
}

// profiles are the demo steps' true behaviour. The lanes they reach under
// the default rules are the lanes seed 000 shows.
var profiles = map[string]Profile{
	"read_bill":          {Accuracy: 0.992, OperatorErr: 0.03, AgentFailure: 0.01, PersonFail: 0.015},
	"match_load":         {Accuracy: 0.94, OperatorErr: 0.03},
	"rate_check":         {Accuracy: 0.985, OperatorErr: 0.02},
	"check_accessorials": {Accuracy: 0.86, OperatorErr: 0.03},
	"decide_hold":        {Accuracy: 0.93, OperatorErr: 0.02},
	"post_tms":           {Accuracy: 0.997, OperatorErr: 0.02, AgentFailure: 0.008, PersonFail: 0.012},
	"capture_eta":        {Accuracy: 0.99, OperatorErr: 0.04, AgentFailure: 0.01, PersonFail: 0.02},
	"call_driver":        {Accuracy: 0.93, OperatorErr: 0.03},
	"flag_late":          {Accuracy: 0.85, OperatorErr: 0.03},
	"update_customer":    {Accuracy: 0.935, OperatorErr: 0.03},
	"invest_decision":    {Accuracy: 0.985, OperatorErr: 0.05},
	"valuation":          {Accuracy: 0.80, OperatorErr: 0.05},
}

// Progress reports seeding progress: done of total steps.
type Progress func(done, total int, step string)

// Seed simulates Weeks weeks of history ending in now's week for every step
// of the service's workspaces and loads it with one ImportHistory call. Each
// step climbs from shadow under the real rules, capped at the lane the
// config starts it in; steps that start human_only get no history.
func Seed(ctx context.Context, svc *service.Service, now time.Time, progress Progress) error {
	now = now.UTC().Truncate(time.Microsecond)
	_, thisWeek := ladder.ISOWeek(now)
	first := thisWeek.AddDate(0, 0, -7*(Weeks-1))
	var h ladder.History
	var all []ladder.Step
	var wsOf []string
	for _, wid := range svc.WorkspaceIDs() {
		for _, st := range svc.Steps(wid, "") {
			all = append(all, st)
			wsOf = append(wsOf, wid)
		}
	}
	for i, st := range all {
		if err := ctx.Err(); err != nil {
			return err
		}
		seedStep(svc, wsOf[i], st, first, now, &h)
		if progress != nil {
			progress(i+1, len(all), st.Name)
		}
	}
	e, err := ladder.NewAuditEntry("*", "system", "demo.seed", "demo", now, map[string]any{
		"weeks": Weeks, "steps": len(all), "week_rows": len(h.Weeks), "lane_changes": len(h.LaneChanges), "reviews": len(h.Reviews), "outcomes": len(h.Outcomes),
	})
	if err != nil {
		return err
	}
	h.Audit = append(h.Audit, e)
	if err := svc.ImportHistory(ctx, h); err != nil {
		return fmt.Errorf("import demo history: %w", err)
	}
	return nil
}

func rank(l ladder.Lane) int { return slices.Index(ladder.Lanes, l) }

// seedStep simulates one step and appends its history to h.
func seedStep(svc *service.Service, wid string, st ladder.Step, first, now time.Time, h *ladder.History) {
	target := st.StartLane
	state := ladder.StepState{Workspace: wid, Queue: st.Queue, Step: st.ID, Lane: ladder.LaneShadow, LaneSince: first}
	th := svc.Thresholds(wid, st)
	vol := float64(st.WeeklyVolume)
	if vol <= 0 {
		vol = 100
	}
	state.AuditRate = st.AuditRate
	if state.AuditRate == 0 {
		state.AuditRate = rules.InitialAuditRate(st.Class, th.AutoLower, vol)
	}
	p, ok := profiles[st.ID]
	if target == ladder.LaneHumanOnly || !ok {
		// Nobody measured the agent here: the step keeps its starting lane.
		state.Lane, state.LaneSince, state.AuditRateSince = target, now, now
		h.States = append(h.States, state)
		return
	}
	rng := rand.New(rand.NewPCG(7919, hash(wid+"/"+st.ID)))
	key := ladder.StepKey{Workspace: wid, Queue: st.Queue, Step: st.ID}
	var weeks []ladder.WeekAgg
	var oc ladder.OutcomeCounts
	for w := 0; w < Weeks; w++ {
		start := first.AddDate(0, 0, 7*w)
		end := start.AddDate(0, 0, 7).Add(-time.Second)
		if end.After(now) {
			end = now
		}
		iso, _ := ladder.ISOWeek(start)
		agg := ladder.WeekAgg{Workspace: wid, Queue: st.Queue, Step: st.ID, ISOWeek: iso, WeekStart: start, Epoch: state.Epoch}
		n := int(vol)
		if state.Lane == ladder.LaneAuto {
			n = int(vol*state.AuditRate + 0.5)
		}
		kind := ladder.ReviewShadow
		switch state.Lane {
		case ladder.LaneAuto:
			kind = ladder.ReviewAudit
		case ladder.LanePropose:
			kind = ladder.ReviewApproval
		}
		for j := 0; j < n; j++ {
			agree := rng.Float64() < p.Accuracy
			agg.N++
			if agree {
				agg.Agreements++
			}
			if kind == ladder.ReviewAudit {
				agg.AuditN++
				if agree {
					agg.AuditAgree++
				}
			}
			at := start.Add(time.Duration(rng.Int64N(int64(end.Sub(start)) + 1)))
			if !agree || (kind == ladder.ReviewAudit && w >= Weeks-2) {
				addReview(h, key, kind, agree, at, rng)
			}
		}
		// One in ten person-handled items is reviewed twice; the second
		// reviewer finds the first wrong at the operator error rate.
		if state.Lane != ladder.LaneAuto {
			for j := 0; j < n/10; j++ {
				agg.OpN++
				if rng.Float64() < p.OperatorErr {
					agg.OpErrors++
				}
			}
		}
		if p.AgentFailure > 0 {
			agentN := 0
			if state.Lane == ladder.LaneAuto {
				agentN = n * 4
			}
			for j := 0; j < agentN; j++ {
				addOutcome(h, &oc, key, ladder.HandledByAgent, rng.Float64() >= p.AgentFailure, end)
			}
			for j := 0; j < int(vol)/4; j++ {
				addOutcome(h, &oc, key, ladder.HandledByPerson, rng.Float64() >= p.PersonFail, end)
			}
		}
		weeks = append(weeks, agg)
		res := rules.Evaluate(th, service.RuleInput(st, state, weeks, oc, end))
		if res.Move != nil && rank(res.Move.To) <= rank(target) {
			next, ch, _, err := svc.Move(state, res.Move, "demo history", end)
			if err == nil {
				ch.Actor = "rules (demo history)"
				state = next
				h.LaneChanges = append(h.LaneChanges, *ch)
			}
		}
	}
	if state.AuditRateSince.IsZero() {
		state.AuditRateSince = state.LaneSince
	}
	h.Weeks = append(h.Weeks, weeks...)
	h.States = append(h.States, state)
}

// addReview adds a reviewed item with its route, so recent disagreements
// and audits in the pack point at real rows.
func addReview(h *ladder.History, k ladder.StepKey, kind ladder.ReviewKind, agree bool, at time.Time, rng *rand.Rand) {
	item := fmt.Sprintf("%s-%06d", itemPrefix(k.Step), rng.IntN(1000000))
	lane := map[ladder.ReviewKind]ladder.Lane{ladder.ReviewAudit: ladder.LaneAuto, ladder.ReviewApproval: ladder.LanePropose, ladder.ReviewShadow: ladder.LaneShadow}[kind]
	rt := ladder.Route{ID: ladder.NewID("rt"), Workspace: k.Workspace, Queue: k.Queue, Step: k.Step, Item: item, Lane: lane, Decision: ladder.DecisionFor(lane), Audit: kind == ladder.ReviewAudit, Reason: "demo history", KeyID: "demo", At: at}
	rv := ladder.Review{ID: ladder.NewID("rv"), RouteID: rt.ID, Workspace: k.Workspace, Queue: k.Queue, Step: k.Step, Item: item, Kind: kind, Verdict: ladder.VerdictAgree, Reviewer: "demo", At: at}
	if !agree {
		rv.Verdict = ladder.VerdictDisagree
		rv.Severity = 2 + rng.IntN(2)
		rv.Note = "demo: the person corrected the agent's output"
	}
	h.Routes = append(h.Routes, rt)
	h.Reviews = append(h.Reviews, rv)
}

func addOutcome(h *ladder.History, oc *ladder.OutcomeCounts, k ladder.StepKey, by string, ok bool, at time.Time) {
	h.Outcomes = append(h.Outcomes, ladder.Outcome{ID: ladder.NewID("oc"), Workspace: k.Workspace, Queue: k.Queue, Step: k.Step, Item: "demo", HandledBy: by, OK: ok, At: at})
	if by == ladder.HandledByAgent {
		oc.AgentN++
		if !ok {
			oc.AgentFailures++
		}
	} else {
		oc.PersonN++
		if !ok {
			oc.PersonFailures++
		}
	}
}

func itemPrefix(step string) string {
	switch step {
	case "capture_eta", "call_driver", "flag_late", "update_customer":
		return "LOAD"
	case "invest_decision", "valuation":
		return "DEAL"
	}
	return "BILL"
}

func hash(s string) uint64 {
	var h uint64 = 14695981039346656037
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

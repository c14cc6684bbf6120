// Package demo makes the history `ladder demo` starts with: fourteen weeks
// of synthetic reviews, audits and outcomes for every step of the demo
// config, drawn from a per-step true accuracy and weekly volume and
// imported through the real import path, so every figure and lane change a
// person reads was made by the engine from raw reviews.
package demo

import (
	"bytes"
	"context"
	"encoding/json"
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
	"rate_check":         {Accuracy: 0.975, OperatorErr: 0.02},
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

// Progress reports seeding progress: done of total parts (a step's history
// drawn, or a workspace's history imported).
type Progress func(done, total int, part string)

// attempts bounds the draws of one step's history: a draw whose step does
// not end in the lane the config starts it in (or with a rule due, or with
// an audit rate other than a configured one) is drawn again.
const attempts = 64

// Seed draws Weeks weeks of history ending at now for every step of the
// service's workspaces and imports it through the real import path
// (Service.Import, which replays every row through ladder.RecordReviewTx),
// so every lane change in the demo is made by the engine, review by
// review. It runs on a database whose steps have no state yet: it stores
// each step's state as its history starts it (shadow, for a step with a
// history; the config's lane for the others, which get none).
func Seed(ctx context.Context, svc *service.Service, now time.Time, progress Progress) error {
	now = ladder.NormTime(now)
	_, thisWeek := ladder.ISOWeek(now)
	first := thisWeek.AddDate(0, 0, -7*(Weeks-1))
	p := ladder.Principal{KeyID: "demo", Kind: ladder.KeyAdmin}
	initial := map[ladder.StepKey]ladder.StepState{}
	for _, s := range svc.InitialStates() {
		initial[ladder.StepKey{Workspace: s.Workspace, Queue: s.Queue, Step: s.Step}] = s
	}
	type part struct {
		wid string
		st  ladder.Step
	}
	var parts []part
	for _, wid := range svc.WorkspaceIDs() {
		for _, st := range svc.Steps(wid, "") {
			parts = append(parts, part{wid, st})
		}
	}
	total := len(parts) + len(svc.WorkspaceIDs())
	var states []ladder.StepState
	rows := map[string][]ladder.ImportRow{}
	for i, pt := range parts {
		if err := ctx.Err(); err != nil {
			return err
		}
		state := initial[ladder.StepKey{Workspace: pt.wid, Queue: pt.st.Queue, Step: pt.st.ID}]
		prof, ok := profiles[pt.st.ID]
		if ok && pt.st.StartLane != ladder.LaneHumanOnly {
			state.Lane = ladder.LaneShadow // the history starts it there
			r, err := drawStep(svc, p, pt.wid, pt.st, prof, state, first, now)
			if err != nil {
				return fmt.Errorf("demo history of %s: %w", pt.st.ID, err)
			}
			rows[pt.wid] = append(rows[pt.wid], r...)
		}
		states = append(states, state)
		if progress != nil {
			progress(i+1, total, pt.st.Name)
		}
	}
	if err := svc.EnsureSteps(ctx, states); err != nil {
		return err
	}
	for i, wid := range svc.WorkspaceIDs() {
		if len(rows[wid]) > 0 {
			data, err := jsonLines(rows[wid])
			if err != nil {
				return err
			}
			p.Workspace = wid
			if _, err := svc.Import(ctx, p, ladder.ImportRequest{Workspace: wid, Format: ladder.ImportFormatJSONL, Data: data}); err != nil {
				return fmt.Errorf("import the demo history of %s: %w", wid, err)
			}
		}
		if progress != nil {
			progress(len(parts)+i+1, total, "import "+wid)
		}
	}
	return nil
}

// jsonLines writes rows as an import file.
func jsonLines(rows []ladder.ImportRow) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, r := range rows {
		if err := enc.Encode(r); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}

// drawStep draws one step's history, asking an in-memory replay of the
// import (service.Replay) the step's lane before each item, so an item is
// reviewed as the lane it arrives in says: compared in shadow, approved in
// propose, audited at the audit rate in auto. It draws again, with the
// next seed, until the history ends with the step in the config's lane
// and no rule due.
func drawStep(svc *service.Service, p ladder.Principal, wid string, st ladder.Step, prof Profile, start ladder.StepState, first, now time.Time) ([]ladder.ImportRow, error) {
	th := svc.Thresholds(wid, st)
	for a := uint64(0); a < attempts; a++ {
		rng := rand.New(rand.NewPCG(7919+a, hash(wid+"/"+st.ID)))
		rep := svc.NewReplay(p, wid, st, start)
		rows, err := draw(rep, st, prof, rng, first, now)
		if err != nil {
			return nil, err
		}
		end := rep.State()
		if end.Lane != st.StartLane || (st.AuditRate != 0 && end.Lane == ladder.LaneAuto && end.AuditRate != st.AuditRate) {
			continue
		}
		if res := rules.Evaluate(th, rep.RuleInput(now)); res.Move != nil {
			continue
		}
		return rows, nil
	}
	return nil, fmt.Errorf("no draw of %d ends in %s with no rule due; change the step's profile", attempts, st.StartLane)
}

// draw draws the rows of one history through rep.
func draw(rep *service.Replay, st ladder.Step, prof Profile, rng *rand.Rand, first, now time.Time) ([]ladder.ImportRow, error) {
	vol := st.WeeklyVolume
	if vol <= 0 {
		vol = 100
	}
	var rows []ladder.ImportRow
	add := func(r ladder.ImportRow, at time.Time) error {
		r.Time, r.At, r.Queue, r.Step = at, at.Format(time.RFC3339Nano), st.Queue, st.ID
		rows = append(rows, r)
		return rep.Row(r)
	}
	seq := 0
	for w := 0; w < Weeks; w++ {
		start := first.AddDate(0, 0, 7*w)
		end := start.AddDate(0, 0, 7).Add(-time.Second)
		if end.After(now) {
			end = now
		}
		// The week's items arrive at distinct times (a microsecond apart
		// at least), so every record of the step has its own time and a
		// replay orders them as the import did.
		times := make([]time.Time, vol)
		for j := range times {
			times[j] = ladder.NormTime(start.Add(time.Duration(rng.Int64N(int64(end.Sub(start)) + 1))))
		}
		slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
		for j := 1; j < len(times); j++ {
			if !times[j].After(times[j-1].Add(time.Microsecond)) {
				times[j] = times[j-1].Add(2 * time.Microsecond)
			}
		}
		// In auto a fixed share of the week's items is audited (the audit
		// rate the week starts with), so the figures show round counts.
		audited := map[int]bool{}
		k := int(float64(vol)*rep.State().AuditRate + 0.5)
		for _, j := range rng.Perm(vol)[:min(k, vol)] {
			audited[j] = true
		}
		for j, at := range times {
			seq++
			item := fmt.Sprintf("%s-%06d", itemPrefix(st.ID), seq)
			lane := rep.State().Lane
			row := ladder.ImportRow{Type: ladder.ImportReview, Item: item, Lane: string(lane), Reviewer: "demo", Verdict: string(ladder.VerdictAgree)}
			review := true
			switch lane {
			case ladder.LaneAuto:
				row.Type, row.Lane, review = ladder.ImportAudit, "", audited[j]
			case ladder.LaneShadow, ladder.LanePropose:
				// One in ten person-handled items is reviewed twice; the
				// second reviewer finds the first wrong at the operator
				// error rate.
				if rng.IntN(10) == 0 {
					e := rng.Float64() < prof.OperatorErr
					row.OperatorError = &e
				}
			default:
				review = false
			}
			if rng.Float64() >= prof.Accuracy {
				row.Verdict, row.Severity, row.Note = string(ladder.VerdictDisagree), 2+rng.IntN(2), "demo: the person corrected the agent's output"
			}
			if review {
				if err := add(row, at); err != nil {
					return nil, err
				}
			}
			if prof.AgentFailure > 0 {
				// Downstream results: of four in ten items the agent ran
				// alone, and of a quarter of all items a person handled.
				if lane == ladder.LaneAuto && rng.IntN(10) < 4 {
					ok := rng.Float64() >= prof.AgentFailure
					if err := add(ladder.ImportRow{Type: ladder.ImportOutcome, Item: item, HandledBy: ladder.HandledByAgent, OK: &ok}, at.Add(time.Microsecond)); err != nil {
						return nil, err
					}
				} else if rng.IntN(4) == 0 {
					ok := rng.Float64() >= prof.PersonFail
					if err := add(ladder.ImportRow{Type: ladder.ImportOutcome, Item: item, HandledBy: ladder.HandledByPerson, OK: &ok}, at.Add(time.Microsecond)); err != nil {
						return nil, err
					}
				}
			}
		}
	}
	return rows, nil
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

package service

import (
	"context"
	"time"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/rules"
)

// Backtest replays every step's recorded history since the given time under
// other rules (rulesFor returns a step's thresholds; nil means the rules in
// force) and returns, per step, the lane changes that happened beside the
// ones those rules would have made. The replay starts from the step's state
// at since (its lane, when it entered it, its epoch), evaluates the rules at
// the end of each week on the weekly figures up to then, replays the pins
// and unpins people made when they made them, and demotes on a severity-1
// audit failure in the week it was recorded (docs/rules.md, Backtest). The
// outcome test uses the step's outcome totals as they are now.
func (s *Service) Backtest(ctx context.Context, workspace string, since time.Time, rulesFor func(ladder.Step) ladder.Thresholds) ([]ladder.BacktestStep, error) {
	var out []ladder.BacktestStep
	for _, st := range s.Steps(workspace, "") {
		key := ladder.StepKey{Workspace: workspace, Queue: st.Queue, Step: st.ID}
		weeks, err := s.store.WeekAggs(ctx, key)
		if err != nil {
			return nil, storeErr("week aggregates", err)
		}
		changes, err := s.store.LaneChanges(ctx, key)
		if err != nil {
			return nil, storeErr("lane changes", err)
		}
		state, err := s.store.GetStepState(ctx, key)
		if err != nil {
			return nil, storeErr("step state", err)
		}
		oc, err := s.store.OutcomeCounts(ctx, key)
		if err != nil {
			return nil, storeErr("outcome counts", err)
		}
		dis, err := s.store.Reviews(ctx, ladder.ReviewQuery{Key: key, Disagreement: true})
		if err != nil {
			return nil, storeErr("reviews", err)
		}
		th := s.thresholdsFor(workspace, st)
		if rulesFor != nil {
			th = rulesFor(st)
		}
		h := stepHistory{weeks: weeks, changes: changes, sev1: sev1Errors(dis), oc: oc}
		out = append(out, backtestStep(st, workspace, state, h, since, s.now(), th))
	}
	return out, nil
}

// stepHistory is what a backtest replays of one step.
type stepHistory struct {
	weeks   []ladder.WeekAgg
	changes []ladder.LaneChange
	sev1    []ladder.Review // severity-1 disagreements, oldest first
	oc      ladder.OutcomeCounts
}

// sev1Errors returns the severity-1 disagreements of reviews (newest
// first, as the store lists them), oldest first.
func sev1Errors(reviews []ladder.Review) []ladder.Review {
	var out []ladder.Review
	for i := len(reviews) - 1; i >= 0; i-- {
		if reviews[i].Sev1() {
			out = append(out, reviews[i])
		}
	}
	return out
}

// byPerson reports whether a lane change was a person's (a pin or an
// unpin), which a replay repeats as it happened, rather than a rule's.
func byPerson(c ladder.LaneChange) bool {
	return c.Rule == rulePinned || c.Rule == ruleUnpinned
}

// backtestStep replays one step.
func backtestStep(st ladder.Step, workspace string, state ladder.StepState, h stepHistory, since, now time.Time, th ladder.Thresholds) ladder.BacktestStep {
	sortWeeks(h.weeks)
	bs := ladder.BacktestStep{Workspace: workspace, Queue: st.Queue, Step: st.ID, Name: st.Name, Actual: []ladder.BacktestMove{}, Simulated: []ladder.BacktestMove{}, EndActual: state.Lane}
	all := buildSeries(h.weeks, -1, now)
	weekOf := func(t time.Time) (int, string) {
		iso, start := ladder.ISOWeek(t)
		if all.first.IsZero() {
			return 0, iso
		}
		return weekIndex(all.first, start), iso
	}
	// The step's state at since: the lane of the last change before it (or
	// the first change's origin, or the lane now when nothing ever moved),
	// entered when that change was made (or when the step's records start),
	// in the promotion epoch the moves down before it started.
	sim := ladder.StepState{Workspace: workspace, Queue: st.Queue, Step: st.ID, Lane: state.Lane, LaneSince: all.first}
	if len(h.changes) > 0 {
		sim.Lane = h.changes[0].From
	}
	var pending []ladder.LaneChange // the people's changes still to replay
	for _, c := range h.changes {
		if c.At.Before(since) {
			sim = sim.Changed(c.To, c.At)
			sim.Pinned = c.Rule == rulePinned
			continue
		}
		w, iso := weekOf(c.At)
		bs.Actual = append(bs.Actual, ladder.BacktestMove{Week: w, ISOWeek: iso, At: c.At, From: c.From, To: c.To, Rule: c.Rule, Numbers: c.Numbers})
		if byPerson(c) {
			pending = append(pending, c)
		}
	}
	bs.StartLane = sim.Lane
	sev1 := h.sev1
	for i, row := range all.rows {
		end := row.WeekStart.AddDate(0, 0, 7).Add(-time.Second)
		if end.After(now) {
			end = now
		}
		// The severity-1 clock and audit failures of the week, each as
		// the live rules saw it when its review arrived.
		auditSev1 := false
		for len(sev1) > 0 && !sev1[0].At.After(end) {
			rv := sev1[0]
			sev1 = sev1[1:]
			if rv.At.Before(since) {
				sim.LastSev1At = rv.At
				continue
			}
			sim.LastSev1At = rv.At
			auditSev1 = auditSev1 || (rv.Kind == ladder.ReviewAudit && sim.Lane == ladder.LaneAuto)
		}
		if end.Before(since) {
			continue
		}
		// The people's pins and unpins of the week, when they were made.
		for len(pending) > 0 && !pending[0].At.After(end) {
			c := pending[0]
			pending = pending[1:]
			w, iso := weekOf(c.At)
			bs.Simulated = append(bs.Simulated, ladder.BacktestMove{Week: w, ISOWeek: iso, At: c.At, From: sim.Lane, To: c.To, Rule: c.Rule, Numbers: c.Numbers})
			sim = sim.Changed(c.To, c.At)
			sim.Pinned = c.Rule == rulePinned
		}
		in := RuleInput(st, sim, h.weeks[:weeksUpTo(h.weeks, end)], h.oc, end)
		in.Sev1AuditFailure = auditSev1
		res := rules.Evaluate(th, in)
		if res.Move == nil {
			continue
		}
		bs.Simulated = append(bs.Simulated, ladder.BacktestMove{Week: i + 1, ISOWeek: row.ISOWeek, At: end, From: res.Move.From, To: res.Move.To, Rule: res.Move.Rule, Numbers: roundNumbers(res.Move.Numbers)})
		sim = sim.Changed(res.Move.To, end)
	}
	bs.EndSim = sim.Lane
	return bs
}

// weeksUpTo returns how many of the sorted weeks start before end.
func weeksUpTo(weeks []ladder.WeekAgg, end time.Time) int {
	n := 0
	for n < len(weeks) && weeks[n].WeekStart.Before(end) {
		n++
	}
	return n
}

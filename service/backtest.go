package service

import (
	"context"
	"time"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/rules"
)

// Backtest replays every step's recorded weekly review figures since the
// given time under other rules (rulesFor returns a step's thresholds; nil
// means the rules in force) and returns, per step, the lane changes that
// happened beside the ones those rules would have made. It works on weekly
// aggregates, so a week is the unit of replay; the outcome test uses the
// step's outcome totals as they are now, and pins are not replayed.
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
		th := s.thresholdsFor(workspace, st)
		if rulesFor != nil {
			th = rulesFor(st)
		}
		out = append(out, backtestStep(st, workspace, state, weeks, changes, oc, since, s.now(), th))
	}
	return out, nil
}

// backtestStep replays one step.
func backtestStep(st ladder.Step, workspace string, state ladder.StepState, weeks []ladder.WeekAgg, changes []ladder.LaneChange, oc ladder.OutcomeCounts, since, now time.Time, th ladder.Thresholds) ladder.BacktestStep {
	sortWeeks(weeks)
	bs := ladder.BacktestStep{Workspace: workspace, Queue: st.Queue, Step: st.ID, Name: st.Name, Actual: []ladder.BacktestMove{}, Simulated: []ladder.BacktestMove{}, EndActual: state.Lane}
	all := buildSeries(weeks, -1, now)
	weekOf := func(t time.Time) (int, string) {
		iso, start := ladder.ISOWeek(t)
		if all.first.IsZero() {
			return 0, iso
		}
		return weekIndex(all.first, start), iso
	}
	// The lane at the start of the window: the last change before it, or the
	// first change's origin, or the lane now when nothing ever moved.
	lane := state.Lane
	if len(changes) > 0 {
		lane = changes[0].From
	}
	for _, c := range changes {
		if c.At.Before(since) {
			lane = c.To
			continue
		}
		w, iso := weekOf(c.At)
		bs.Actual = append(bs.Actual, ladder.BacktestMove{Week: w, ISOWeek: iso, At: c.At, From: c.From, To: c.To, Rule: c.Rule, Numbers: c.Numbers})
	}
	bs.StartLane = lane
	sim := ladder.StepState{Workspace: workspace, Queue: st.Queue, Step: st.ID, Lane: lane, LaneSince: since}
	var replayed []ladder.WeekAgg
	for i, row := range all.rows {
		end := row.WeekStart.AddDate(0, 0, 7).Add(-time.Second)
		if end.After(now) {
			end = now
		}
		if end.Before(since) {
			continue
		}
		row.Epoch = sim.Epoch
		replayed = append(replayed, row)
		res := rules.Evaluate(th, RuleInput(st, sim, replayed, oc, end))
		if res.Move == nil {
			continue
		}
		bs.Simulated = append(bs.Simulated, ladder.BacktestMove{Week: i + 1, ISOWeek: row.ISOWeek, At: end, From: res.Move.From, To: res.Move.To, Rule: res.Move.Rule, Numbers: roundNumbers(res.Move.Numbers)})
		sim.Lane, sim.LaneSince = res.Move.To, end
		if res.Move.NewEpoch {
			sim.Epoch++
		}
	}
	bs.EndSim = sim.Lane
	return bs
}

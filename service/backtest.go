package service

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/internal/memtx"
)

// Backtest replays every step's recorded history, review by review, and
// returns per step the lane changes that happened beside the ones the
// replay made (docs/rules.md, Backtest). The replay runs every recorded
// review (audits, approvals and adjudications among them), outcome, pin
// and unpin, in time order, through the review routine the live path and
// the import use (ladder.RecordReviewTx) over an in-memory transaction.
// Records before since are replayed under the rules in force, so the
// replay reaches since in the step's real state; from since on they are
// replayed under rulesFor's thresholds (nil: the rules in force). With the
// rules in force the simulated moves are the recorded ones.
func (s *Service) Backtest(ctx context.Context, workspace string, since time.Time, rulesFor func(ladder.Step) ladder.Thresholds) ([]ladder.BacktestStep, error) {
	var out []ladder.BacktestStep
	for _, st := range s.Steps(workspace, "") {
		key := ladder.StepKey{Workspace: workspace, Queue: st.Queue, Step: st.ID}
		var h stepHistory
		var err error
		if h.changes, err = s.store.LaneChanges(ctx, key); err != nil {
			return nil, storeErr("lane changes", err)
		}
		if h.state, err = s.store.GetStepState(ctx, key); err != nil {
			return nil, storeErr("step state", err)
		}
		if h.outcomes, err = s.store.Outcomes(ctx, key); err != nil {
			return nil, storeErr("outcomes", err)
		}
		if h.reviews, err = s.store.Reviews(ctx, ladder.ReviewQuery{Key: key}); err != nil {
			return nil, storeErr("reviews", err)
		}
		slices.Reverse(h.reviews) // oldest first, in the order they were stored
		inForce := s.thresholdsFor(workspace, st)
		th := inForce
		if rulesFor != nil {
			th = rulesFor(st)
		}
		bs, err := s.backtestStep(st, key, h, since, inForce, th)
		if err != nil {
			return nil, storeErr("replay", err)
		}
		out = append(out, bs)
	}
	return out, nil
}

// stepHistory is what a backtest replays of one step.
type stepHistory struct {
	state    ladder.StepState // as it is now
	changes  []ladder.LaneChange
	reviews  []ladder.Review // oldest first
	outcomes []ladder.Outcome
}

// byPerson reports whether a lane change was a person's (a pin or an
// unpin), which a replay repeats as it happened, rather than a rule's.
func byPerson(c ladder.LaneChange) bool {
	return c.Rule == rulePinned || c.Rule == ruleUnpinned
}

// event is one record a replay applies: a person's lane change, an
// outcome or a review. At equal times they apply in that order.
type event struct {
	at      time.Time
	order   int
	change  *ladder.LaneChange
	outcome *ladder.Outcome
	review  *ladder.Review
}

// backtestStep replays one step from its first record: in the lane its
// first lane change left (or its lane now, when it never moved), entered
// at its first record, at its starting audit rate.
func (s *Service) backtestStep(st ladder.Step, key ladder.StepKey, h stepHistory, since time.Time, inForce, th ladder.Thresholds) (ladder.BacktestStep, error) {
	bs := ladder.BacktestStep{Workspace: key.Workspace, Queue: st.Queue, Step: st.ID, Name: st.Name, Actual: []ladder.BacktestMove{}, Simulated: []ladder.BacktestMove{}, EndActual: h.state.Lane}
	var events []event
	for i := range h.changes {
		if byPerson(h.changes[i]) {
			events = append(events, event{at: h.changes[i].At, order: 0, change: &h.changes[i]})
		}
	}
	for i := range h.outcomes {
		events = append(events, event{at: h.outcomes[i].At, order: 1, outcome: &h.outcomes[i]})
	}
	for i := range h.reviews {
		events = append(events, event{at: h.reviews[i].At, order: 2, review: &h.reviews[i]})
	}
	slices.SortStableFunc(events, func(a, b event) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return cmp.Compare(a.order, b.order)
	})

	start := ladder.StepState{Workspace: key.Workspace, Queue: key.Queue, Step: key.Step, Lane: h.state.Lane, AuditRate: s.initialAuditRate(key.Workspace, st)}
	if len(h.changes) > 0 {
		start.Lane = h.changes[0].From
	}
	first := time.Time{}
	if len(events) > 0 {
		first = events[0].at
	}
	if len(h.changes) > 0 && (first.IsZero() || h.changes[0].At.Before(first)) {
		first = h.changes[0].At
	}
	start.LaneSince, start.AuditRateSince = first, first
	// A step pinned before its first record shows it by an unpin first.
	for _, c := range h.changes {
		if byPerson(c) {
			start.Pinned = c.Rule == ruleUnpinned
			break
		}
	}
	weekOf := func(t time.Time) (int, string) {
		iso, ws := ladder.ISOWeek(t)
		_, fs := ladder.ISOWeek(first)
		return weekIndex(fs, ws), iso
	}
	move := func(c ladder.LaneChange) ladder.BacktestMove {
		w, iso := weekOf(c.At)
		return ladder.BacktestMove{Week: w, ISOWeek: iso, At: c.At, From: c.From, To: c.To, Rule: c.Rule, Numbers: c.Numbers}
	}
	for _, c := range h.changes {
		if !c.At.Before(since) {
			bs.Actual = append(bs.Actual, move(c))
		}
	}

	tx := memtx.New(start)
	var oc ladder.OutcomeCounts
	bs.StartLane = start.Lane
	for _, e := range events {
		after := !e.at.Before(since)
		rules := inForce
		if after {
			rules = th
		}
		var change *ladder.LaneChange
		switch {
		case e.outcome != nil:
			oc.Count(*e.outcome)
			if err := tx.InsertOutcome(*e.outcome); err != nil {
				return bs, err
			}
		case e.change != nil:
			c := *e.change
			lw := ladder.LaneWrite{Key: key, Change: ladder.LaneChange{ID: c.ID, At: c.At, To: c.To, Rule: c.Rule, Numbers: c.Numbers, Actor: c.Actor, Reason: c.Reason},
				Pinned: c.Rule == rulePinned, Reason: c.Reason}
			if c.Rule == ruleUnpinned {
				lw.Change.To = "" // an unpin keeps the lane the replay is in
			}
			n := len(tx.LaneChanges(key))
			if _, err := ladder.SetLaneTx(tx, lw, c.At); err != nil {
				return bs, fmt.Errorf("%s at %s: %w", c.Rule, c.At, err)
			}
			if cs := tx.LaneChanges(key); len(cs) > n {
				change = &cs[n]
			}
		default:
			rv := *e.review
			tx.AddRoute(ladder.Route{ID: rv.RouteID, Workspace: rv.Workspace, Queue: rv.Queue, Step: rv.Step, Item: rv.Item})
			week, weekStart := ladder.ISOWeek(rv.At)
			var err error
			_, change, err = ladder.RecordReviewTx(tx, ladder.ReviewWrite{Review: rv, Week: week, WeekStart: weekStart,
				Decide: s.deciderWith(st, rules, oc, rv, rv.Reviewer)}, rv.At)
			if err != nil {
				return bs, fmt.Errorf("review %s: %w", rv.ID, err)
			}
		}
		if !after {
			bs.StartLane = tx.State(key).Lane // the lane at since
		} else if change != nil {
			bs.Simulated = append(bs.Simulated, move(*change))
		}
	}
	bs.EndSim = tx.State(key).Lane
	return bs, nil
}

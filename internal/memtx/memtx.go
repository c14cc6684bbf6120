// Package memtx is an in-memory ladder.ImportTx: the write transaction of a
// store as maps, with the stores' semantics, so the one review routine
// (ladder.RecordReviewTx) and the import can run without a database. The
// demo asks it for a step's lane while it draws the step's history, and a
// backtest replays a step's recorded reviews through it.
package memtx

import (
	"fmt"
	"sort"
	"time"

	"github.com/ladderhq/ladder"
)

// weekKey names one week row of one step.
type weekKey struct {
	week  string
	epoch int
}

// stored is a review as the stores keep it.
type stored struct {
	rv      ladder.Review
	week    string
	epoch   int
	counted bool
}

// step is what the transaction holds of one step.
type step struct {
	state   ladder.StepState
	weeks   map[weekKey]*ladder.WeekAgg
	sev1    []*stored            // counted or not; LastSev1 reads the counted ones
	byItem  map[string][]*stored // the step's reviews of each item, in insert order
	latest  time.Time            // the latest review or lane change
	has     bool
	oc      ladder.OutcomeCounts
	changes []ladder.LaneChange
	routes  map[string]bool // item and lane epoch of every route, for InsertRoute's conflict
}

// Tx is an in-memory transaction that never commits: what is written stays
// in it. It is not safe for concurrent use.
type Tx struct {
	steps   map[ladder.StepKey]*step
	routes  map[string]ladder.Route
	reviews map[string][]*stored // by route id
}

var _ ladder.ImportTx = (*Tx)(nil)

// New returns a transaction holding the given step states.
func New(states ...ladder.StepState) *Tx {
	t := &Tx{steps: map[ladder.StepKey]*step{}, routes: map[string]ladder.Route{}, reviews: map[string][]*stored{}}
	for _, s := range states {
		t.steps[keyOf(s)] = &step{state: s.Normalized(), weeks: map[weekKey]*ladder.WeekAgg{}, byItem: map[string][]*stored{}, routes: map[string]bool{}}
	}
	return t
}

func keyOf(s ladder.StepState) ladder.StepKey {
	return ladder.StepKey{Workspace: s.Workspace, Queue: s.Queue, Step: s.Step}
}

func (t *Tx) step(k ladder.StepKey) (*step, error) {
	s, ok := t.steps[k]
	if !ok {
		return nil, fmt.Errorf("step %s/%s/%s: %w", k.Workspace, k.Queue, k.Step, ladder.ErrNotFound)
	}
	return s, nil
}

// State returns the step's state (the zero state for an unknown step).
func (t *Tx) State(k ladder.StepKey) ladder.StepState {
	if s, ok := t.steps[k]; ok {
		return s.state
	}
	return ladder.StepState{}
}

// LaneChanges returns the step's lane changes, oldest first.
func (t *Tx) LaneChanges(k ladder.StepKey) []ladder.LaneChange {
	if s, ok := t.steps[k]; ok {
		return s.changes
	}
	return nil
}

// Outcomes returns the step's outcome counts.
func (t *Tx) Outcomes(k ladder.StepKey) ladder.OutcomeCounts {
	if s, ok := t.steps[k]; ok {
		return s.oc
	}
	return ladder.OutcomeCounts{}
}

// LockState implements ladder.LaneTx.
func (t *Tx) LockState(k ladder.StepKey) (ladder.StepState, error) {
	s, err := t.step(k)
	if err != nil {
		return ladder.StepState{}, err
	}
	return s.state, nil
}

// UpdateState implements ladder.LaneTx.
func (t *Tx) UpdateState(st ladder.StepState) error {
	s, err := t.step(keyOf(st))
	if err != nil {
		return err
	}
	s.state = st.Normalized()
	return nil
}

// InsertLaneChange implements ladder.LaneTx.
func (t *Tx) InsertLaneChange(c ladder.LaneChange) error {
	s, err := t.step(ladder.StepKey{Workspace: c.Workspace, Queue: c.Queue, Step: c.Step})
	if err != nil {
		return err
	}
	c.At = ladder.NormTime(c.At)
	s.changes = append(s.changes, c)
	s.touch(c.At)
	return nil
}

func (s *step) touch(at time.Time) {
	if !s.has || at.After(s.latest) {
		s.latest, s.has = at, true
	}
}

// AppendAudit implements ladder.LaneTx; the entries are dropped.
func (t *Tx) AppendAudit(...ladder.AuditEntry) error { return nil }

// StepChanged implements ladder.LaneTx; there are no subscribers.
func (t *Tx) StepChanged(ladder.StepKey) {}

// RouteOf implements ladder.ReviewTx.
func (t *Tx) RouteOf(id string) (ladder.Route, error) {
	r, ok := t.routes[id]
	if !ok {
		return ladder.Route{}, ladder.ErrNotFound
	}
	return r, nil
}

// Reviewed implements ladder.ReviewTx.
func (t *Tx) Reviewed(routeID string) (bool, error) {
	for _, s := range t.reviews[routeID] {
		if !s.rv.Adjudication {
			return true, nil
		}
	}
	return false, nil
}

// CountedReview implements ladder.ReviewTx.
func (t *Tx) CountedReview(routeID string) (ladder.CountedReview, bool, error) {
	for _, s := range t.reviews[routeID] {
		if s.counted {
			return ladder.CountedReview{Review: s.rv, Week: s.week, Epoch: s.epoch}, true, nil
		}
	}
	return ladder.CountedReview{}, false, nil
}

// Uncount implements ladder.ReviewTx.
func (t *Tx) Uncount(reviewID string) error {
	for _, list := range t.reviews {
		for _, s := range list {
			if s.rv.ID == reviewID {
				s.counted = false
			}
		}
	}
	return nil
}

// InsertReview implements ladder.ReviewTx.
func (t *Tx) InsertReview(rv ladder.Review, week string, epoch int) error {
	s, err := t.step(ladder.StepKey{Workspace: rv.Workspace, Queue: rv.Queue, Step: rv.Step})
	if err != nil {
		return err
	}
	rv.At = ladder.NormTime(rv.At)
	sr := &stored{rv: rv, week: week, epoch: epoch, counted: true}
	t.reviews[rv.RouteID] = append(t.reviews[rv.RouteID], sr)
	s.byItem[rv.Item] = append(s.byItem[rv.Item], sr)
	if rv.Sev1() {
		s.sev1 = append(s.sev1, sr)
	}
	s.touch(rv.At)
	return nil
}

// CloseShadow implements ladder.ReviewTx; there are no shadow proposals.
func (t *Tx) CloseShadow(string) error { return nil }

// AddToWeek implements ladder.ReviewTx.
func (t *Tx) AddToWeek(d ladder.WeekDelta) error {
	s, err := t.step(d.Key)
	if err != nil {
		return err
	}
	k := weekKey{d.Week, d.Epoch}
	row, ok := s.weeks[k]
	if !ok {
		if !d.Create {
			return nil
		}
		row = &ladder.WeekAgg{Workspace: d.Key.Workspace, Queue: d.Key.Queue, Step: d.Key.Step, ISOWeek: d.Week, WeekStart: d.WeekStart, Epoch: d.Epoch}
		s.weeks[k] = row
	}
	*row = row.Plus(d.Counts)
	return nil
}

// WeekAggs implements ladder.ReviewTx: oldest week first, then epoch.
func (t *Tx) WeekAggs(k ladder.StepKey) ([]ladder.WeekAgg, error) {
	s, err := t.step(k)
	if err != nil {
		return nil, err
	}
	out := make([]ladder.WeekAgg, 0, len(s.weeks))
	for _, row := range s.weeks {
		out = append(out, *row)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].ISOWeek != out[j].ISOWeek {
			return out[i].ISOWeek < out[j].ISOWeek
		}
		return out[i].Epoch < out[j].Epoch
	})
	return out, nil
}

// LastSev1 implements ladder.ReviewTx.
func (t *Tx) LastSev1(k ladder.StepKey) (time.Time, error) {
	s, err := t.step(k)
	if err != nil {
		return time.Time{}, err
	}
	var last time.Time
	for _, r := range s.sev1 {
		if r.counted && r.rv.At.After(last) {
			last = r.rv.At
		}
	}
	return last, nil
}

// InsertRoute implements ladder.ImportTx: a second route of the step's
// item in the same lane epoch is ErrConflict, as in the stores.
func (t *Tx) InsertRoute(r ladder.Route) error {
	s, err := t.step(ladder.StepKey{Workspace: r.Workspace, Queue: r.Queue, Step: r.Step})
	if err != nil {
		return err
	}
	k := fmt.Sprintf("%s\x00%d", r.Item, r.LaneEpoch)
	if s.routes[k] {
		return fmt.Errorf("route of %q: %w", r.Item, ladder.ErrConflict)
	}
	s.routes[k] = true
	r.At = ladder.NormTime(r.At)
	t.routes[r.ID] = r
	return nil
}

// AddRoute stores a route as it was recorded (a backtest replays reviews
// of routes the store holds), without the conflict check.
func (t *Tx) AddRoute(r ladder.Route) { t.routes[r.ID] = r }

// InsertOutcome implements ladder.ImportTx.
func (t *Tx) InsertOutcome(o ladder.Outcome) error {
	s, err := t.step(ladder.StepKey{Workspace: o.Workspace, Queue: o.Queue, Step: o.Step})
	if err != nil {
		return err
	}
	s.oc.Count(o)
	return nil
}

// ReviewedRoute implements ladder.ImportTx: the route of the item's latest
// review at the step (by time, then id, as the stores order them).
func (t *Tx) ReviewedRoute(k ladder.StepKey, item string) (string, bool, error) {
	s, err := t.step(k)
	if err != nil {
		return "", false, err
	}
	var best *stored
	for _, r := range s.byItem[item] {
		if best == nil || r.rv.At.After(best.rv.At) || (r.rv.At.Equal(best.rv.At) && r.rv.ID > best.rv.ID) {
			best = r
		}
	}
	if best == nil {
		return "", false, nil
	}
	return best.rv.RouteID, true, nil
}

// StepRecord implements ladder.ImportTx.
func (t *Tx) StepRecord(k ladder.StepKey) (ladder.StepRecord, error) {
	s, err := t.step(k)
	if err != nil {
		return ladder.StepRecord{}, err
	}
	return ladder.StepRecord{Latest: s.latest, Has: s.has, Outcomes: s.oc}, nil
}

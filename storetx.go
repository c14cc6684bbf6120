package ladder

import (
	"errors"
	"fmt"
	"time"
)

// The write routines below are the rules of review recording and lane
// writes, written once. Each store implements the small interfaces they
// drive with its SQL and nothing more, and calls the routine inside its
// write transaction (DESIGN.md §9: stores hold SQL only).

// LaneTx is what SetLaneTx needs of a store's write transaction.
type LaneTx interface {
	// LockState returns the step's state, held against other writers of
	// the step until the transaction commits, or an error wrapping
	// ErrNotFound.
	LockState(k StepKey) (StepState, error)
	// UpdateState stores st over its step's state.
	UpdateState(st StepState) error
	// InsertLaneChange stores a lane change.
	InsertLaneChange(c LaneChange) error
	// AppendAudit appends entries in the transaction.
	AppendAudit(entries ...AuditEntry) error
	// StepChanged tells subscribers, once the transaction commits, that
	// the step's state moved. A store without subscribers does nothing.
	StepChanged(k StepKey)
}

// ReviewTx is what RecordReviewTx needs of a store's write transaction.
type ReviewTx interface {
	LaneTx
	// RouteOf returns the route with that id (its workspace, queue, step
	// and item at least), or an error wrapping ErrNotFound.
	RouteOf(id string) (Route, error)
	// Reviewed reports whether the route has a review that is not an
	// adjudication.
	Reviewed(routeID string) (bool, error)
	// CountedReview returns the route's review counted in the aggregates
	// so far, if any.
	CountedReview(routeID string) (CountedReview, bool, error)
	// Uncount marks the review with that id no longer counted.
	Uncount(reviewID string) error
	// InsertReview stores rv, counted, in week and epoch.
	InsertReview(rv Review, week string, epoch int) error
	// CloseShadow marks the route's shadow proposals reviewed, so they no
	// longer count against their key's cap.
	CloseShadow(routeID string) error
	// AddToWeek adds d's signed counts to its week row; it creates the row
	// only when d.Create is set.
	AddToWeek(d WeekDelta) error
	// WeekAggs returns the step's weekly aggregates, as
	// LadderStore.WeekAggs does, inside the transaction.
	WeekAggs(k StepKey) ([]WeekAgg, error)
	// LastSev1 returns the time of the step's latest counted severity-1
	// disagreement, or the zero time when none is counted.
	LastSev1(k StepKey) (time.Time, error)
}

// CountedReview is a stored review as counted in a week row: the fields
// its counts come from, and the row it was added to.
type CountedReview struct {
	Review Review // ID, Workspace, Queue, Step, Kind, Verdict, Severity, OperatorError
	Week   string
	Epoch  int
}

// WeekDelta is one change to one week row of one step and epoch.
type WeekDelta struct {
	Key       StepKey
	Week      string
	WeekStart time.Time // zero when the delta cannot create the row
	Epoch     int
	Counts    WeekAgg // signed: a subtraction holds negative counts
	// Create says the row is made when missing. Only a count creates it:
	// taking a review back out of a row that is not there has nothing to
	// correct.
	Create bool
}

// Plus returns a with c's counts added (a's key, week and epoch stay).
// Pooling weeks into a window and applying a signed delta are both this.
func (a WeekAgg) Plus(c WeekAgg) WeekAgg {
	a.N, a.Agreements, a.AuditN, a.AuditAgree = a.N+c.N, a.Agreements+c.Agreements, a.AuditN+c.AuditN, a.AuditAgree+c.AuditAgree
	a.Sev1, a.OpN, a.OpErrors = a.Sev1+c.Sev1, a.OpN+c.OpN, a.OpErrors+c.OpErrors
	return a
}

// Neg returns the counts of a with every count negated.
func (a WeekAgg) Neg() WeekAgg {
	a.N, a.Agreements, a.AuditN, a.AuditAgree = -a.N, -a.Agreements, -a.AuditN, -a.AuditAgree
	a.Sev1, a.OpN, a.OpErrors = -a.Sev1, -a.OpN, -a.OpErrors
	return a
}

// CountDelta is what recording rv adds: its counts, in the step's current
// promotion epoch, to the row of the week it counts in.
func CountDelta(rv Review, week string, weekStart time.Time, epoch int) WeekDelta {
	return WeekDelta{
		Key:  StepKey{Workspace: rv.Workspace, Queue: rv.Queue, Step: rv.Step},
		Week: week, WeekStart: NormTime(weekStart), Epoch: epoch,
		Counts: rv.Counts(), Create: true,
	}
}

// UncountDelta is what an adjudication takes away: the counts of the
// review it replaces, from the row (week and epoch) they were added to, so
// n counts the item once.
func UncountDelta(c CountedReview) WeekDelta {
	return WeekDelta{
		Key:  StepKey{Workspace: c.Review.Workspace, Queue: c.Review.Queue, Step: c.Review.Step},
		Week: c.Week, Epoch: c.Epoch,
		Counts: c.Review.Counts().Neg(),
	}
}

// Normalized returns s with every time as stores keep it (NormTime), so
// the state returned and the state stored are the same on every backend.
func (s StepState) Normalized() StepState {
	s.LaneSince, s.LastSev1At = NormTime(s.LaneSince), NormTime(s.LastSev1At)
	s.LastAuditFailAt, s.AuditRateSince = NormTime(s.LastAuditFailAt), NormTime(s.AuditRateSince)
	return s
}

// Moved reports whether subscribers must hear of a review's new state next
// after prev: the lane, the pin, the promotion epoch or the audit rate
// changed (the figures alone move on every review).
func (s StepState) Moved(prev StepState) bool {
	return s.Lane != prev.Lane || s.Pinned != prev.Pinned || s.Epoch != prev.Epoch || s.AuditRate != prev.AuditRate
}

// Resolve returns w with its defaults filled (see Resolved). A store calls
// it before its transaction, so a transaction run again keeps the ids.
func (w ReviewWrite) Resolve(now time.Time) ReviewWrite {
	w.Review, w.Week, w.WeekStart = w.Resolved(now)
	return w
}

// RecordReviewTx records a review in a store's write transaction: the
// route must exist in the review's workspace (else ErrNotFound) and gives
// the review its queue, step and item; a second review of a route that is
// not an adjudication is ErrConflict; an adjudication first takes the
// verdict counted so far out of its row. The review is stored and added to
// its week's row in the step's current epoch, the decider runs on the new
// figures, and its state, lane change and audit are stored. now fills the
// write's and the lane change's defaults.
func RecordReviewTx(tx ReviewTx, rw ReviewWrite, now time.Time) (StepState, *LaneChange, error) {
	rv, week, weekStart := rw.Resolved(now)
	route, err := tx.RouteOf(rv.RouteID)
	if errors.Is(err, ErrNotFound) || (err == nil && route.Workspace != rv.Workspace) {
		return StepState{}, nil, fmt.Errorf("route: %w", ErrNotFound)
	}
	if err != nil {
		return StepState{}, nil, fmt.Errorf("route: %w", err)
	}
	rv.Queue, rv.Step, rv.Item = route.Queue, route.Step, route.Item
	key := StepKey{Workspace: rv.Workspace, Queue: rv.Queue, Step: rv.Step}
	state, err := tx.LockState(key)
	if err != nil {
		return StepState{}, nil, err
	}

	if !rv.Adjudication {
		reviewed, err := tx.Reviewed(rv.RouteID)
		if err != nil {
			return StepState{}, nil, fmt.Errorf("earlier review: %w", err)
		}
		if reviewed {
			return StepState{}, nil, fmt.Errorf("route %s was reviewed already: %w", rv.RouteID, ErrConflict)
		}
	} else {
		earlier, ok, err := uncountEarlier(tx, rv.RouteID)
		if err != nil {
			return StepState{}, nil, fmt.Errorf("replace earlier review: %w", err)
		}
		// An adjudication replaces the verdict it overrules in every rule
		// (DESIGN.md §4): an overruled severity-1 disagreement no longer
		// holds the step's severity-1 clock, which falls back to the
		// latest one still counted.
		if ok && earlier.Review.Sev1() {
			if state.LastSev1At, err = tx.LastSev1(key); err != nil {
				return StepState{}, nil, fmt.Errorf("last severity-1 error: %w", err)
			}
		}
	}

	if err := tx.InsertReview(rv, week, state.Epoch); err != nil {
		return StepState{}, nil, fmt.Errorf("insert review: %w", err)
	}
	// The route is reviewed: its shadow proposals leave their key's cap.
	if err := tx.CloseShadow(rv.RouteID); err != nil {
		return StepState{}, nil, fmt.Errorf("close shadow: %w", err)
	}
	if err := tx.AddToWeek(CountDelta(rv, week, weekStart, state.Epoch)); err != nil {
		return StepState{}, nil, fmt.Errorf("count review: %w", err)
	}

	next, change, entries := state, (*LaneChange)(nil), []AuditEntry(nil)
	if rw.Decide != nil {
		weeks, err := tx.WeekAggs(key)
		if err != nil {
			return StepState{}, nil, fmt.Errorf("week aggregates: %w", err)
		}
		next, change, entries, err = rw.Decide(state, weeks)
		if err != nil {
			return StepState{}, nil, fmt.Errorf("decide: %w", err)
		}
	}
	// The key is the step's, whatever the decider returned; the version
	// moves on every review, since the figures behind the state moved.
	next.Workspace, next.Queue, next.Step = key.Workspace, key.Queue, key.Step
	next.Version = state.Version + 1
	next = next.Normalized()
	if err := tx.UpdateState(next); err != nil {
		return StepState{}, nil, fmt.Errorf("update state: %w", err)
	}
	if change != nil {
		c := change.For(key, state.Lane, now)
		if err := tx.InsertLaneChange(c); err != nil {
			return StepState{}, nil, fmt.Errorf("insert lane change: %w", err)
		}
		change = &c
	}
	if next.Moved(state) {
		tx.StepChanged(key)
	}
	if err := tx.AppendAudit(append([]AuditEntry{rw.Audit}, entries...)...); err != nil {
		return StepState{}, nil, err
	}
	return next, change, nil
}

// uncountEarlier takes the route's review counted so far, if any, out of
// its week row, for an adjudication to replace it, and returns it.
func uncountEarlier(tx ReviewTx, routeID string) (CountedReview, bool, error) {
	c, ok, err := tx.CountedReview(routeID)
	if err != nil || !ok {
		return c, false, err // without one, the adjudication is the first verdict
	}
	if err := tx.AddToWeek(UncountDelta(c)); err != nil {
		return c, false, err
	}
	return c, true, tx.Uncount(c.Review.ID)
}

// LaneMove is what a lane write does to a step in state cur: its next
// state and, when the lane moves or the pin is set or cleared, the lane
// change to record.
func LaneMove(cur StepState, lw LaneWrite, now time.Time) (StepState, *LaneChange, error) {
	if lw.IfVersion != 0 && cur.Version != lw.IfVersion {
		return StepState{}, nil, fmt.Errorf("step state is version %d, not %d: %w", cur.Version, lw.IfVersion, ErrConflict)
	}
	to := lw.Change.To
	if to == "" {
		to = cur.Lane
	}
	if !to.Valid() {
		return StepState{}, nil, fmt.Errorf("invalid lane %q", to)
	}
	next := cur
	next.Pinned, next.PinReason = lw.Pinned, lw.Reason
	next.Version = cur.Version + 1
	// A move, a pin and an unpin are each a lane change a person reads in
	// the pack, even when the lane itself stays.
	if to == cur.Lane && lw.Pinned == cur.Pinned {
		return next.Normalized(), nil, nil
	}
	c := lw.Change.For(lw.Key, cur.Lane, now)
	c.To = to
	return next.Changed(to, c.At).Normalized(), &c, nil
}

// SetLaneTx applies a lane write in a store's write transaction (see
// LaneMove): the step's state is locked, moved and stored, the lane change
// recorded, subscribers told and lw.Audit appended. With IfVersion set, a
// state whose version differs is ErrConflict.
func SetLaneTx(tx LaneTx, lw LaneWrite, now time.Time) (StepState, error) {
	cur, err := tx.LockState(lw.Key)
	if err != nil {
		return StepState{}, err
	}
	next, change, err := LaneMove(cur, lw, now)
	if err != nil {
		return StepState{}, err
	}
	if change != nil {
		if err := tx.InsertLaneChange(*change); err != nil {
			return StepState{}, fmt.Errorf("insert lane change: %w", err)
		}
	}
	if err := tx.UpdateState(next); err != nil {
		return StepState{}, fmt.Errorf("update state: %w", err)
	}
	tx.StepChanged(lw.Key)
	if err := tx.AppendAudit(lw.Audit...); err != nil {
		return StepState{}, err
	}
	return next, nil
}

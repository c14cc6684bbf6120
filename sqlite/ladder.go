package sqlite

import (
	"time"

	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/ladderhq/ladder"
)

const stateColumns = "workspace, queue, step, lane, lane_since, epoch, pinned, pin_reason, audit_rate, last_sev1_at, last_audit_fail_at, audit_rate_since, version, lane_epoch"

// EnsureSteps inserts the state of every step that has none yet. Existing
// states are kept. A new state starts at version 1, so IfVersion checks
// always have a non-zero version to compare.
func (s *Store) EnsureSteps(ctx context.Context, states []ladder.StepState) error {
	err := s.write(ctx, func(w *wtx) error {
		for _, st := range states {
			st = st.Initial()
			if err := w.putState(st, `ON CONFLICT DO NOTHING`); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("ensure steps: %w", err)
	}
	return nil
}

// putState inserts st; onConflict says what to do when the step has a state.
func (w *wtx) putState(st ladder.StepState, onConflict string) error {
	if !st.Lane.Valid() {
		return fmt.Errorf("step %s/%s/%s: invalid lane %q", st.Workspace, st.Queue, st.Step, st.Lane)
	}
	_, err := w.exec(`INSERT INTO step_states (`+stateColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) `+onConflict,
		st.Workspace, st.Queue, st.Step, string(st.Lane), fmtTime(st.LaneSince), st.Epoch, boolInt(st.Pinned),
		st.PinReason, st.AuditRate, fmtTime(st.LastSev1At), fmtTime(st.LastAuditFailAt), fmtTime(st.AuditRateSince), st.Version, st.LaneEpoch)
	return err
}

// updateState stores st over the step's state.
func (w *wtx) updateState(st ladder.StepState) error {
	if !st.Lane.Valid() {
		return fmt.Errorf("step %s/%s/%s: invalid lane %q", st.Workspace, st.Queue, st.Step, st.Lane)
	}
	_, err := w.exec(`UPDATE step_states SET lane = ?, lane_since = ?, epoch = ?, pinned = ?, pin_reason = ?,
		audit_rate = ?, last_sev1_at = ?, last_audit_fail_at = ?, audit_rate_since = ?, version = ?, lane_epoch = ?
		WHERE workspace = ? AND queue = ? AND step = ?`,
		string(st.Lane), fmtTime(st.LaneSince), st.Epoch, boolInt(st.Pinned), st.PinReason, st.AuditRate,
		fmtTime(st.LastSev1At), fmtTime(st.LastAuditFailAt), fmtTime(st.AuditRateSince), st.Version, st.LaneEpoch, st.Workspace, st.Queue, st.Step)
	return err
}

func (w *wtx) getState(k ladder.StepKey) (ladder.StepState, error) {
	st, err := scanState(w.queryRow(`SELECT `+stateColumns+` FROM step_states WHERE workspace = ? AND queue = ? AND step = ?`,
		k.Workspace, k.Queue, k.Step))
	if errors.Is(err, sql.ErrNoRows) {
		return ladder.StepState{}, fmt.Errorf("step state %s/%s: %w", k.Queue, k.Step, ladder.ErrNotFound)
	}
	return st, err
}

// GetStepState returns one step's state, or ErrNotFound.
func (s *Store) GetStepState(ctx context.Context, k ladder.StepKey) (ladder.StepState, error) {
	st, err := scanState(s.readRow(ctx, `SELECT `+stateColumns+` FROM step_states
		WHERE workspace = ? AND queue = ? AND step = ?`, k.Workspace, k.Queue, k.Step))
	if err != nil {
		return ladder.StepState{}, fmt.Errorf("get step state: %w", s.readErr(err))
	}
	return st, nil
}

// ListStepStates returns the states of a workspace's steps in the order
// they were first stored (the config's order, when EnsureSteps stored them).
func (s *Store) ListStepStates(ctx context.Context, workspace string) ([]ladder.StepState, error) {
	rows, err := s.readers.QueryContext(ctx, `SELECT `+stateColumns+` FROM step_states WHERE workspace = ? ORDER BY rowid`, workspace)
	if err != nil {
		return nil, fmt.Errorf("list step states: %w", s.mapErr(err))
	}
	out, err := collect(rows, scanState)
	if err != nil {
		return nil, fmt.Errorf("list step states: %w", s.mapErr(err))
	}
	return out, nil
}

func scanState(r scanner) (ladder.StepState, error) {
	var (
		st                                       ladder.StepState
		lane, since, lastSev1, lastAF, rateSince string
		pinned                                   int
		err                                      error
	)
	if err := r.Scan(&st.Workspace, &st.Queue, &st.Step, &lane, &since, &st.Epoch, &pinned, &st.PinReason,
		&st.AuditRate, &lastSev1, &lastAF, &rateSince, &st.Version, &st.LaneEpoch); err != nil {
		return ladder.StepState{}, err
	}
	st.Lane, st.Pinned = ladder.Lane(lane), pinned != 0
	if st.LaneSince, err = parseTime(since); err != nil {
		return ladder.StepState{}, err
	}
	if st.LastSev1At, err = parseTime(lastSev1); err != nil {
		return ladder.StepState{}, err
	}
	if st.LastAuditFailAt, err = parseTime(lastAF); err != nil {
		return ladder.StepState{}, err
	}
	if st.AuditRateSince, err = parseTime(rateSince); err != nil {
		return ladder.StepState{}, err
	}
	return st, nil
}

const routeColumns = "id, workspace, queue, step, item, decision, lane, audit, audit_rate, reason, features, key_id, at, lane_epoch"

// RecordRoute stores r unless a route for the same workspace, queue, step,
// item and lane epoch exists; either way it returns the stored route and
// whether it was created now. The audit entry is appended only when the
// route is created. Writes are serialized by the one writer, so concurrent
// calls for one item all see the first one's route, and a route decided
// under a lane epoch that a lane change has since ended is not stored
// (ErrLaneChanged).
func (s *Store) RecordRoute(ctx context.Context, r ladder.Route, audit ladder.AuditEntry) (ladder.Route, bool, error) {
	r = r.Resolved(s.now())
	ready, err := s.readyAudit([]ladder.AuditEntry{audit})
	if err != nil {
		return ladder.Route{}, false, fmt.Errorf("record route: %w", err)
	}
	var (
		got     ladder.Route
		created bool
	)
	err = s.write(ctx, func(w *wtx) error { return w.recordRoute(r, ready, &got, &created) })
	if err != nil {
		return ladder.Route{}, false, fmt.Errorf("record route: %w", err)
	}
	got.StateAuditRate = 0 // not stored: the route as stored
	return got, created, nil
}

// recordRoute is RecordRoute's op (and RouteAndBeginCall's first part),
// with its audit entry made ready.
func (w *wtx) recordRoute(r ladder.Route, ready []readyEntry, got *ladder.Route, created *bool) error {
	// Insert first, and only while the step is still in the route's
	// lane epoch; look further only when nothing was inserted: a fresh
	// route (the common case) costs one statement, not two.
	res, err := w.exec(`INSERT INTO routes (`+routeColumns+`)
		SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?
		WHERE COALESCE((SELECT lane_epoch = ? AND audit_rate = ? FROM step_states WHERE workspace = ? AND queue = ? AND step = ?), 1)
		ON CONFLICT (workspace, queue, step, item, lane_epoch) DO NOTHING`,
		r.ID, r.Workspace, r.Queue, r.Step, r.Item, string(r.Decision), string(r.Lane), boolInt(r.Audit),
		r.AuditRate, r.Reason, nullBytes(r.Features), r.KeyID, fmtTime(r.At), r.LaneEpoch,
		r.LaneEpoch, r.StateAuditRate, r.Workspace, r.Queue, r.Step)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		// The item's route of this epoch, if the step is still in it.
		existing, err := scanRoute(w.queryRow(`SELECT `+routeColumns+` FROM routes
			WHERE workspace = ? AND queue = ? AND step = ? AND item = ? AND lane_epoch = ?
			AND COALESCE((SELECT lane_epoch FROM step_states WHERE workspace = ? AND queue = ? AND step = ?), ?) = ?`,
			r.Workspace, r.Queue, r.Step, r.Item, r.LaneEpoch, r.Workspace, r.Queue, r.Step, r.LaneEpoch, r.LaneEpoch))
		if errors.Is(err, sql.ErrNoRows) {
			return w.stateMoved(r)
		}
		if err != nil {
			return err
		}
		*got, *created = existing, false
		return nil
	}
	if _, err := w.appendReady(ready); err != nil {
		return err
	}
	*got, *created = r, true
	return nil
}

// stateMoved is the error of a route its insert skipped with no route of
// the item stored in its epoch: the step's lane epoch moved on
// (ErrLaneChanged) or, the epoch the same, its audit rate did
// (ErrAuditRateChanged). Only the refused path reads the state.
func (w *wtx) stateMoved(r ladder.Route) error {
	var epoch int
	err := w.queryRow(`SELECT lane_epoch FROM step_states WHERE workspace = ? AND queue = ? AND step = ?`, r.Workspace, r.Queue, r.Step).Scan(&epoch)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	return r.Refused(epoch, err == nil)
}

func (w *wtx) insertRoute(r ladder.Route, onConflict string) error {
	_, err := w.exec(`INSERT INTO routes (`+routeColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) `+onConflict,
		r.ID, r.Workspace, r.Queue, r.Step, r.Item, string(r.Decision), string(r.Lane), boolInt(r.Audit),
		r.AuditRate, r.Reason, nullBytes(r.Features), r.KeyID, fmtTime(r.At), r.LaneEpoch)
	return err
}

// GetRoute returns a route of the workspace by id, or ErrNotFound (also when
// the route belongs to another workspace: a key learns nothing of another
// workspace's ids).
func (s *Store) GetRoute(ctx context.Context, workspace, id string) (ladder.Route, error) {
	r, err := scanRoute(s.readers.QueryRowContext(ctx, `SELECT `+routeColumns+` FROM routes WHERE id = ? AND workspace = ?`, id, workspace))
	if err != nil {
		return ladder.Route{}, fmt.Errorf("get route: %w", s.readErr(err))
	}
	return r, nil
}

func scanRoute(r scanner) (ladder.Route, error) {
	var (
		rt                 ladder.Route
		decision, lane, at string
		audit              int
		features           []byte
		err                error
	)
	if err := r.Scan(&rt.ID, &rt.Workspace, &rt.Queue, &rt.Step, &rt.Item, &decision, &lane, &audit,
		&rt.AuditRate, &rt.Reason, &features, &rt.KeyID, &at, &rt.LaneEpoch); err != nil {
		return ladder.Route{}, err
	}
	rt.Decision, rt.Lane, rt.Audit = ladder.Decision(decision), ladder.Lane(lane), audit != 0
	if len(features) > 0 {
		rt.Features = json.RawMessage(features)
	}
	if rt.At, err = parseTime(at); err != nil {
		return ladder.Route{}, err
	}
	return rt, nil
}

// AddToWeek adds d's signed counts to its week row, creating the row only
// when d.Create is set.
func (w *wtx) AddToWeek(d ladder.WeekDelta) error {
	k, c := d.Key, d.Counts
	if !d.Create {
		_, err := w.exec(`UPDATE week_aggs SET n = n + ?, agreements = agreements + ?, audit_n = audit_n + ?,
				audit_agreements = audit_agreements + ?, sev1 = sev1 + ?, op_n = op_n + ?, op_errors = op_errors + ?
			WHERE workspace = ? AND queue = ? AND step = ? AND iso_week = ? AND epoch = ?`,
			c.N, c.Agreements, c.AuditN, c.AuditAgree, c.Sev1, c.OpN, c.OpErrors, k.Workspace, k.Queue, k.Step, d.Week, d.Epoch)
		return err
	}
	_, err := w.exec(`INSERT INTO week_aggs (workspace, queue, step, iso_week, epoch, week_start,
			n, agreements, audit_n, audit_agreements, sev1, op_n, op_errors)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (workspace, queue, step, iso_week, epoch) DO UPDATE SET
			n = n + excluded.n, agreements = agreements + excluded.agreements,
			audit_n = audit_n + excluded.audit_n, audit_agreements = audit_agreements + excluded.audit_agreements,
			sev1 = sev1 + excluded.sev1, op_n = op_n + excluded.op_n, op_errors = op_errors + excluded.op_errors`,
		k.Workspace, k.Queue, k.Step, d.Week, d.Epoch, fmtTime(d.WeekStart),
		c.N, c.Agreements, c.AuditN, c.AuditAgree, c.Sev1, c.OpN, c.OpErrors)
	return err
}

const reviewColumns = "id, route_id, workspace, queue, step, item, kind, verdict, correction, severity, operator_error, note, adjudication, reviewer, at"

// RecordReview records a review by ladder.RecordReviewTx in one
// transaction of the one writer: concurrent reviews see each other's
// counts, so a threshold crossed by many reviews at once yields one lane
// change. The write's defaults are filled before the transaction, so an op
// run again keeps its ids.
func (s *Store) RecordReview(ctx context.Context, rw ladder.ReviewWrite) (ladder.StepState, *ladder.LaneChange, error) {
	rw = rw.Resolve(s.now())
	var (
		state  ladder.StepState
		change *ladder.LaneChange
	)
	err := s.write(ctx, func(w *wtx) error {
		var err error
		state, change, err = ladder.RecordReviewTx(w, rw, s.now())
		return err
	})
	if err != nil {
		return ladder.StepState{}, nil, fmt.Errorf("record review: %w", err)
	}
	return state, change, nil
}

// The methods below are the SQL of ladder.ReviewTx and ladder.LaneTx.

// LockState returns the step's state. The one writer serializes every
// write, so reading it is holding it.
func (w *wtx) LockState(k ladder.StepKey) (ladder.StepState, error) { return w.getState(k) }

// UpdateState stores st over the step's state.
func (w *wtx) UpdateState(st ladder.StepState) error { return w.updateState(st) }

// InsertLaneChange stores a lane change.
func (w *wtx) InsertLaneChange(c ladder.LaneChange) error { return w.insertLaneChange(c, "") }

// AppendAudit appends entries in the transaction.
func (w *wtx) AppendAudit(entries ...ladder.AuditEntry) error {
	_, err := w.appendAudit(entries...)
	return err
}

// StepChanged does nothing: an embedded store has no subscribers to tell.
func (w *wtx) StepChanged(ladder.StepKey) {}

// RouteOf returns the workspace, queue, step and item of a route.
func (w *wtx) RouteOf(id string) (ladder.Route, error) {
	var r ladder.Route
	err := w.queryRow(`SELECT workspace, queue, step, item FROM routes WHERE id = ?`, id).
		Scan(&r.Workspace, &r.Queue, &r.Step, &r.Item)
	if errors.Is(err, sql.ErrNoRows) {
		return ladder.Route{}, ladder.ErrNotFound
	}
	return r, err
}

// Reviewed reports whether the route has a review that is not an
// adjudication.
func (w *wtx) Reviewed(routeID string) (bool, error) {
	var n int
	err := w.queryRow(`SELECT COUNT(*) FROM reviews WHERE route_id = ? AND adjudication = 0`, routeID).Scan(&n)
	return n > 0, err
}

// CountedReview returns the route's review counted so far, if any.
func (w *wtx) CountedReview(routeID string) (ladder.CountedReview, bool, error) {
	var (
		c             ladder.CountedReview
		kind, verdict string
		opErr         sql.NullInt64
	)
	err := w.queryRow(`SELECT id, workspace, queue, step, kind, verdict, severity, operator_error, iso_week, epoch FROM reviews
		WHERE route_id = ? AND counted = 1`, routeID).Scan(&c.Review.ID, &c.Review.Workspace, &c.Review.Queue, &c.Review.Step,
		&kind, &verdict, &c.Review.Severity, &opErr, &c.Week, &c.Epoch)
	if errors.Is(err, sql.ErrNoRows) {
		return ladder.CountedReview{}, false, nil
	}
	if err != nil {
		return ladder.CountedReview{}, false, err
	}
	c.Review.Kind, c.Review.Verdict = ladder.ReviewKind(kind), ladder.Verdict(verdict)
	if opErr.Valid {
		b := opErr.Int64 != 0
		c.Review.OperatorError = &b
	}
	return c, true, nil
}

// LastSev1 returns the time of the step's latest counted severity-1
// disagreement, or the zero time.
func (w *wtx) LastSev1(k ladder.StepKey) (time.Time, error) {
	var at sql.NullString
	if err := w.queryRow(`SELECT MAX(at) FROM reviews WHERE workspace = ? AND queue = ? AND step = ?
		AND counted = 1 AND verdict = 'disagree' AND severity = 1`, k.Workspace, k.Queue, k.Step).Scan(&at); err != nil || !at.Valid {
		return time.Time{}, err
	}
	return parseTime(at.String)
}

// Uncount marks a review no longer counted.
func (w *wtx) Uncount(reviewID string) error {
	_, err := w.exec(`UPDATE reviews SET counted = 0 WHERE id = ?`, reviewID)
	return err
}

// InsertReview stores rv, counted, in week and epoch.
func (w *wtx) InsertReview(rv ladder.Review, week string, epoch int) error {
	var opErr any
	if rv.OperatorError != nil {
		opErr = boolInt(*rv.OperatorError)
	}
	_, err := w.exec(`INSERT INTO reviews (`+reviewColumns+`, iso_week, epoch, counted)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1)`,
		rv.ID, rv.RouteID, rv.Workspace, rv.Queue, rv.Step, rv.Item, string(rv.Kind), string(rv.Verdict),
		nullBytes(rv.Correction), rv.Severity, opErr, rv.Note, boolInt(rv.Adjudication), rv.Reviewer,
		fmtTime(rv.At), week, epoch)
	return err
}

// CloseShadow marks the route's shadow proposals reviewed.
func (w *wtx) CloseShadow(routeID string) error { return w.closeShadow(routeID) }

// WeekAggs returns the step's weekly aggregates inside the transaction.
func (w *wtx) WeekAggs(k ladder.StepKey) ([]ladder.WeekAgg, error) { return w.weekAggs(k) }

const laneChangeColumns = "id, workspace, queue, step, at, from_lane, to_lane, rule, numbers, actor, reason"

func (w *wtx) insertLaneChange(c ladder.LaneChange, onConflict string) error {
	numbers, err := json.Marshal(c.Numbers)
	if err != nil {
		return fmt.Errorf("lane change numbers: %w", err)
	}
	_, err = w.exec(`INSERT INTO lane_changes (`+laneChangeColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) `+onConflict,
		c.ID, c.Workspace, c.Queue, c.Step, fmtTime(c.At), string(c.From), string(c.To), c.Rule, string(numbers), c.Actor, c.Reason)
	return err
}

// SetLane applies a lane write by ladder.SetLaneTx in one transaction of
// the one writer, which serializes it with every other write of the step.
func (s *Store) SetLane(ctx context.Context, lw ladder.LaneWrite) (ladder.StepState, error) {
	var state ladder.StepState
	err := s.write(ctx, func(w *wtx) error {
		var err error
		state, err = ladder.SetLaneTx(w, lw, s.now())
		return err
	})
	if err != nil {
		return ladder.StepState{}, fmt.Errorf("set lane: %w", err)
	}
	return state, nil
}

const weekColumns = "workspace, queue, step, iso_week, week_start, epoch, n, agreements, audit_n, audit_agreements, sev1, op_n, op_errors"

// WeekAggs returns a step's weekly aggregates, oldest week first, one row
// per week and epoch.
func (s *Store) WeekAggs(ctx context.Context, k ladder.StepKey) ([]ladder.WeekAgg, error) {
	rows, err := s.readers.QueryContext(ctx, weekAggsQuery, k.Workspace, k.Queue, k.Step)
	if err != nil {
		return nil, fmt.Errorf("week aggregates: %w", s.mapErr(err))
	}
	out, err := collect(rows, scanWeek)
	if err != nil {
		return nil, fmt.Errorf("week aggregates: %w", s.mapErr(err))
	}
	return out, nil
}

const weekAggsQuery = `SELECT ` + weekColumns + ` FROM week_aggs
	WHERE workspace = ? AND queue = ? AND step = ? ORDER BY iso_week, epoch`

func (w *wtx) weekAggs(k ladder.StepKey) ([]ladder.WeekAgg, error) {
	rows, err := w.query(weekAggsQuery, k.Workspace, k.Queue, k.Step)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanWeek)
}

func scanWeek(r scanner) (ladder.WeekAgg, error) {
	var (
		a     ladder.WeekAgg
		start string
		err   error
	)
	if err := r.Scan(&a.Workspace, &a.Queue, &a.Step, &a.ISOWeek, &start, &a.Epoch, &a.N, &a.Agreements,
		&a.AuditN, &a.AuditAgree, &a.Sev1, &a.OpN, &a.OpErrors); err != nil {
		return ladder.WeekAgg{}, err
	}
	if a.WeekStart, err = parseTime(start); err != nil {
		return ladder.WeekAgg{}, err
	}
	return a, nil
}

// LaneChanges returns a step's lane changes, oldest first.
func (s *Store) LaneChanges(ctx context.Context, k ladder.StepKey) ([]ladder.LaneChange, error) {
	rows, err := s.readers.QueryContext(ctx, `SELECT `+laneChangeColumns+` FROM lane_changes
		WHERE workspace = ? AND queue = ? AND step = ? ORDER BY at, rowid`, k.Workspace, k.Queue, k.Step)
	if err != nil {
		return nil, fmt.Errorf("lane changes: %w", s.mapErr(err))
	}
	out, err := collect(rows, scanLaneChange)
	if err != nil {
		return nil, fmt.Errorf("lane changes: %w", s.mapErr(err))
	}
	return out, nil
}

func scanLaneChange(r scanner) (ladder.LaneChange, error) {
	var (
		c                 ladder.LaneChange
		at, from, to, num string
		err               error
	)
	if err := r.Scan(&c.ID, &c.Workspace, &c.Queue, &c.Step, &at, &from, &to, &c.Rule, &num, &c.Actor, &c.Reason); err != nil {
		return ladder.LaneChange{}, err
	}
	c.From, c.To = ladder.Lane(from), ladder.Lane(to)
	if c.At, err = parseTime(at); err != nil {
		return ladder.LaneChange{}, err
	}
	if err := json.Unmarshal([]byte(num), &c.Numbers); err != nil {
		return ladder.LaneChange{}, fmt.Errorf("lane change %s numbers: %w", c.ID, err)
	}
	return c, nil
}

// Reviews returns a step's reviews matching q, newest first. A zero Limit
// means no limit.
func (s *Store) Reviews(ctx context.Context, q ladder.ReviewQuery) ([]ladder.Review, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	// The filters are spelled out, not folded into "? = 0 OR …", so that
	// SQLite can walk the matching index backwards and stop after limit
	// rows: the pack's recent lists stay O(limit) with a million reviews.
	where, args := `workspace = ? AND queue = ? AND step = ?`, []any{q.Key.Workspace, q.Key.Queue, q.Key.Step}
	if q.Disagreement {
		where += ` AND verdict = 'disagree'`
	}
	if q.Kind != "" {
		where += ` AND kind = ?`
		args = append(args, string(q.Kind))
	}
	rows, err := s.readers.QueryContext(ctx, `SELECT `+reviewColumns+` FROM reviews WHERE `+where+`
		ORDER BY at DESC, rowid DESC LIMIT ?`, append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("reviews: %w", s.mapErr(err))
	}
	out, err := collect(rows, scanReview)
	if err != nil {
		return nil, fmt.Errorf("reviews: %w", s.mapErr(err))
	}
	return out, nil
}

func scanReview(r scanner) (ladder.Review, error) {
	var (
		rv                ladder.Review
		kind, verdict, at string
		correction        []byte
		opErr             sql.NullInt64
		adj               int
		err               error
	)
	if err := r.Scan(&rv.ID, &rv.RouteID, &rv.Workspace, &rv.Queue, &rv.Step, &rv.Item, &kind, &verdict,
		&correction, &rv.Severity, &opErr, &rv.Note, &adj, &rv.Reviewer, &at); err != nil {
		return ladder.Review{}, err
	}
	rv.Kind, rv.Verdict, rv.Adjudication = ladder.ReviewKind(kind), ladder.Verdict(verdict), adj != 0
	if len(correction) > 0 {
		rv.Correction = json.RawMessage(correction)
	}
	if opErr.Valid {
		b := opErr.Int64 != 0
		rv.OperatorError = &b
	}
	if rv.At, err = parseTime(at); err != nil {
		return ladder.Review{}, err
	}
	return rv, nil
}

// RecordOutcome stores an outcome, counts it, and appends audit.
func (s *Store) RecordOutcome(ctx context.Context, o ladder.Outcome, audit ladder.AuditEntry) error {
	err := s.write(ctx, func(w *wtx) error {
		if err := w.insertOutcome(o); err != nil {
			return err
		}
		_, err := w.appendAudit(audit)
		return err
	})
	if err != nil {
		return fmt.Errorf("record outcome: %w", err)
	}
	return nil
}

func (w *wtx) insertOutcome(o ladder.Outcome) error {
	if o.ID == "" {
		o.ID = ladder.NewID("oc")
	}
	if o.At.IsZero() {
		o.At = w.s.now()
	}
	if _, err := w.exec(`INSERT INTO outcomes (id, workspace, queue, step, item, handled_by, ok, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		o.ID, o.Workspace, o.Queue, o.Step, o.Item, o.HandledBy, boolInt(o.OK), fmtTime(o.At)); err != nil {
		return err
	}
	_, err := w.exec(`INSERT INTO outcome_counts (workspace, queue, step, handled_by, n, failures) VALUES (?, ?, ?, ?, 1, ?)
		ON CONFLICT (workspace, queue, step, handled_by) DO UPDATE SET n = n + 1, failures = failures + excluded.failures`,
		o.Workspace, o.Queue, o.Step, o.HandledBy, boolInt(!o.OK))
	return err
}

// OutcomeCounts returns the outcome test's counts for a step.
func (s *Store) OutcomeCounts(ctx context.Context, k ladder.StepKey) (ladder.OutcomeCounts, error) {
	rows, err := s.readers.QueryContext(ctx, `SELECT handled_by, n, failures FROM outcome_counts
		WHERE workspace = ? AND queue = ? AND step = ?`, k.Workspace, k.Queue, k.Step)
	if err != nil {
		return ladder.OutcomeCounts{}, fmt.Errorf("outcome counts: %w", s.mapErr(err))
	}
	defer rows.Close()
	var oc ladder.OutcomeCounts
	for rows.Next() {
		var (
			by      string
			n, fail int
		)
		if err := rows.Scan(&by, &n, &fail); err != nil {
			return ladder.OutcomeCounts{}, fmt.Errorf("outcome counts: %w", s.mapErr(err))
		}
		oc.Add(by, n, fail)
	}
	if err := rows.Err(); err != nil {
		return ladder.OutcomeCounts{}, fmt.Errorf("outcome counts: %w", s.mapErr(err))
	}
	return oc, nil
}

// Outcomes returns a step's outcomes, oldest first.
func (s *Store) Outcomes(ctx context.Context, k ladder.StepKey) ([]ladder.Outcome, error) {
	rows, err := s.readers.QueryContext(ctx, `SELECT id, workspace, queue, step, item, handled_by, ok, at FROM outcomes
		WHERE workspace = ? AND queue = ? AND step = ? ORDER BY at, rowid`, k.Workspace, k.Queue, k.Step)
	if err != nil {
		return nil, fmt.Errorf("outcomes: %w", s.mapErr(err))
	}
	out, err := collect(rows, func(r scanner) (ladder.Outcome, error) {
		var (
			o  ladder.Outcome
			ok int
			at string
		)
		if err := r.Scan(&o.ID, &o.Workspace, &o.Queue, &o.Step, &o.Item, &o.HandledBy, &ok, &at); err != nil {
			return o, err
		}
		o.OK = ok != 0
		var err error
		o.At, err = parseTime(at)
		return o, err
	})
	if err != nil {
		return nil, fmt.Errorf("outcomes: %w", s.mapErr(err))
	}
	return out, nil
}

// ImportRecords runs fn in one transaction of the one writer; an error from
// fn rolls back everything it wrote.
func (s *Store) ImportRecords(ctx context.Context, fn func(tx ladder.ImportTx) error) error {
	err := s.write(ctx, func(w *wtx) error { return fn(w) })
	if err != nil {
		return fmt.Errorf("import records: %w", err)
	}
	return nil
}

// InsertRoute stores a route; the item's route of the same lane epoch is a
// constraint error (ErrConflict).
func (w *wtx) InsertRoute(r ladder.Route) error { return w.s.mapErr(w.insertRoute(r, "")) }

// InsertOutcome stores and counts an outcome.
func (w *wtx) InsertOutcome(o ladder.Outcome) error { return w.insertOutcome(o) }

// StepRecord returns the step's latest review or lane change time and
// its outcome counts, inside the write transaction.
func (w *wtx) StepRecord(k ladder.StepKey) (ladder.StepRecord, error) {
	var (
		rec    ladder.StepRecord
		rv, lc sql.NullString
		an, af int
		pn, pf int
	)
	if err := w.queryRow(`SELECT (SELECT MAX(at) FROM reviews WHERE workspace = ? AND queue = ? AND step = ?),
		(SELECT MAX(at) FROM lane_changes WHERE workspace = ? AND queue = ? AND step = ?)`,
		k.Workspace, k.Queue, k.Step, k.Workspace, k.Queue, k.Step).Scan(&rv, &lc); err != nil {
		return rec, err
	}
	for _, s := range []sql.NullString{rv, lc} {
		if !s.Valid {
			continue
		}
		t, err := parseTime(s.String)
		if err != nil {
			return rec, err
		}
		if !rec.Has || t.After(rec.Latest) {
			rec.Latest, rec.Has = t, true
		}
	}
	if err := w.queryRow(`SELECT COALESCE(SUM(CASE WHEN handled_by = 'agent' THEN n END), 0), COALESCE(SUM(CASE WHEN handled_by = 'agent' THEN failures END), 0),
		COALESCE(SUM(CASE WHEN handled_by = 'person' THEN n END), 0), COALESCE(SUM(CASE WHEN handled_by = 'person' THEN failures END), 0)
		FROM outcome_counts WHERE workspace = ? AND queue = ? AND step = ?`, k.Workspace, k.Queue, k.Step).Scan(&an, &af, &pn, &pf); err != nil {
		return rec, err
	}
	rec.Outcomes.Add(ladder.HandledByAgent, an, af)
	rec.Outcomes.Add(ladder.HandledByPerson, pn, pf)
	return rec, nil
}

// ReviewedRoute returns the latest reviewed route of the item at the step.
func (w *wtx) ReviewedRoute(k ladder.StepKey, item string) (string, bool, error) {
	var id string
	err := w.queryRow(`SELECT route_id FROM reviews WHERE workspace = ? AND queue = ? AND step = ? AND item = ?
		ORDER BY at DESC, id DESC LIMIT 1`, k.Workspace, k.Queue, k.Step, item).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	return id, err == nil, err
}

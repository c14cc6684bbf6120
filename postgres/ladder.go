package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
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
	q, args, err := putStateSQL(st, onConflict)
	if err != nil {
		return err
	}
	_, err = w.exec(q, args...)
	return err
}

func putStateSQL(st ladder.StepState, onConflict string) (string, []any, error) {
	if !st.Lane.Valid() {
		return "", nil, fmt.Errorf("step %s/%s/%s: invalid lane %q", st.Workspace, st.Queue, st.Step, st.Lane)
	}
	return `INSERT INTO step_states (` + stateColumns + `) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) ` + onConflict,
		[]any{st.Workspace, st.Queue, st.Step, string(st.Lane), nullTime(st.LaneSince), st.Epoch, st.Pinned,
			st.PinReason, st.AuditRate, nullTime(st.LastSev1At), nullTime(st.LastAuditFailAt), nullTime(st.AuditRateSince), st.Version, st.LaneEpoch}, nil
}

// updateState stores st over the step's state.
func (w *wtx) updateState(st ladder.StepState) error {
	if !st.Lane.Valid() {
		return fmt.Errorf("step %s/%s/%s: invalid lane %q", st.Workspace, st.Queue, st.Step, st.Lane)
	}
	_, err := w.exec(`UPDATE step_states SET lane = $1, lane_since = $2, epoch = $3, pinned = $4, pin_reason = $5,
		audit_rate = $6, last_sev1_at = $7, last_audit_fail_at = $8, audit_rate_since = $9, version = $10, lane_epoch = $11
		WHERE workspace = $12 AND queue = $13 AND step = $14`,
		string(st.Lane), nullTime(st.LaneSince), st.Epoch, st.Pinned, st.PinReason, st.AuditRate,
		nullTime(st.LastSev1At), nullTime(st.LastAuditFailAt), nullTime(st.AuditRateSince), st.Version, st.LaneEpoch,
		st.Workspace, st.Queue, st.Step)
	return err
}

// lockState reads the step's state and locks its row until the batch
// commits: writes that decide from the state (RecordReview, SetLane) are
// serialized per step across every replica.
func (w *wtx) lockState(k ladder.StepKey) (ladder.StepState, error) {
	st, err := scanState(w.queryRow(`SELECT `+stateColumns+` FROM step_states
		WHERE workspace = $1 AND queue = $2 AND step = $3 FOR UPDATE`, k.Workspace, k.Queue, k.Step))
	if errors.Is(err, pgx.ErrNoRows) {
		return ladder.StepState{}, fmt.Errorf("step state %s/%s: %w", k.Queue, k.Step, ladder.ErrNotFound)
	}
	return st, err
}

// GetStepState returns one step's state, or ErrNotFound.
func (s *Store) GetStepState(ctx context.Context, k ladder.StepKey) (ladder.StepState, error) {
	if err := s.reading(); err != nil {
		return ladder.StepState{}, fmt.Errorf("get step state: %w", err)
	}
	st, err := scanState(s.pool.QueryRow(ctx, `SELECT `+stateColumns+` FROM step_states
		WHERE workspace = $1 AND queue = $2 AND step = $3`, k.Workspace, k.Queue, k.Step))
	if err != nil {
		return ladder.StepState{}, fmt.Errorf("get step state: %w", s.readErr(err))
	}
	return st, nil
}

// ListStepStates returns the states of a workspace's steps in the order
// they were first stored (the config's order, when EnsureSteps stored them).
func (s *Store) ListStepStates(ctx context.Context, workspace string) ([]ladder.StepState, error) {
	if err := s.reading(); err != nil {
		return nil, fmt.Errorf("list step states: %w", err)
	}
	rows, err := s.pool.Query(ctx, `SELECT `+stateColumns+` FROM step_states WHERE workspace = $1 ORDER BY ord`, workspace)
	if err != nil {
		return nil, fmt.Errorf("list step states: %w", s.mapErr(err))
	}
	out, err := collect(rows, scanState)
	if err != nil {
		return nil, fmt.Errorf("list step states: %w", s.mapErr(err))
	}
	return out, nil
}

func scanState(r pgx.Row) (ladder.StepState, error) {
	var (
		st                                 ladder.StepState
		lane                               string
		since, lastSev1, lastAF, rateSince *time.Time
	)
	if err := r.Scan(&st.Workspace, &st.Queue, &st.Step, &lane, &since, &st.Epoch, &st.Pinned, &st.PinReason,
		&st.AuditRate, &lastSev1, &lastAF, &rateSince, &st.Version, &st.LaneEpoch); err != nil {
		return ladder.StepState{}, err
	}
	st.Lane = ladder.Lane(lane)
	st.LaneSince, st.LastSev1At, st.LastAuditFailAt, st.AuditRateSince = fromNull(since), fromNull(lastSev1), fromNull(lastAF), fromNull(rateSince)
	return st, nil
}

const routeColumns = "id, workspace, queue, step, item, decision, lane, audit, audit_rate, reason, features, key_id, at, lane_epoch"

// RecordRoute stores r unless a route for the same workspace, queue, step,
// item and lane epoch exists; either way it returns the stored route and
// whether it was created now. The audit entry is appended only when the
// route is created. The insert is ON CONFLICT DO NOTHING on the item's
// unique key, followed by a read of the stored route: PostgreSQL makes a
// concurrent insert of the same item (from this batch, or another
// replica's) wait for the first one's commit, so every caller sees one
// route. The insert key-share-locks the step's state while the step is
// still in the route's lane epoch, so a lane change on any replica either
// commits first (and the route is not stored: ErrLaneChanged) or waits for
// this one. The same lock holds the step's audit rate to the one the route
// was decided under (r.StateAuditRate), since every change of the rate
// locks the state FOR UPDATE (LockState) as a lane change does.
func (s *Store) RecordRoute(ctx context.Context, r ladder.Route, audit ladder.AuditEntry) (ladder.Route, bool, error) {
	r = r.Resolved(s.now())
	var (
		got     ladder.Route
		created bool
	)
	err := s.write(ctx, func(w *wtx) error { return w.recordRoute(r, audit, &got, &created) })
	if err != nil {
		return ladder.Route{}, false, fmt.Errorf("record route: %w", err)
	}
	got.StateAuditRate = 0 // not stored: the route as stored
	return got, created, nil
}

// recordRoute is RecordRoute's op: in an optimistic run of a batch of
// several ops it queues the route (queueRoute), else it inserts it now.
func (w *wtx) recordRoute(r ladder.Route, audit ladder.AuditEntry, got *ladder.Route, created *bool) error {
	if w.deferRoutes {
		return w.queueRoute(r, audit, got, created)
	}
	tag, err := w.exec(`INSERT INTO routes (`+routeColumns+`)
		SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14
		WHERE COALESCE((SELECT lane_epoch = $14 AND audit_rate = $15 FROM step_states WHERE workspace = $2 AND queue = $3 AND step = $4 FOR KEY SHARE), true)
		ON CONFLICT (workspace, queue, step, item, lane_epoch) DO NOTHING`,
		r.ID, r.Workspace, r.Queue, r.Step, r.Item, string(r.Decision), string(r.Lane), r.Audit,
		r.AuditRate, r.Reason, nullBytes(r.Features), r.KeyID, normTime(r.At), r.LaneEpoch, r.StateAuditRate)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 1 {
		*got, *created = r, true
		return w.appendAudit(nil, audit)
	}
	existing, err := w.existingRoute(r)
	*got, *created = existing, false
	return err
}

// existingRoute returns the item's route of r's lane epoch, stored before
// r's insert did nothing, if the step is still in that epoch. Without one,
// the insert was refused because the step's state moved on: its lane epoch
// (ErrLaneChanged) or, the epoch the same, its audit rate
// (ErrAuditRateChanged).
func (w *wtx) existingRoute(r ladder.Route) (ladder.Route, error) {
	existing, err := scanRoute(w.queryRow(`SELECT `+routeColumns+` FROM routes
		WHERE workspace = $1 AND queue = $2 AND step = $3 AND item = $4 AND lane_epoch = $5
		AND COALESCE((SELECT lane_epoch FROM step_states WHERE workspace = $1 AND queue = $2 AND step = $3 FOR KEY SHARE), $5) = $5`,
		r.Workspace, r.Queue, r.Step, r.Item, r.LaneEpoch))
	if errors.Is(err, pgx.ErrNoRows) {
		return ladder.Route{}, w.stateMoved(r)
	}
	return existing, err
}

// stateMoved is the error of a route whose insert was refused with no
// route of the item in its epoch. Only the refused path reads the state.
func (w *wtx) stateMoved(r ladder.Route) error {
	var epoch int
	err := w.queryRow(`SELECT lane_epoch FROM step_states WHERE workspace = $1 AND queue = $2 AND step = $3`, r.Workspace, r.Queue, r.Step).Scan(&epoch)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	return r.Refused(epoch, err == nil)
}

// pendingRoute is a RecordRoute queued in its batch (queueRoute); got and
// created receive its result when flushRoutes has run it.
type pendingRoute struct {
	r       ladder.Route
	slot    int // its audit entry's index in the batch's audit
	got     *ladder.Route
	created *bool
}

// queueRoute queues RecordRoute's insert, to be run with the other routes
// queued next to it in one statement (flushRoutes), and its audit entry in
// its place in the batch's audit, to be dropped if the route is not
// created.
func (w *wtx) queueRoute(r ladder.Route, audit ladder.AuditEntry, got *ladder.Route, created *bool) error {
	if err := w.appendAudit(nil, audit); err != nil {
		return err
	}
	w.routes = append(w.routes, pendingRoute{r: r, slot: len(w.audit) - 1, got: got, created: created})
	return nil
}

// flushRoutes inserts the queued routes in one statement, with the same
// conditions RecordRoute's own insert has, row by row in queue order: the
// lane epoch checked under a key-share lock of the step's state, an item's
// route of the epoch inserted once. A route the insert skipped is looked
// up as RecordRoute does; if the step left its epoch, the op's error is
// not known until the batch runs again op by op (errOpFailed), as for any
// op failing in an optimistic run.
func (w *wtx) flushRoutes() error {
	if len(w.routes) == 0 {
		return nil
	}
	err := w.insertRoutes()
	if err != nil {
		w.routesErr = err
	}
	return err
}

func (w *wtx) insertRoutes() error {
	pending := w.routes
	w.routes = nil // the look-ups below run statements
	n := len(pending)
	var (
		ids, wss, queues, steps, items, decisions, lanes, reasons, keys = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		audits                                                          = make([]bool, n)
		rates                                                           = make([]float64, n)
		features                                                        = make([][]byte, n)
		ats                                                             = make([]time.Time, n)
		epochs                                                          = make([]int64, n)
		stateRates                                                      = make([]float64, n)
	)
	for i, p := range pending {
		r := p.r
		ids[i], wss[i], queues[i], steps[i], items[i] = r.ID, r.Workspace, r.Queue, r.Step, r.Item
		decisions[i], lanes[i], audits[i], rates[i], reasons[i] = string(r.Decision), string(r.Lane), r.Audit, r.AuditRate, r.Reason
		if len(r.Features) > 0 {
			features[i] = r.Features
		}
		keys[i], ats[i], epochs[i], stateRates[i] = r.KeyID, normTime(r.At), int64(r.LaneEpoch), r.StateAuditRate
	}
	rows, err := w.tx.Query(w.ctx, `INSERT INTO routes (`+routeColumns+`)
		SELECT v.id, v.workspace, v.queue, v.step, v.item, v.decision, v.lane, v.audit, v.audit_rate, v.reason, v.features, v.key_id, v.at, v.lane_epoch
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::boolean[], $9::double precision[], $10::text[], $11::bytea[], $12::text[], $13::timestamptz[], $14::integer[], $15::double precision[])
			WITH ORDINALITY AS v(id, workspace, queue, step, item, decision, lane, audit, audit_rate, reason, features, key_id, at, lane_epoch, state_rate, ord)
		WHERE COALESCE((SELECT s.lane_epoch = v.lane_epoch AND s.audit_rate = v.state_rate FROM step_states s WHERE s.workspace = v.workspace AND s.queue = v.queue AND s.step = v.step FOR KEY SHARE), true)
		ORDER BY v.ord
		ON CONFLICT (workspace, queue, step, item, lane_epoch) DO NOTHING
		RETURNING id`,
		ids, wss, queues, steps, items, decisions, lanes, audits, rates, reasons, features, keys, ats, epochs, stateRates)
	if err != nil {
		return fmt.Errorf("insert routes: %w", err)
	}
	inserted, err := collect(rows, func(r pgx.Row) (string, error) {
		var id string
		return id, r.Scan(&id)
	})
	if err != nil {
		return fmt.Errorf("insert routes: %w", err)
	}
	created := make(map[string]bool, len(inserted))
	for _, id := range inserted {
		created[id] = true
	}
	for _, p := range pending {
		if created[p.r.ID] {
			*p.got, *p.created = p.r, true
			continue
		}
		w.audit[p.slot].entries = nil
		existing, err := w.existingRoute(p.r)
		if errors.Is(err, ladder.ErrLaneChanged) || errors.Is(err, ladder.ErrAuditRateChanged) {
			return fmt.Errorf("record route: %w (%w)", errOpFailed, err)
		}
		if err != nil {
			return fmt.Errorf("record route: %w", err)
		}
		*p.got, *p.created = existing, false
	}
	return nil
}

func insertRouteSQL(r ladder.Route, onConflict string) (string, []any) {
	return `INSERT INTO routes (` + routeColumns + `) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) ` + onConflict,
		[]any{r.ID, r.Workspace, r.Queue, r.Step, r.Item, string(r.Decision), string(r.Lane), r.Audit,
			r.AuditRate, r.Reason, nullBytes(r.Features), r.KeyID, normTime(r.At), r.LaneEpoch}
}

// GetRoute returns a route of the workspace by id, or ErrNotFound (also when
// the route belongs to another workspace: a key learns nothing of another
// workspace's ids).
func (s *Store) GetRoute(ctx context.Context, workspace, id string) (ladder.Route, error) {
	if err := s.reading(); err != nil {
		return ladder.Route{}, fmt.Errorf("get route: %w", err)
	}
	r, err := scanRoute(s.pool.QueryRow(ctx, `SELECT `+routeColumns+` FROM routes WHERE id = $1 AND workspace = $2`, id, workspace))
	if err != nil {
		return ladder.Route{}, fmt.Errorf("get route: %w", s.readErr(err))
	}
	return r, nil
}

func scanRoute(r pgx.Row) (ladder.Route, error) {
	var (
		rt             ladder.Route
		decision, lane string
		features       []byte
	)
	if err := r.Scan(&rt.ID, &rt.Workspace, &rt.Queue, &rt.Step, &rt.Item, &decision, &lane, &rt.Audit,
		&rt.AuditRate, &rt.Reason, &features, &rt.KeyID, &rt.At, &rt.LaneEpoch); err != nil {
		return ladder.Route{}, err
	}
	rt.Decision, rt.Lane = ladder.Decision(decision), ladder.Lane(lane)
	if len(features) > 0 {
		rt.Features = json.RawMessage(features)
	}
	rt.At = rt.At.UTC()
	return rt, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// addToWeekSQL adds d's signed counts to its week row: an upsert when
// d.Create is set, else an update of the row if it is there.
func addToWeekSQL(d ladder.WeekDelta) (string, []any) {
	k, c := d.Key, d.Counts
	if !d.Create {
		return `UPDATE week_aggs SET n = n + $1, agreements = agreements + $2, audit_n = audit_n + $3,
				audit_agreements = audit_agreements + $4, sev1 = sev1 + $5, op_n = op_n + $6, op_errors = op_errors + $7
			WHERE workspace = $8 AND queue = $9 AND step = $10 AND iso_week = $11 AND epoch = $12`,
			[]any{c.N, c.Agreements, c.AuditN, c.AuditAgree, c.Sev1, c.OpN, c.OpErrors, k.Workspace, k.Queue, k.Step, d.Week, d.Epoch}
	}
	return `INSERT INTO week_aggs AS a (workspace, queue, step, iso_week, epoch, week_start,
			n, agreements, audit_n, audit_agreements, sev1, op_n, op_errors)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
		ON CONFLICT (workspace, queue, step, iso_week, epoch) DO UPDATE SET
			n = a.n + excluded.n, agreements = a.agreements + excluded.agreements,
			audit_n = a.audit_n + excluded.audit_n, audit_agreements = a.audit_agreements + excluded.audit_agreements,
			sev1 = a.sev1 + excluded.sev1, op_n = a.op_n + excluded.op_n, op_errors = a.op_errors + excluded.op_errors`,
		[]any{k.Workspace, k.Queue, k.Step, d.Week, d.Epoch, normTime(d.WeekStart),
			c.N, c.Agreements, c.AuditN, c.AuditAgree, c.Sev1, c.OpN, c.OpErrors}
}

const reviewColumns = "id, route_id, workspace, queue, step, item, kind, verdict, correction, severity, operator_error, note, adjudication, reviewer, at"

// RecordReview records a review by ladder.RecordReviewTx in one
// transaction. The step's state row is locked (LockState: SELECT ... FOR
// UPDATE) before anything is counted, so reviews of one step are
// serialized across every replica: each decider sees the counts of every
// review before it, and a threshold crossed by many reviews at once yields
// one lane change. When the decider moves the lane, pin, epoch or audit
// rate, subscribers of every replica hear of it. The write's defaults are
// filled before the transaction, so an op run again keeps its ids.
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

// The methods below are the SQL of ladder.ReviewTx and ladder.LaneTx. The
// step's state row is locked first (LockState), so under it each statement
// sees every write of the step committed before it (READ COMMITTED takes a
// snapshot per statement).

// LockState reads the step's state and locks its row until the batch
// commits.
func (w *wtx) LockState(k ladder.StepKey) (ladder.StepState, error) { return w.lockState(k) }

// UpdateState stores st over the step's state.
func (w *wtx) UpdateState(st ladder.StepState) error { return w.updateState(st) }

// InsertLaneChange stores a lane change.
func (w *wtx) InsertLaneChange(c ladder.LaneChange) error { return w.insertLaneChange(c) }

// AppendAudit queues entries for the batch's append.
func (w *wtx) AppendAudit(entries ...ladder.AuditEntry) error { return w.appendAudit(nil, entries...) }

// StepChanged tells subscribers of every replica of the step once the batch
// commits.
func (w *wtx) StepChanged(k ladder.StepKey) { w.notifyStep(k) }

// RouteOf returns the workspace, queue, step and item of a route.
func (w *wtx) RouteOf(id string) (ladder.Route, error) {
	var r ladder.Route
	err := w.queryRow(`SELECT workspace, queue, step, item FROM routes WHERE id = $1`, id).
		Scan(&r.Workspace, &r.Queue, &r.Step, &r.Item)
	if errors.Is(err, pgx.ErrNoRows) {
		return ladder.Route{}, ladder.ErrNotFound
	}
	return r, err
}

// Reviewed reports whether the route has a review that is not an
// adjudication.
func (w *wtx) Reviewed(routeID string) (bool, error) {
	var n int
	err := w.queryRow(`SELECT COUNT(*) FROM reviews WHERE route_id = $1 AND NOT adjudication`, routeID).Scan(&n)
	return n > 0, err
}

// CountedReview returns the route's review counted so far, if any.
func (w *wtx) CountedReview(routeID string) (ladder.CountedReview, bool, error) {
	var (
		c             ladder.CountedReview
		kind, verdict string
	)
	err := w.queryRow(`SELECT id, workspace, queue, step, kind, verdict, severity, operator_error, iso_week, epoch FROM reviews
		WHERE route_id = $1 AND counted`, routeID).Scan(&c.Review.ID, &c.Review.Workspace, &c.Review.Queue, &c.Review.Step,
		&kind, &verdict, &c.Review.Severity, &c.Review.OperatorError, &c.Week, &c.Epoch)
	if errors.Is(err, pgx.ErrNoRows) {
		return ladder.CountedReview{}, false, nil
	}
	if err != nil {
		return ladder.CountedReview{}, false, err
	}
	c.Review.Kind, c.Review.Verdict = ladder.ReviewKind(kind), ladder.Verdict(verdict)
	return c, true, nil
}

// LastSev1 returns the time of the step's latest counted severity-1
// disagreement, or the zero time.
func (w *wtx) LastSev1(k ladder.StepKey) (time.Time, error) {
	var at *time.Time
	if err := w.queryRow(`SELECT MAX(at) FROM reviews WHERE workspace = $1 AND queue = $2 AND step = $3
		AND counted AND verdict = 'disagree' AND severity = 1`, k.Workspace, k.Queue, k.Step).Scan(&at); err != nil || at == nil {
		return time.Time{}, err
	}
	return ladder.NormTime(*at), nil
}

// Uncount marks a review no longer counted.
func (w *wtx) Uncount(reviewID string) error {
	_, err := w.exec(`UPDATE reviews SET counted = false WHERE id = $1`, reviewID)
	return err
}

// InsertReview stores rv, counted, in week and epoch.
func (w *wtx) InsertReview(rv ladder.Review, week string, epoch int) error {
	q, args := insertReviewSQL(rv, week, epoch)
	_, err := w.exec(q, args...)
	return err
}

func insertReviewSQL(rv ladder.Review, week string, epoch int) (string, []any) {
	return `INSERT INTO reviews (` + reviewColumns + `, iso_week, epoch, counted)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, true)`,
		[]any{rv.ID, rv.RouteID, rv.Workspace, rv.Queue, rv.Step, rv.Item, string(rv.Kind), string(rv.Verdict),
			nullBytes(rv.Correction), rv.Severity, rv.OperatorError, rv.Note, rv.Adjudication, rv.Reviewer,
			normTime(rv.At), week, epoch}
}

// CloseShadow marks the route's shadow proposals reviewed.
func (w *wtx) CloseShadow(routeID string) error { return w.closeShadow(routeID) }

// AddToWeek adds d's signed counts to its week row.
func (w *wtx) AddToWeek(d ladder.WeekDelta) error {
	q, args := addToWeekSQL(d)
	_, err := w.exec(q, args...)
	return err
}

// WeekAggs returns the step's weekly aggregates inside the transaction.
func (w *wtx) WeekAggs(k ladder.StepKey) ([]ladder.WeekAgg, error) { return w.weekAggs(k) }

const laneChangeColumns = "id, workspace, queue, step, at, from_lane, to_lane, rule, numbers, actor, reason"

func (w *wtx) insertLaneChange(c ladder.LaneChange) error {
	q, args, err := insertLaneChangeSQL(c)
	if err != nil {
		return err
	}
	_, err = w.exec(q, args...)
	return err
}

func insertLaneChangeSQL(c ladder.LaneChange) (string, []any, error) {
	numbers, err := json.Marshal(c.Numbers)
	if err != nil {
		return "", nil, fmt.Errorf("lane change numbers: %w", err)
	}
	return `INSERT INTO lane_changes (` + laneChangeColumns + `) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
		[]any{c.ID, c.Workspace, c.Queue, c.Step, normTime(c.At), string(c.From), string(c.To), c.Rule, string(numbers), c.Actor, c.Reason}, nil
}

// SetLane applies a lane write by ladder.SetLaneTx in one transaction. The
// state row is locked for the IfVersion check, so the check holds across
// replicas; subscribers of every replica hear of the write.
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

const weekAggsQuery = `SELECT ` + weekColumns + ` FROM week_aggs
	WHERE workspace = $1 AND queue = $2 AND step = $3 ORDER BY iso_week, epoch`

// WeekAggs returns a step's weekly aggregates, oldest week first, one row
// per week and epoch.
func (s *Store) WeekAggs(ctx context.Context, k ladder.StepKey) ([]ladder.WeekAgg, error) {
	if err := s.reading(); err != nil {
		return nil, fmt.Errorf("week aggregates: %w", err)
	}
	rows, err := s.pool.Query(ctx, weekAggsQuery, k.Workspace, k.Queue, k.Step)
	if err != nil {
		return nil, fmt.Errorf("week aggregates: %w", s.mapErr(err))
	}
	out, err := collect(rows, scanWeek)
	if err != nil {
		return nil, fmt.Errorf("week aggregates: %w", s.mapErr(err))
	}
	return out, nil
}

func (w *wtx) weekAggs(k ladder.StepKey) ([]ladder.WeekAgg, error) {
	rows, err := w.query(weekAggsQuery, k.Workspace, k.Queue, k.Step)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanWeek)
}

func scanWeek(r pgx.Row) (ladder.WeekAgg, error) {
	var a ladder.WeekAgg
	if err := r.Scan(&a.Workspace, &a.Queue, &a.Step, &a.ISOWeek, &a.WeekStart, &a.Epoch, &a.N, &a.Agreements,
		&a.AuditN, &a.AuditAgree, &a.Sev1, &a.OpN, &a.OpErrors); err != nil {
		return ladder.WeekAgg{}, err
	}
	a.WeekStart = a.WeekStart.UTC()
	return a, nil
}

// LaneChanges returns a step's lane changes, oldest first.
func (s *Store) LaneChanges(ctx context.Context, k ladder.StepKey) ([]ladder.LaneChange, error) {
	if err := s.reading(); err != nil {
		return nil, fmt.Errorf("lane changes: %w", err)
	}
	rows, err := s.pool.Query(ctx, `SELECT `+laneChangeColumns+` FROM lane_changes
		WHERE workspace = $1 AND queue = $2 AND step = $3 ORDER BY at, ord`, k.Workspace, k.Queue, k.Step)
	if err != nil {
		return nil, fmt.Errorf("lane changes: %w", s.mapErr(err))
	}
	out, err := collect(rows, scanLaneChange)
	if err != nil {
		return nil, fmt.Errorf("lane changes: %w", s.mapErr(err))
	}
	return out, nil
}

func scanLaneChange(r pgx.Row) (ladder.LaneChange, error) {
	var (
		c             ladder.LaneChange
		from, to, num string
	)
	if err := r.Scan(&c.ID, &c.Workspace, &c.Queue, &c.Step, &c.At, &from, &to, &c.Rule, &num, &c.Actor, &c.Reason); err != nil {
		return ladder.LaneChange{}, err
	}
	c.From, c.To, c.At = ladder.Lane(from), ladder.Lane(to), c.At.UTC()
	if err := json.Unmarshal([]byte(num), &c.Numbers); err != nil {
		return ladder.LaneChange{}, fmt.Errorf("lane change %s numbers: %w", c.ID, err)
	}
	return c, nil
}

// Reviews returns a step's reviews matching q, newest first. A zero Limit
// means no limit.
func (s *Store) Reviews(ctx context.Context, q ladder.ReviewQuery) ([]ladder.Review, error) {
	if err := s.reading(); err != nil {
		return nil, fmt.Errorf("reviews: %w", err)
	}
	var limit any // NULL: no limit
	if q.Limit > 0 {
		limit = q.Limit
	}
	// Filters are spelled out so the planner can use the matching index and
	// stop after limit rows (the pack's recent lists stay O(limit)).
	where, args := `workspace = $1 AND queue = $2 AND step = $3`, []any{q.Key.Workspace, q.Key.Queue, q.Key.Step}
	if q.Disagreement {
		where += ` AND verdict = 'disagree'`
	}
	if q.Kind != "" {
		args = append(args, string(q.Kind))
		where += fmt.Sprintf(` AND kind = $%d`, len(args))
	}
	args = append(args, limit)
	rows, err := s.pool.Query(ctx, `SELECT `+reviewColumns+` FROM reviews WHERE `+where+`
		ORDER BY at DESC, ord DESC LIMIT `+fmt.Sprintf("$%d::bigint", len(args)), args...)
	if err != nil {
		return nil, fmt.Errorf("reviews: %w", s.mapErr(err))
	}
	out, err := collect(rows, scanReview)
	if err != nil {
		return nil, fmt.Errorf("reviews: %w", s.mapErr(err))
	}
	return out, nil
}

func scanReview(r pgx.Row) (ladder.Review, error) {
	var (
		rv            ladder.Review
		kind, verdict string
		correction    []byte
	)
	if err := r.Scan(&rv.ID, &rv.RouteID, &rv.Workspace, &rv.Queue, &rv.Step, &rv.Item, &kind, &verdict,
		&correction, &rv.Severity, &rv.OperatorError, &rv.Note, &rv.Adjudication, &rv.Reviewer, &rv.At); err != nil {
		return ladder.Review{}, err
	}
	rv.Kind, rv.Verdict, rv.At = ladder.ReviewKind(kind), ladder.Verdict(verdict), rv.At.UTC()
	if len(correction) > 0 {
		rv.Correction = json.RawMessage(correction)
	}
	return rv, nil
}

// RecordOutcome stores an outcome, counts it, and appends audit.
func (s *Store) RecordOutcome(ctx context.Context, o ladder.Outcome, audit ladder.AuditEntry) error {
	err := s.write(ctx, func(w *wtx) error {
		b := &pgx.Batch{}
		w.queueOutcome(b, o)
		if err := w.sendBatch(b); err != nil {
			return err
		}
		return w.appendAudit(nil, audit)
	})
	if err != nil {
		return fmt.Errorf("record outcome: %w", err)
	}
	return nil
}

// queueOutcome queues the statements that store and count an outcome.
func (w *wtx) queueOutcome(b *pgx.Batch, o ladder.Outcome) {
	if o.ID == "" {
		o.ID = ladder.NewID("oc")
	}
	if o.At.IsZero() {
		o.At = w.s.now()
	}
	b.Queue(`INSERT INTO outcomes (id, workspace, queue, step, item, handled_by, ok, at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		o.ID, o.Workspace, o.Queue, o.Step, o.Item, o.HandledBy, o.OK, normTime(o.At))
	b.Queue(`INSERT INTO outcome_counts AS c (workspace, queue, step, handled_by, n, failures) VALUES ($1, $2, $3, $4, 1, $5)
		ON CONFLICT (workspace, queue, step, handled_by) DO UPDATE SET n = c.n + 1, failures = c.failures + excluded.failures`,
		o.Workspace, o.Queue, o.Step, o.HandledBy, boolInt(!o.OK))
}

// sendBatch runs the queued statements in one round trip and returns the
// error of the first that fails (closing the results reads them all).
func (w *wtx) sendBatch(b *pgx.Batch) error {
	if b.Len() == 0 {
		return nil
	}
	if err := w.flushRoutes(); err != nil {
		return err
	}
	return w.tx.SendBatch(w.ctx, b).Close()
}

// OutcomeCounts returns the outcome test's counts for a step.
func (s *Store) OutcomeCounts(ctx context.Context, k ladder.StepKey) (ladder.OutcomeCounts, error) {
	if err := s.reading(); err != nil {
		return ladder.OutcomeCounts{}, fmt.Errorf("outcome counts: %w", err)
	}
	rows, err := s.pool.Query(ctx, `SELECT handled_by, n, failures FROM outcome_counts
		WHERE workspace = $1 AND queue = $2 AND step = $3`, k.Workspace, k.Queue, k.Step)
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
	if err := s.reading(); err != nil {
		return nil, fmt.Errorf("outcomes: %w", err)
	}
	rows, err := s.pool.Query(ctx, `SELECT id, workspace, queue, step, item, handled_by, ok, at FROM outcomes
		WHERE workspace = $1 AND queue = $2 AND step = $3 ORDER BY at, id`, k.Workspace, k.Queue, k.Step)
	if err != nil {
		return nil, fmt.Errorf("outcomes: %w", s.mapErr(err))
	}
	out, err := collect(rows, func(r pgx.Row) (ladder.Outcome, error) {
		var o ladder.Outcome
		err := r.Scan(&o.ID, &o.Workspace, &o.Queue, &o.Step, &o.Item, &o.HandledBy, &o.OK, &o.At)
		o.At = o.At.UTC()
		return o, err
	})
	if err != nil {
		return nil, fmt.Errorf("outcomes: %w", s.mapErr(err))
	}
	return out, nil
}

// ImportRecords runs fn in one transaction of a batch; an error from fn
// rolls back everything it wrote (the op's savepoint), and subscribers hear
// of the steps it moved once it commits.
func (s *Store) ImportRecords(ctx context.Context, fn func(tx ladder.ImportTx) error) error {
	err := s.write(ctx, func(w *wtx) error { return fn(w) })
	if err != nil {
		return fmt.Errorf("import records: %w", err)
	}
	return nil
}

// InsertRoute stores a route; the item's route of the same lane epoch is a
// constraint error (ErrConflict).
func (w *wtx) InsertRoute(r ladder.Route) error {
	q, args := insertRouteSQL(r, "")
	_, err := w.exec(q, args...)
	return w.s.mapErr(err)
}

// InsertOutcome stores and counts an outcome.
func (w *wtx) InsertOutcome(o ladder.Outcome) error {
	b := &pgx.Batch{}
	w.queueOutcome(b, o)
	return w.sendBatch(b)
}

// StepRecord returns the step's latest review or lane change time and
// its outcome counts, inside the write transaction.
func (w *wtx) StepRecord(k ladder.StepKey) (ladder.StepRecord, error) {
	var (
		rec    ladder.StepRecord
		rv, lc *time.Time
		an, af int
		pn, pf int
	)
	if err := w.queryRow(`SELECT (SELECT MAX(at) FROM reviews WHERE workspace = $1 AND queue = $2 AND step = $3),
		(SELECT MAX(at) FROM lane_changes WHERE workspace = $1 AND queue = $2 AND step = $3)`,
		k.Workspace, k.Queue, k.Step).Scan(&rv, &lc); err != nil {
		return rec, err
	}
	for _, t := range []*time.Time{rv, lc} {
		if t != nil && (!rec.Has || t.After(rec.Latest)) {
			rec.Latest, rec.Has = ladder.NormTime(*t), true
		}
	}
	if err := w.queryRow(`SELECT COALESCE(SUM(CASE WHEN handled_by = 'agent' THEN n END), 0)::int, COALESCE(SUM(CASE WHEN handled_by = 'agent' THEN failures END), 0)::int,
		COALESCE(SUM(CASE WHEN handled_by = 'person' THEN n END), 0)::int, COALESCE(SUM(CASE WHEN handled_by = 'person' THEN failures END), 0)::int
		FROM outcome_counts WHERE workspace = $1 AND queue = $2 AND step = $3`, k.Workspace, k.Queue, k.Step).Scan(&an, &af, &pn, &pf); err != nil {
		return rec, err
	}
	rec.Outcomes.Add(ladder.HandledByAgent, an, af)
	rec.Outcomes.Add(ladder.HandledByPerson, pn, pf)
	return rec, nil
}

// ReviewedRoute returns the latest reviewed route of the item at the step.
func (w *wtx) ReviewedRoute(k ladder.StepKey, item string) (string, bool, error) {
	var id string
	err := w.queryRow(`SELECT route_id FROM reviews WHERE workspace = $1 AND queue = $2 AND step = $3 AND item = $4
		ORDER BY at DESC, id DESC LIMIT 1`, k.Workspace, k.Queue, k.Step, item).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	return id, err == nil, err
}

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

var (
	_ ladder.ApprovalStore = (*Store)(nil)
	_ ladder.CallStore     = (*Store)(nil)
)

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// approvalCols are the columns an approval is read from: its seq, its doc,
// and whether it is pending at or past its deadline by the database's
// clock, which every replica shares (see ladder.DueApproval).
const approvalCols = `seq, doc, (status = 'pending' AND expires_at <= clock_timestamp()) IS TRUE`

func scanApproval(r pgx.Row) (ladder.DueApproval, error) {
	var (
		d   ladder.DueApproval
		seq int64
		doc []byte
		err error
	)
	if err := r.Scan(&seq, &doc, &d.Due); err != nil {
		return d, err
	}
	d.Approval, err = ladder.DecodeApproval(seq, doc)
	return d, err
}

// pendingLockNamespace is the first key of the advisory lock that
// serializes, per requesting key, the creation of pending approvals
// ("lapp").
const pendingLockNamespace = 0x6c617070

// CreateApproval stores a new approval, or returns the one with the same
// idempotency key. A pending one is restamped with the database's clock
// and, when a.MaxPending is set, counted against its key's cap under a
// transaction-scoped advisory lock on the key, so the count and the insert
// are one step across replicas: the next creation for the key, on any
// replica, waits until this transaction has committed and then counts this
// row. Inside a batch the lock is re-entrant, so ops for one key never wait
// on each other; batches of two replicas that lock two keys in opposite
// orders deadlock, and PostgreSQL aborts one, which runs again (runBatch).
//
// A shadow record of a step is counted against a.MaxShadow the same way,
// under the same lock. Whether it is open (its route unreviewed) is read
// under a share lock on the step's state row, which RecordReview locks for
// update: a review and a shadow record of its step never commit unseen by
// each other, so no record stays open after its route is reviewed.
func (s *Store) CreateApproval(ctx context.Context, a ladder.Approval, audit ladder.AuditEntry) (ladder.Approval, bool, error) {
	a, caps := a.ForCreate()
	capped := caps.Capped(a)
	var (
		got     ladder.Approval
		created bool
	)
	err := s.write(ctx, func(w *wtx) error {
		if capped {
			// Taken before anything is read: in READ COMMITTED each later
			// statement sees what the previous holder committed.
			if _, err := w.exec(`SELECT pg_advisory_xact_lock($1, hashtext($2))`, pendingLockNamespace,
				s.schema+"\n"+a.Workspace+"\n"+a.RequestedBy); err != nil {
				return err
			}
		}
		if a.IdempotencyKey != "" {
			existing, err := scanApproval(w.queryRow(`SELECT `+approvalCols+` FROM approvals WHERE workspace = $1 AND capability = $2 AND dedupe_key = $3`,
				a.Workspace, a.Capability, a.IdempotencyKey))
			if err == nil {
				got, created = existing.Approval, false
				if existing.Due {
					got, err = w.settleExisting(got)
				}
				return err
			}
			if !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
		}
		b := a
		if b.Status == ladder.ApprovalPending {
			var now time.Time
			if !capped {
				if err := w.queryRow(`SELECT clock_timestamp()`).Scan(&now); err != nil {
					return err
				}
			} else {
				var n int
				if err := w.queryRow(`SELECT t.now, (SELECT count(*) FROM approvals WHERE workspace = $1 AND requested_by = $2
					AND status = 'pending' AND (expires_at IS NULL OR expires_at > t.now)) FROM (SELECT clock_timestamp() AS now) t`,
					b.Workspace, b.RequestedBy).Scan(&now, &n); err != nil {
					return err
				}
				if err := caps.CheckPending(b, n); err != nil {
					return err
				}
			}
			b.Restamp(now)
		}
		var open string
		if caps.ShadowStep != "" {
			if _, err := w.exec(`SELECT 1 FROM step_states WHERE workspace = $1 AND queue = $2 AND step = $3 FOR KEY SHARE`,
				b.Workspace, b.Queue, b.Step); err != nil {
				return err
			}
			var err error
			if open, err = caps.OpenShadow(w, b); err != nil {
				return err
			}
		}
		doc, err := json.Marshal(b)
		if err != nil {
			return err
		}
		var seq int64
		err = w.queryRow(`INSERT INTO approvals (id, workspace, capability, status, requested_by, dedupe_key, expires_at, route_id, open_shadow, doc)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT (workspace, capability, dedupe_key) WHERE dedupe_key IS NOT NULL DO NOTHING RETURNING seq`,
			b.ID, b.Workspace, b.Capability, string(b.Status), b.RequestedBy, nullable(b.IdempotencyKey), nullTime(b.ExpiresAt), nullable(b.RouteID), nullable(open), doc).Scan(&seq)
		if errors.Is(err, pgx.ErrNoRows) {
			// Another key's request with this idempotency key committed
			// after the read above.
			existing, err := scanApproval(w.queryRow(`SELECT `+approvalCols+` FROM approvals WHERE workspace = $1 AND capability = $2 AND dedupe_key = $3`,
				a.Workspace, a.Capability, a.IdempotencyKey))
			if err != nil {
				return err
			}
			got, created = existing.Approval, false
			if existing.Due {
				got, err = w.settleExisting(got)
			}
			return err
		}
		if err != nil {
			return err
		}
		got, created = b, true
		got.Seq = seq
		return w.appendAudit(nil, audit)
	})
	if err != nil {
		return ladder.Approval{}, false, fmt.Errorf("create approval: %w", err)
	}
	return got, created, nil
}

// RouteReviewed reports whether the route was reviewed (its counted
// review).
func (w *wtx) RouteReviewed(routeID string) (bool, error) {
	var reviewed bool
	err := w.queryRow(`SELECT EXISTS (SELECT 1 FROM reviews WHERE route_id = $1 AND counted)`, routeID).Scan(&reviewed)
	return reviewed, err
}

// OpenShadows counts a key's open shadow records of a step.
func (w *wtx) OpenShadows(workspace, requestedBy, step string) (int, error) {
	var n int
	err := w.queryRow(`SELECT count(*) FROM approvals WHERE workspace = $1 AND requested_by = $2 AND open_shadow = $3`, workspace, requestedBy, step).Scan(&n)
	return n, err
}

// closeShadow marks the shadow records of a route reviewed, so they no
// longer count against their key's cap. The caller holds the step's state
// row for update (see CreateApproval).
func (w *wtx) closeShadow(routeID string) error {
	_, err := w.exec(`UPDATE approvals SET open_shadow = NULL WHERE route_id = $1 AND open_shadow IS NOT NULL`, routeID)
	return err
}

// expireDue stores the expiry of an approval that is pending and past its
// deadline by the database's clock, with its audit record, and returns the
// approval as it then stands (unchanged when it is not due). The row is
// locked first, so what is returned is what committed: a decision in
// flight on another replica commits before this looks.
//
// With skipLocked it does not wait for a row another transaction holds
// (that transaction's decision or expiry is about to commit) and reports
// it busy instead: a read must not wait on a row lock inside a batch,
// where the wait can close a lock cycle with another replica's batch
// (approvals never go away, so a row not returned is a locked one).
func (w *wtx) expireDue(workspace, id string, skipLocked bool) (a ladder.Approval, busy bool, err error) {
	var (
		d   ladder.DueApproval
		at  time.Time
		seq int64
		doc []byte
	)
	lock := `FOR UPDATE`
	if skipLocked {
		lock = `FOR UPDATE SKIP LOCKED`
	}
	err = w.queryRow(`SELECT seq, doc, (status = 'pending' AND expires_at <= clock_timestamp()) IS TRUE, clock_timestamp()
		FROM approvals WHERE id = $1 AND workspace = $2 `+lock, id, workspace).Scan(&seq, &doc, &d.Due, &at)
	switch {
	case errors.Is(err, pgx.ErrNoRows) && skipLocked:
		return ladder.Approval{}, true, nil
	case errors.Is(err, pgx.ErrNoRows):
		return ladder.Approval{}, false, ladder.ErrNotFound
	case err != nil:
		return ladder.Approval{}, false, err
	}
	if d.Approval, err = ladder.DecodeApproval(seq, doc); err != nil {
		return ladder.Approval{}, false, err
	}
	a, err = ladder.ExpireTx(w, d, at)
	return a, false, err
}

// StoreApproval stores a's status and document over the approval with a's
// seq.
func (w *wtx) StoreApproval(a ladder.Approval) error {
	doc, err := json.Marshal(a)
	if err != nil {
		return err
	}
	_, err = w.exec(`UPDATE approvals SET status = $1, doc = $2 WHERE seq = $3`, string(a.Status), doc, a.Seq)
	if err == nil {
		w.notifyApproval(a.Workspace, a.ID)
	}
	return err
}

// settleExisting stores the expiry of a repeated request's approval found
// past its deadline. If another transaction holds it, its decision or
// expiry is about to commit; the approval is answered as read.
func (w *wtx) settleExisting(a ladder.Approval) (ladder.Approval, error) {
	got, busy, err := w.expireDue(a.Workspace, a.ID, true)
	if busy {
		return a, err
	}
	return got, err
}

// settle returns what a read found, with each approval it found past its
// deadline replaced by what is stored once its expiry is: expired, or the
// decision that committed first. Reporting expired only once it is
// committed is what keeps a reader on any replica from seeing expired and
// then a decision.
func (s *Store) settle(ctx context.Context, found []ladder.DueApproval) ([]ladder.Approval, error) {
	out, due := ladder.SplitDue(found)
	if len(due) == 0 {
		return out, nil
	}
	// A row another transaction holds is skipped, not waited for inside
	// the batch; its holder commits within a batch's time, and then it is
	// looked at again.
	giveUp := time.Now().Add(batchTimeout)
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		var busy []int
		err := s.write(ctx, func(w *wtx) error {
			busy = nil // the op may run again
			for _, i := range due {
				a, locked, err := w.expireDue(found[i].Approval.Workspace, found[i].Approval.ID, true)
				if err != nil {
					return err
				}
				if locked {
					busy = append(busy, i)
					continue
				}
				out[i] = a
			}
			return nil
		})
		switch {
		case err != nil:
			return nil, fmt.Errorf("store expiry: %w", err)
		case len(busy) == 0:
			return out, nil
		case time.Now().After(giveUp):
			return nil, fmt.Errorf("store expiry: approval %s stays locked: %w", found[busy[0]].Approval.ID, ladder.ErrUnavailable)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("store expiry: %w", ctx.Err())
		case <-time.After(wait):
		}
		due = busy
	}
}

// readApproval reads one approval and settles it.
func (s *Store) readApproval(ctx context.Context, query string, args ...any) (ladder.Approval, error) {
	if err := s.reading(); err != nil {
		return ladder.Approval{}, err
	}
	d, err := scanApproval(s.pool.QueryRow(ctx, query, args...))
	if err != nil {
		return ladder.Approval{}, s.readErr(err)
	}
	out, err := s.settle(ctx, []ladder.DueApproval{d})
	if err != nil {
		return ladder.Approval{}, err
	}
	return out[0], nil
}

// GetApproval returns an approval of the workspace.
func (s *Store) GetApproval(ctx context.Context, workspace, id string) (ladder.Approval, error) {
	a, err := s.readApproval(ctx, `SELECT `+approvalCols+` FROM approvals WHERE id = $1 AND workspace = $2`, id, workspace)
	if err != nil {
		return ladder.Approval{}, fmt.Errorf("get approval: %w", err)
	}
	return a, nil
}

// ApprovalByKey returns the approval requested with an idempotency key, or
// ErrNotFound.
func (s *Store) ApprovalByKey(ctx context.Context, workspace, capability, key string) (ladder.Approval, error) {
	a, err := s.readApproval(ctx, `SELECT `+approvalCols+` FROM approvals WHERE workspace = $1 AND capability = $2 AND dedupe_key = $3`,
		workspace, capability, key)
	if err != nil {
		return ladder.Approval{}, fmt.Errorf("approval by key: %w", err)
	}
	return a, nil
}

// ListApprovals returns approvals matching q, newest first.
func (s *Store) ListApprovals(ctx context.Context, q ladder.ApprovalQuery) ([]ladder.Approval, error) {
	if err := s.reading(); err != nil {
		return nil, fmt.Errorf("list approvals: %w", err)
	}
	limit := ladder.PageLimit(q.Limit)
	where, args := `workspace = $1`, []any{q.Workspace}
	switch q.Status {
	case "":
	case ladder.ApprovalExpired:
		// Pending past the deadline is expired; the read stores it so.
		where += ` AND (status = 'expired' OR (status = 'pending' AND expires_at <= clock_timestamp()))`
	default:
		args = append(args, string(q.Status))
		where += fmt.Sprintf(` AND status = $%d`, len(args))
	}
	if q.RequestedBy != "" {
		args = append(args, q.RequestedBy)
		where += fmt.Sprintf(` AND requested_by = $%d`, len(args))
	}
	if q.BeforeSeq > 0 {
		args = append(args, q.BeforeSeq)
		where += fmt.Sprintf(` AND seq < $%d`, len(args))
	}
	args = append(args, limit)
	rows, err := s.pool.Query(ctx, `SELECT `+approvalCols+` FROM approvals WHERE `+where+fmt.Sprintf(` ORDER BY seq DESC LIMIT $%d`, len(args)), args...)
	if err != nil {
		return nil, fmt.Errorf("list approvals: %w", s.mapErr(err))
	}
	found, err := collect(rows, scanApproval)
	if err != nil {
		return nil, fmt.Errorf("list approvals: %w", s.mapErr(err))
	}
	out, err := s.settle(ctx, found)
	if err != nil {
		return nil, fmt.Errorf("list approvals: %w", err)
	}
	return out, nil
}

// UpdateApproval stores a over the approval if its status is still from.
// From pending, the database's clock decides too, inside the
// compare-and-set: a decision must come before the deadline, an expiry at
// or after it; every replica reads the same clock. A decision that comes
// too late stores the expiry (committed, so every reader agrees) and
// returns ErrExpired.
func (s *Store) UpdateApproval(ctx context.Context, a ladder.Approval, from ladder.ApprovalStatus, audit []ladder.AuditEntry) (ladder.Approval, error) {
	clock := `TRUE`
	if from == ladder.ApprovalPending {
		clock = `(expires_at IS NULL OR expires_at > clock_timestamp())`
		if a.Status == ladder.ApprovalExpired {
			clock = `expires_at <= clock_timestamp()`
		}
	}
	var late bool
	err := s.write(ctx, func(w *wtx) error {
		late = false
		doc, err := json.Marshal(a)
		if err != nil {
			return err
		}
		tag, err := w.exec(`UPDATE approvals SET status = $1, doc = $2 WHERE id = $3 AND workspace = $4 AND status = $5 AND `+clock,
			string(a.Status), doc, a.ID, a.Workspace, string(from))
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 1 {
			w.notifyApproval(a.Workspace, a.ID)
			return w.appendAudit(nil, audit...)
		}
		// Waits for the row, as the UPDATE did: this op needs the answer.
		cur, _, err := w.expireDue(a.Workspace, a.ID, false)
		switch {
		case err != nil:
			return err
		case cur.Status == ladder.ApprovalExpired && from == ladder.ApprovalPending && a.Status != ladder.ApprovalExpired:
			// Expired by this look, or before: either way the decision
			// came too late, and the expiry is what commits.
			late = true
			return nil
		case cur.Status == ladder.ApprovalExpired && from != ladder.ApprovalExpired:
			return fmt.Errorf("approval %s is expired: %w", a.ID, ladder.ErrExpired)
		case cur.Status == from && a.Status == ladder.ApprovalExpired:
			return fmt.Errorf("approval %s is not past its deadline: %w", a.ID, ladder.ErrConflict)
		}
		return fmt.Errorf("approval %s is %s, not %s: %w", a.ID, cur.Status, from, ladder.ErrConflict)
	})
	if err == nil && late {
		err = fmt.Errorf("approval %s passed its deadline before the decision: %w", a.ID, ladder.ErrExpired)
	}
	if err != nil {
		return ladder.Approval{}, fmt.Errorf("update approval: %w", err)
	}
	return a, nil
}

func scanCall(r pgx.Row) (ladder.Call, error) {
	var doc []byte
	if err := r.Scan(&doc); err != nil {
		return ladder.Call{}, err
	}
	return ladder.DecodeCall(doc)
}

// BeginCall records a running call, or returns the call with the same
// idempotency key.
func (s *Store) BeginCall(ctx context.Context, c ladder.Call, audit ladder.AuditEntry) (ladder.Call, bool, error) {
	c.StartedAt = normTime(c.StartedAt)
	var (
		got     ladder.Call
		created bool
		recs    []ladder.AuditRecord
	)
	err := s.write(ctx, func(w *wtx) error { return w.beginCall(c, audit, &got, &created, &recs) })
	if err != nil {
		return ladder.Call{}, false, fmt.Errorf("begin call: %w", err)
	}
	if created && len(recs) > 0 {
		got.AuditSeq = recs[0].Seq
	}
	return got, created, nil
}

// beginCall is BeginCall's op (and RouteAndBeginCall's second part); recs
// receives the call's audit record once the batch has appended it.
func (w *wtx) beginCall(c ladder.Call, audit ladder.AuditEntry, got *ladder.Call, created *bool, recs *[]ladder.AuditRecord) error {
	doc, err := c.AppendJSON(nil)
	if err != nil {
		return err
	}
	// started_at is the database's clock, which StaleCalls measures
	// from on every replica.
	tag, err := w.exec(`INSERT INTO calls (id, workspace, capability, status, dedupe_key, started_at, doc) VALUES ($1, $2, $3, $4, $5, clock_timestamp(), $6)
		ON CONFLICT (workspace, capability, dedupe_key) WHERE dedupe_key IS NOT NULL DO NOTHING`,
		c.ID, c.Workspace, c.Capability, string(c.Status), nullable(c.IdempotencyKey), doc)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		existing, err := scanCall(w.queryRow(`SELECT doc FROM calls WHERE workspace = $1 AND capability = $2 AND dedupe_key = $3`,
			c.Workspace, c.Capability, c.IdempotencyKey))
		if err != nil {
			return err
		}
		*got, *created = existing, false
		return nil
	}
	if g := c.Guard; g != nil {
		// Key-share-lock the step's state: a lane change on any replica
		// either committed before this read (the call is refused) or
		// waits until this call has committed.
		var epoch int
		if err := w.queryRow(`SELECT lane_epoch FROM step_states WHERE workspace = $1 AND queue = $2 AND step = $3 FOR KEY SHARE`,
			g.Key.Workspace, g.Key.Queue, g.Key.Step).Scan(&epoch); err != nil {
			return fmt.Errorf("step state %s/%s: %w", g.Key.Queue, g.Key.Step, err)
		}
		if epoch != g.LaneEpoch {
			return fmt.Errorf("call routed in lane epoch %d, the step is in %d: %w", g.LaneEpoch, epoch, ladder.ErrLaneChanged)
		}
	}
	*got, *created = c, true
	return w.appendAudit(recs, audit)
}

// FinishCall stores a running call's outcome.
func (s *Store) FinishCall(ctx context.Context, c ladder.Call, audit ladder.AuditEntry) (ladder.Call, error) {
	if err := s.setCall(ctx, c, ladder.CallRunning, audit); err != nil {
		return ladder.Call{}, fmt.Errorf("finish call: %w", err)
	}
	return c, nil
}

// CallByKey returns the call made with an idempotency key, or ErrNotFound.
func (s *Store) CallByKey(ctx context.Context, workspace, capability, key string) (ladder.Call, error) {
	if err := s.reading(); err != nil {
		return ladder.Call{}, fmt.Errorf("call by key: %w", err)
	}
	c, err := scanCall(s.pool.QueryRow(ctx, `SELECT doc FROM calls WHERE workspace = $1 AND capability = $2 AND dedupe_key = $3`,
		workspace, capability, key))
	if err != nil {
		return ladder.Call{}, fmt.Errorf("call by key: %w", s.readErr(err))
	}
	return c, nil
}

// GetCall returns a call of the workspace, or ErrNotFound.
func (s *Store) GetCall(ctx context.Context, workspace, id string) (ladder.Call, error) {
	if err := s.reading(); err != nil {
		return ladder.Call{}, fmt.Errorf("get call: %w", err)
	}
	c, err := scanCall(s.pool.QueryRow(ctx, `SELECT doc FROM calls WHERE id = $1 AND workspace = $2`, id, workspace))
	if err != nil {
		return ladder.Call{}, fmt.Errorf("get call: %w", s.readErr(err))
	}
	return c, nil
}

package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/internal/bufpool"
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
// and whether it is pending at or past its deadline by the store's clock,
// the query's first argument (see ladder.DueApproval).
const approvalCols = `seq, doc, CASE WHEN status = 'pending' AND expires_at <= ? THEN 1 ELSE 0 END`

func scanApproval(r scanner) (ladder.DueApproval, error) {
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

// deadline is an approval's expires_at column: NULL when it never expires.
func deadline(a ladder.Approval) any {
	if a.ExpiresAt.IsZero() {
		return nil
	}
	return fmtTime(a.ExpiresAt)
}

// CreateApproval stores a new approval, or returns the one with the same
// idempotency key. A pending one is restamped with the store's clock and,
// when a.MaxPending is set, counted against its key's cap inside the write;
// a shadow record of a step is counted against a.MaxShadow likewise: the
// single writer makes the count and the insert one step.
func (s *Store) CreateApproval(ctx context.Context, a ladder.Approval, audit ladder.AuditEntry) (ladder.Approval, bool, error) {
	a, caps := a.ForCreate()
	var (
		got     ladder.Approval
		created bool
	)
	err := s.write(ctx, func(w *wtx) error {
		now := normTime(s.now())
		if a.IdempotencyKey != "" {
			existing, err := scanApproval(w.queryRow(`SELECT `+approvalCols+` FROM approvals WHERE workspace = ? AND capability = ? AND dedupe_key = ?`,
				fmtTime(now), a.Workspace, a.Capability, a.IdempotencyKey))
			if err == nil {
				got = existing.Approval
				if existing.Due {
					got, err = w.expireDue(got.Workspace, got.ID, now)
				}
				return err
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return err
			}
		}
		b := a
		b.Restamp(now)
		if caps.CountsPending(b) {
			var n int
			if err := w.queryRow(`SELECT count(*) FROM approvals WHERE workspace = ? AND requested_by = ? AND status = 'pending' AND (expires_at IS NULL OR expires_at > ?)`,
				b.Workspace, b.RequestedBy, fmtTime(now)).Scan(&n); err != nil {
				return err
			}
			if err := caps.CheckPending(b, n); err != nil {
				return err
			}
		}
		var open string
		if caps.ShadowStep != "" {
			var err error
			if open, err = caps.OpenShadow(w, b); err != nil {
				return err
			}
		}
		doc, err := json.Marshal(b)
		if err != nil {
			return err
		}
		res, err := w.exec(`INSERT INTO approvals (id, workspace, capability, status, requested_by, dedupe_key, expires_at, route_id, open_shadow, doc) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			b.ID, b.Workspace, b.Capability, string(b.Status), b.RequestedBy, nullable(b.IdempotencyKey), deadline(b), nullable(b.RouteID), nullable(open), doc)
		if err != nil {
			return err
		}
		if b.Seq, err = res.LastInsertId(); err != nil {
			return err
		}
		if _, err := w.appendAudit(audit); err != nil {
			return err
		}
		got, created = b, true
		return nil
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
	err := w.queryRow(`SELECT EXISTS (SELECT 1 FROM reviews WHERE route_id = ?)`, routeID).Scan(&reviewed)
	return reviewed, err
}

// OpenShadows counts a key's open shadow records of a step.
func (w *wtx) OpenShadows(workspace, requestedBy, step string) (int, error) {
	var n int
	err := w.queryRow(`SELECT count(*) FROM approvals WHERE workspace = ? AND requested_by = ? AND open_shadow = ?`, workspace, requestedBy, step).Scan(&n)
	return n, err
}

// closeShadow marks the shadow records of a route reviewed, so they no
// longer count against their key's cap.
func (w *wtx) closeShadow(routeID string) error {
	_, err := w.exec(`UPDATE approvals SET open_shadow = NULL WHERE route_id = ? AND open_shadow IS NOT NULL`, routeID)
	return err
}

// expireDue stores the expiry of an approval that is pending and past its
// deadline at now, with its audit record (ladder.ExpireTx), and returns the
// approval as it then stands (unchanged when it is not due).
func (w *wtx) expireDue(workspace, id string, now time.Time) (ladder.Approval, error) {
	d, err := scanApproval(w.queryRow(`SELECT `+approvalCols+` FROM approvals WHERE id = ? AND workspace = ?`, fmtTime(now), id, workspace))
	if errors.Is(err, sql.ErrNoRows) {
		return ladder.Approval{}, ladder.ErrNotFound
	}
	if err != nil {
		return ladder.Approval{}, err
	}
	return ladder.ExpireTx(w, d, now)
}

// StoreApproval stores a's status and document over the approval with a's
// seq.
func (w *wtx) StoreApproval(a ladder.Approval) error {
	doc, err := json.Marshal(a)
	if err != nil {
		return err
	}
	_, err = w.exec(`UPDATE approvals SET status = ?, doc = ? WHERE seq = ?`, string(a.Status), doc, a.Seq)
	return err
}

// settle returns what a read found, with each approval it found past its
// deadline replaced by what is stored once its expiry is: expired, or the
// decision that committed first. Reporting expired only once it is
// committed is what keeps a reader from seeing expired and then a decision.
func (s *Store) settle(ctx context.Context, found []ladder.DueApproval) ([]ladder.Approval, error) {
	out, due := ladder.SplitDue(found)
	if len(due) == 0 {
		return out, nil
	}
	err := s.write(ctx, func(w *wtx) error {
		now := normTime(s.now())
		for _, i := range due {
			a, err := w.expireDue(found[i].Approval.Workspace, found[i].Approval.ID, now)
			if err != nil {
				return err
			}
			out[i] = a
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store expiry: %w", err)
	}
	return out, nil
}

// readApproval reads one approval and settles it.
func (s *Store) readApproval(ctx context.Context, query string, args ...any) (ladder.Approval, error) {
	d, err := scanApproval(s.readers.QueryRowContext(ctx, query, append([]any{fmtTime(s.now())}, args...)...))
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
	a, err := s.readApproval(ctx, `SELECT `+approvalCols+` FROM approvals WHERE id = ? AND workspace = ?`, id, workspace)
	if err != nil {
		return ladder.Approval{}, fmt.Errorf("get approval: %w", err)
	}
	return a, nil
}

// ApprovalByKey returns the approval requested with an idempotency key, or
// ErrNotFound.
func (s *Store) ApprovalByKey(ctx context.Context, workspace, capability, key string) (ladder.Approval, error) {
	a, err := s.readApproval(ctx, `SELECT `+approvalCols+` FROM approvals WHERE workspace = ? AND capability = ? AND dedupe_key = ?`,
		workspace, capability, key)
	if err != nil {
		return ladder.Approval{}, fmt.Errorf("approval by key: %w", err)
	}
	return a, nil
}

// ListApprovals returns approvals matching q, newest first.
func (s *Store) ListApprovals(ctx context.Context, q ladder.ApprovalQuery) ([]ladder.Approval, error) {
	limit := ladder.PageLimit(q.Limit)
	now := fmtTime(s.now())
	where, args := `workspace = ?`, []any{now, q.Workspace}
	switch q.Status {
	case "":
	case ladder.ApprovalExpired:
		// Pending past the deadline is expired; the read stores it so.
		where += ` AND (status = 'expired' OR (status = 'pending' AND expires_at <= ?))`
		args = append(args, now)
	default:
		where += ` AND status = ?`
		args = append(args, string(q.Status))
	}
	if q.RequestedBy != "" {
		where += ` AND requested_by = ?`
		args = append(args, q.RequestedBy)
	}
	if q.BeforeSeq > 0 {
		where += ` AND seq < ?`
		args = append(args, q.BeforeSeq)
	}
	rows, err := s.readers.QueryContext(ctx, `SELECT `+approvalCols+` FROM approvals WHERE `+where+` ORDER BY seq DESC LIMIT ?`, append(args, limit)...)
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
// From pending, the store's clock decides too: a decision must come before
// the deadline, an expiry at or after it. A decision that comes too late
// stores the expiry (committed, so every reader agrees) and returns
// ErrExpired.
func (s *Store) UpdateApproval(ctx context.Context, a ladder.Approval, from ladder.ApprovalStatus, audit []ladder.AuditEntry) (ladder.Approval, error) {
	var late bool
	err := s.write(ctx, func(w *wtx) error {
		late = false
		now := normTime(s.now())
		var (
			cur string
			due bool
		)
		if err := w.queryRow(`SELECT status, CASE WHEN expires_at <= ? THEN 1 ELSE 0 END FROM approvals WHERE id = ? AND workspace = ?`,
			fmtTime(now), a.ID, a.Workspace).Scan(&cur, &due); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return ladder.ErrNotFound
			}
			return err
		}
		switch {
		case cur != string(from) && cur == string(ladder.ApprovalExpired):
			return fmt.Errorf("approval %s is expired: %w", a.ID, ladder.ErrExpired)
		case cur != string(from):
			return fmt.Errorf("approval %s is %s, not %s: %w", a.ID, cur, from, ladder.ErrConflict)
		case from == ladder.ApprovalPending && a.Status == ladder.ApprovalExpired && !due:
			return fmt.Errorf("approval %s is not past its deadline: %w", a.ID, ladder.ErrConflict)
		case from == ladder.ApprovalPending && a.Status != ladder.ApprovalExpired && due:
			late = true
			_, err := w.expireDue(a.Workspace, a.ID, now)
			return err
		}
		doc, err := json.Marshal(a)
		if err != nil {
			return err
		}
		if _, err := w.exec(`UPDATE approvals SET status = ?, doc = ? WHERE id = ? AND workspace = ?`, string(a.Status), doc, a.ID, a.Workspace); err != nil {
			return err
		}
		_, err = w.appendAudit(audit...)
		return err
	})
	if err == nil && late {
		err = fmt.Errorf("approval %s passed its deadline before the decision: %w", a.ID, ladder.ErrExpired)
	}
	if err != nil {
		return ladder.Approval{}, fmt.Errorf("update approval: %w", err)
	}
	return a, nil
}

func scanCall(r scanner) (ladder.Call, error) {
	var doc []byte
	if err := r.Scan(&doc); err != nil {
		return ladder.Call{}, err
	}
	return ladder.DecodeCall(doc)
}

// BeginCall records a running call, or returns the call with the same
// idempotency key. A guarded call is recorded only while its step is still
// in the lane epoch it was routed in (else ErrLaneChanged).
func (s *Store) BeginCall(ctx context.Context, c ladder.Call, audit ladder.AuditEntry) (ladder.Call, bool, error) {
	c.StartedAt = normTime(c.StartedAt)
	rc, err := s.readyCall(c, audit)
	if err != nil {
		return ladder.Call{}, false, fmt.Errorf("begin call: %w", err)
	}
	var (
		got     ladder.Call
		created bool
	)
	err = s.writeCall(ctx, func(w *wtx) error { return w.beginCall(rc, &got, &created) })
	rc.release()
	if err != nil {
		return ladder.Call{}, false, fmt.Errorf("begin call: %w", err)
	}
	s.began(got, created)
	return got, created, nil
}

// readyCall is a call to store with its document marshalled and its audit
// entry made ready, in the caller's goroutine: the one writer only runs
// statements (as readyAudit is for a route).
//
// The document is built in a pooled buffer, which release returns once
// the write is over: the driver copies a bound blob into SQLite's memory
// when the statement runs, and Store.write returns only after its op has
// run (or was never queued), so nothing reads the buffer after that.
type readyCall struct {
	c     ladder.Call
	doc   []byte
	buf   *[]byte
	audit []readyEntry
}

func (s *Store) readyCall(c ladder.Call, audit ladder.AuditEntry) (readyCall, error) {
	bp := callDocs.Get()
	doc, err := c.AppendJSON(*bp)
	if err != nil {
		return readyCall{}, err
	}
	ready, err := s.readyAudit([]ladder.AuditEntry{audit})
	if err != nil {
		return readyCall{}, err
	}
	return readyCall{c: c, doc: doc, buf: bp, audit: ready}, nil
}

// release returns rc's document buffer to callDocs, after the write that
// stored it; rc.doc is not to be read again.
func (rc *readyCall) release() {
	callDocs.Put(rc.buf, rc.doc)
	rc.buf, rc.doc = nil, nil
}

// callDocs holds the buffers calls' documents are built in (a few KiB
// each, two a proxied call; one past 64 KiB is not kept).
var callDocs = bufpool.New(2<<10, 64<<10)

// beginCall is BeginCall's op (and RouteAndBeginCall's second part).
func (w *wtx) beginCall(rc readyCall, got *ladder.Call, created *bool) error {
	c := rc.c
	if c.IdempotencyKey != "" {
		existing, err := scanCall(w.queryRow(`SELECT doc FROM calls WHERE workspace = ? AND capability = ? AND dedupe_key = ?`,
			c.Workspace, c.Capability, c.IdempotencyKey))
		if err == nil {
			*got = existing
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
	}
	if g := c.Guard; g != nil {
		var epoch int
		if err := w.queryRow(`SELECT lane_epoch FROM step_states WHERE workspace = ? AND queue = ? AND step = ?`,
			g.Key.Workspace, g.Key.Queue, g.Key.Step).Scan(&epoch); err != nil {
			return fmt.Errorf("step state %s/%s: %w", g.Key.Queue, g.Key.Step, err)
		}
		if epoch != g.LaneEpoch {
			return fmt.Errorf("call routed in lane epoch %d, the step is in %d: %w", g.LaneEpoch, epoch, ladder.ErrLaneChanged)
		}
	}
	// started_at is the store's clock, which StaleCalls measures from.
	if _, err := w.exec(`INSERT INTO calls (id, workspace, capability, status, dedupe_key, started_at, doc) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		c.ID, c.Workspace, c.Capability, string(c.Status), nullable(c.IdempotencyKey), fmtTime(w.s.now()), rc.doc); err != nil {
		return err
	}
	recs, err := w.appendReady(rc.audit)
	if err != nil {
		return err
	}
	*got, *created = c, true
	// The audit seq is reported to the caller that created the call; it
	// is not part of the stored record (a backend may seal the chain
	// only at commit).
	if len(recs) > 0 {
		got.AuditSeq = recs[0].Seq
	}
	return nil
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
	c, err := scanCall(s.readers.QueryRowContext(ctx, `SELECT doc FROM calls WHERE workspace = ? AND capability = ? AND dedupe_key = ?`,
		workspace, capability, key))
	if err != nil {
		return ladder.Call{}, fmt.Errorf("call by key: %w", s.readErr(err))
	}
	return c, nil
}

// GetCall returns a call of the workspace, or ErrNotFound.
func (s *Store) GetCall(ctx context.Context, workspace, id string) (ladder.Call, error) {
	c, err := scanCall(s.readers.QueryRowContext(ctx, `SELECT doc FROM calls WHERE id = ? AND workspace = ?`, id, workspace))
	if err != nil {
		return ladder.Call{}, fmt.Errorf("get call: %w", s.readErr(err))
	}
	return c, nil
}

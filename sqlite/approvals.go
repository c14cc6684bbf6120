package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

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

// CreateApproval stores a new approval, or returns the one with the same
// idempotency key.
func (s *Store) CreateApproval(ctx context.Context, a ladder.Approval, audit ladder.AuditEntry) (ladder.Approval, bool, error) {
	a.CreatedAt, a.ExpiresAt = normTime(a.CreatedAt), normTime(a.ExpiresAt)
	var (
		got     ladder.Approval
		created bool
	)
	err := s.write(ctx, func(w *wtx) error {
		if a.IdempotencyKey != "" {
			existing, err := scanApproval(w.queryRow(`SELECT seq, doc FROM approvals WHERE workspace = ? AND capability = ? AND dedupe_key = ?`,
				a.Workspace, a.Capability, a.IdempotencyKey))
			if err == nil {
				got = existing
				return nil
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return err
			}
		}
		doc, err := json.Marshal(a)
		if err != nil {
			return err
		}
		res, err := w.exec(`INSERT INTO approvals (id, workspace, capability, status, requested_by, dedupe_key, doc) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			a.ID, a.Workspace, a.Capability, string(a.Status), a.RequestedBy, nullable(a.IdempotencyKey), doc)
		if err != nil {
			return err
		}
		if a.Seq, err = res.LastInsertId(); err != nil {
			return err
		}
		if _, err := w.appendAudit(audit); err != nil {
			return err
		}
		got, created = a, true
		return nil
	})
	if err != nil {
		return ladder.Approval{}, false, fmt.Errorf("create approval: %w", err)
	}
	return got, created, nil
}

func scanApproval(r scanner) (ladder.Approval, error) {
	var (
		a   ladder.Approval
		seq int64
		doc []byte
	)
	if err := r.Scan(&seq, &doc); err != nil {
		return a, err
	}
	if err := json.Unmarshal(doc, &a); err != nil {
		return a, fmt.Errorf("stored approval: %w", err)
	}
	a.Seq = seq
	return a, nil
}

// GetApproval returns an approval of the workspace.
func (s *Store) GetApproval(ctx context.Context, workspace, id string) (ladder.Approval, error) {
	a, err := scanApproval(s.readers.QueryRowContext(ctx, `SELECT seq, doc FROM approvals WHERE id = ? AND workspace = ?`, id, workspace))
	if err != nil {
		return ladder.Approval{}, fmt.Errorf("get approval: %w", s.readErr(err))
	}
	return a, nil
}

// ApprovalByKey returns the approval requested with an idempotency key, or
// ErrNotFound.
func (s *Store) ApprovalByKey(ctx context.Context, workspace, capability, key string) (ladder.Approval, error) {
	a, err := scanApproval(s.readers.QueryRowContext(ctx, `SELECT seq, doc FROM approvals WHERE workspace = ? AND capability = ? AND dedupe_key = ?`,
		workspace, capability, key))
	if err != nil {
		return ladder.Approval{}, fmt.Errorf("approval by key: %w", s.readErr(err))
	}
	return a, nil
}

// ListApprovals returns approvals matching q, newest first.
func (s *Store) ListApprovals(ctx context.Context, q ladder.ApprovalQuery) ([]ladder.Approval, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = 50
	}
	where, args := `workspace = ?`, []any{q.Workspace}
	if q.Status != "" {
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
	rows, err := s.readers.QueryContext(ctx, `SELECT seq, doc FROM approvals WHERE `+where+` ORDER BY seq DESC LIMIT ?`, append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("list approvals: %w", s.mapErr(err))
	}
	out, err := collect(rows, scanApproval)
	if err != nil {
		return nil, fmt.Errorf("list approvals: %w", s.mapErr(err))
	}
	return out, nil
}

// UpdateApproval stores a over the approval if its status is still from.
func (s *Store) UpdateApproval(ctx context.Context, a ladder.Approval, from ladder.ApprovalStatus, audit []ladder.AuditEntry) (ladder.Approval, error) {
	err := s.write(ctx, func(w *wtx) error {
		var cur string
		if err := w.queryRow(`SELECT status FROM approvals WHERE id = ? AND workspace = ?`, a.ID, a.Workspace).Scan(&cur); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return ladder.ErrNotFound
			}
			return err
		}
		if cur != string(from) {
			return fmt.Errorf("approval %s is %s, not %s: %w", a.ID, cur, from, ladder.ErrConflict)
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
	if err != nil {
		return ladder.Approval{}, fmt.Errorf("update approval: %w", err)
	}
	return a, nil
}

func scanCall(r scanner) (ladder.Call, error) {
	var (
		c   ladder.Call
		doc []byte
	)
	if err := r.Scan(&doc); err != nil {
		return c, err
	}
	if err := json.Unmarshal(doc, &c); err != nil {
		return c, fmt.Errorf("stored call: %w", err)
	}
	return c, nil
}

// BeginCall records a running call, or returns the call with the same
// idempotency key. A guarded call is recorded only while its step is still
// in the lane epoch it was routed in (else ErrLaneChanged).
func (s *Store) BeginCall(ctx context.Context, c ladder.Call, audit ladder.AuditEntry) (ladder.Call, bool, error) {
	c.StartedAt = normTime(c.StartedAt)
	var (
		got     ladder.Call
		created bool
	)
	err := s.write(ctx, func(w *wtx) error {
		if c.IdempotencyKey != "" {
			existing, err := scanCall(w.queryRow(`SELECT doc FROM calls WHERE workspace = ? AND capability = ? AND dedupe_key = ?`,
				c.Workspace, c.Capability, c.IdempotencyKey))
			if err == nil {
				got = existing
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
		doc, err := json.Marshal(c)
		if err != nil {
			return err
		}
		if _, err := w.exec(`INSERT INTO calls (id, workspace, capability, status, dedupe_key, doc) VALUES (?, ?, ?, ?, ?, ?)`,
			c.ID, c.Workspace, c.Capability, string(c.Status), nullable(c.IdempotencyKey), doc); err != nil {
			return err
		}
		recs, err := w.appendAudit(audit)
		if err != nil {
			return err
		}
		got, created = c, true
		// The audit seq is reported to the caller that created the call; it
		// is not part of the stored record (a backend may seal the chain
		// only at commit).
		if len(recs) > 0 {
			got.AuditSeq = recs[0].Seq
		}
		return nil
	})
	if err != nil {
		return ladder.Call{}, false, fmt.Errorf("begin call: %w", err)
	}
	return got, created, nil
}

// FinishCall stores a running call's outcome.
func (s *Store) FinishCall(ctx context.Context, c ladder.Call, audit ladder.AuditEntry) (ladder.Call, error) {
	err := s.write(ctx, func(w *wtx) error {
		doc, err := json.Marshal(c)
		if err != nil {
			return err
		}
		res, err := w.exec(`UPDATE calls SET status = ?, doc = ? WHERE id = ? AND workspace = ? AND status = ?`,
			string(c.Status), doc, c.ID, c.Workspace, string(ladder.CallRunning))
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return fmt.Errorf("call %s is not running: %w", c.ID, ladder.ErrConflict)
		}
		_, err = w.appendAudit(audit)
		return err
	})
	if err != nil {
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

package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

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

func scanApproval(r pgx.Row) (ladder.Approval, error) {
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

// CreateApproval stores a new approval, or returns the one with the same
// idempotency key.
func (s *Store) CreateApproval(ctx context.Context, a ladder.Approval, audit ladder.AuditEntry) (ladder.Approval, bool, error) {
	a.CreatedAt, a.ExpiresAt = normTime(a.CreatedAt), normTime(a.ExpiresAt)
	var (
		got     ladder.Approval
		created bool
	)
	err := s.write(ctx, func(w *wtx) error {
		doc, err := json.Marshal(a)
		if err != nil {
			return err
		}
		var seq int64
		err = w.queryRow(`INSERT INTO approvals (id, workspace, capability, status, requested_by, dedupe_key, doc)
			VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (workspace, capability, dedupe_key) WHERE dedupe_key IS NOT NULL DO NOTHING RETURNING seq`,
			a.ID, a.Workspace, a.Capability, string(a.Status), a.RequestedBy, nullable(a.IdempotencyKey), doc).Scan(&seq)
		if errors.Is(err, pgx.ErrNoRows) {
			existing, err := scanApproval(w.queryRow(`SELECT seq, doc FROM approvals WHERE workspace = $1 AND capability = $2 AND dedupe_key = $3`,
				a.Workspace, a.Capability, a.IdempotencyKey))
			if err != nil {
				return err
			}
			got, created = existing, false
			return nil
		}
		if err != nil {
			return err
		}
		got, created = a, true
		got.Seq = seq
		return w.appendAudit(nil, audit)
	})
	if err != nil {
		return ladder.Approval{}, false, fmt.Errorf("create approval: %w", err)
	}
	return got, created, nil
}

// GetApproval returns an approval of the workspace.
func (s *Store) GetApproval(ctx context.Context, workspace, id string) (ladder.Approval, error) {
	if err := s.reading(); err != nil {
		return ladder.Approval{}, fmt.Errorf("get approval: %w", err)
	}
	a, err := scanApproval(s.pool.QueryRow(ctx, `SELECT seq, doc FROM approvals WHERE id = $1 AND workspace = $2`, id, workspace))
	if err != nil {
		return ladder.Approval{}, fmt.Errorf("get approval: %w", s.readErr(err))
	}
	return a, nil
}

// ApprovalByKey returns the approval requested with an idempotency key, or
// ErrNotFound.
func (s *Store) ApprovalByKey(ctx context.Context, workspace, capability, key string) (ladder.Approval, error) {
	if err := s.reading(); err != nil {
		return ladder.Approval{}, fmt.Errorf("approval by key: %w", err)
	}
	a, err := scanApproval(s.pool.QueryRow(ctx, `SELECT seq, doc FROM approvals WHERE workspace = $1 AND capability = $2 AND dedupe_key = $3`,
		workspace, capability, key))
	if err != nil {
		return ladder.Approval{}, fmt.Errorf("approval by key: %w", s.readErr(err))
	}
	return a, nil
}

// ListApprovals returns approvals matching q, newest first.
func (s *Store) ListApprovals(ctx context.Context, q ladder.ApprovalQuery) ([]ladder.Approval, error) {
	if err := s.reading(); err != nil {
		return nil, fmt.Errorf("list approvals: %w", err)
	}
	limit := q.Limit
	if limit <= 0 {
		limit = 50
	}
	where, args := `workspace = $1`, []any{q.Workspace}
	if q.Status != "" {
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
	rows, err := s.pool.Query(ctx, `SELECT seq, doc FROM approvals WHERE `+where+fmt.Sprintf(` ORDER BY seq DESC LIMIT $%d`, len(args)), args...)
	if err != nil {
		return nil, fmt.Errorf("list approvals: %w", s.mapErr(err))
	}
	defer rows.Close()
	var out []ladder.Approval
	for rows.Next() {
		a, err := scanApproval(rows)
		if err != nil {
			return nil, fmt.Errorf("list approvals: %w", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list approvals: %w", s.mapErr(err))
	}
	return out, nil
}

// UpdateApproval stores a over the approval if its status is still from.
func (s *Store) UpdateApproval(ctx context.Context, a ladder.Approval, from ladder.ApprovalStatus, audit []ladder.AuditEntry) (ladder.Approval, error) {
	err := s.write(ctx, func(w *wtx) error {
		doc, err := json.Marshal(a)
		if err != nil {
			return err
		}
		tag, err := w.exec(`UPDATE approvals SET status = $1, doc = $2 WHERE id = $3 AND workspace = $4 AND status = $5`,
			string(a.Status), doc, a.ID, a.Workspace, string(from))
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			var cur string
			if err := w.queryRow(`SELECT status FROM approvals WHERE id = $1 AND workspace = $2`, a.ID, a.Workspace).Scan(&cur); err != nil {
				if errors.Is(err, pgx.ErrNoRows) {
					return ladder.ErrNotFound
				}
				return err
			}
			return fmt.Errorf("approval %s is %s, not %s: %w", a.ID, cur, from, ladder.ErrConflict)
		}
		return w.appendAudit(nil, audit...)
	})
	if err != nil {
		return ladder.Approval{}, fmt.Errorf("update approval: %w", err)
	}
	return a, nil
}

func scanCall(r pgx.Row) (ladder.Call, error) {
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
// idempotency key.
func (s *Store) BeginCall(ctx context.Context, c ladder.Call, audit ladder.AuditEntry) (ladder.Call, bool, error) {
	c.StartedAt = normTime(c.StartedAt)
	var (
		got     ladder.Call
		created bool
		recs    []ladder.AuditRecord
	)
	err := s.write(ctx, func(w *wtx) error {
		doc, err := json.Marshal(c)
		if err != nil {
			return err
		}
		tag, err := w.exec(`INSERT INTO calls (id, workspace, capability, status, dedupe_key, doc) VALUES ($1, $2, $3, $4, $5, $6)
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
			got, created = existing, false
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
		got, created = c, true
		return w.appendAudit(&recs, audit)
	})
	if err != nil {
		return ladder.Call{}, false, fmt.Errorf("begin call: %w", err)
	}
	if created && len(recs) > 0 {
		got.AuditSeq = recs[0].Seq
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
		tag, err := w.exec(`UPDATE calls SET status = $1, doc = $2 WHERE id = $3 AND workspace = $4 AND status = $5`,
			string(c.Status), doc, c.ID, c.Workspace, string(ladder.CallRunning))
		if err != nil {
			return err
		}
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("call %s is not running: %w", c.ID, ladder.ErrConflict)
		}
		return w.appendAudit(nil, audit)
	})
	if err != nil {
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

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

// setCall stores c over the call whose status is still from, with its
// audit entry (the compare-and-set of FinishCall and UpdateCall). The
// UPDATE locks the row, so of a result and an unknown mark racing on two
// replicas exactly one commits and the other finds the status changed.
func (s *Store) setCall(ctx context.Context, c ladder.Call, from ladder.CallStatus, audit ladder.AuditEntry) error {
	return s.write(ctx, func(w *wtx) error {
		doc, err := c.AppendJSON(nil)
		if err != nil {
			return err
		}
		tag, err := w.exec(`UPDATE calls SET status = $1, doc = $2 WHERE id = $3 AND workspace = $4 AND status = $5`,
			string(c.Status), doc, c.ID, c.Workspace, string(from))
		if err != nil {
			return err
		}
		if tag.RowsAffected() != 1 {
			var cur string
			err := w.queryRow(`SELECT status FROM calls WHERE id = $1 AND workspace = $2`, c.ID, c.Workspace).Scan(&cur)
			if errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("call %s: %w", c.ID, ladder.ErrNotFound)
			}
			if err != nil {
				return err
			}
			return fmt.Errorf("call %s is %s, not %s: %w", c.ID, cur, from, ladder.ErrConflict)
		}
		return w.appendAudit(nil, audit)
	})
}

// UpdateCall stores c over the call whose status is still from.
func (s *Store) UpdateCall(ctx context.Context, c ladder.Call, from ladder.CallStatus, audit ladder.AuditEntry) (ladder.Call, error) {
	if err := s.setCall(ctx, c, from, audit); err != nil {
		return ladder.Call{}, fmt.Errorf("update call: %w", err)
	}
	return c, nil
}

// StaleCalls returns calls running since at least minAge ago by the
// database's clock, which every replica shares, oldest first. The partial
// index on running calls keeps this a walk over the few calls in flight.
func (s *Store) StaleCalls(ctx context.Context, minAge time.Duration, afterSeq int64, limit int) ([]ladder.Call, error) {
	if err := s.reading(); err != nil {
		return nil, fmt.Errorf("stale calls: %w", err)
	}
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.pool.Query(ctx, `SELECT seq, doc, (extract(epoch FROM clock_timestamp() - started_at) * 1000000)::bigint FROM calls
		WHERE status = 'running' AND seq > $1 AND started_at <= clock_timestamp() - $2::bigint * interval '1 microsecond' ORDER BY seq LIMIT $3`,
		afterSeq, minAge.Microseconds(), limit)
	if err != nil {
		return nil, fmt.Errorf("stale calls: %w", s.mapErr(err))
	}
	out, err := collect(rows, func(r pgx.Row) (ladder.Call, error) {
		var (
			c      ladder.Call
			seq    int64
			doc    []byte
			micros int64
		)
		if err := r.Scan(&seq, &doc, &micros); err != nil {
			return c, err
		}
		if err := json.Unmarshal(doc, &c); err != nil {
			return c, fmt.Errorf("stored call: %w", err)
		}
		c.Seq, c.RunningFor = seq, time.Duration(micros)*time.Microsecond
		return c, nil
	})
	if err != nil {
		return nil, fmt.Errorf("stale calls: %w", s.mapErr(err))
	}
	return out, nil
}

package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/ladderhq/ladder"
)

// setCall stores c over the call whose status is still from, with its
// audit entry (the compare-and-set of FinishCall and UpdateCall).
func (s *Store) setCall(ctx context.Context, c ladder.Call, from ladder.CallStatus, audit ladder.AuditEntry) error {
	rc, err := s.readyCall(c, audit)
	if err != nil {
		return err
	}
	err = s.writeCall(ctx, func(w *wtx) error {
		res, err := w.exec(`UPDATE calls SET status = ?, doc = ? WHERE id = ? AND workspace = ? AND status = ?`,
			string(c.Status), rc.doc, c.ID, c.Workspace, string(from))
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			var cur string
			err := w.queryRow(`SELECT status FROM calls WHERE id = ? AND workspace = ?`, c.ID, c.Workspace).Scan(&cur)
			if errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("call %s: %w", c.ID, ladder.ErrNotFound)
			}
			if err != nil {
				return err
			}
			return fmt.Errorf("call %s is %s, not %s: %w", c.ID, cur, from, ladder.ErrConflict)
		}
		_, err = w.appendReady(rc.audit)
		return err
	})
	rc.release()
	if err == nil && from == ladder.CallRunning && c.Status != ladder.CallRunning {
		s.settled()
	}
	return err
}

// began puts a call this process just stored on s.running, if the write
// created it running: not one found by its idempotency key, nor one stored
// settled. settled takes it off again.
func (s *Store) began(c ladder.Call, created bool) {
	if created && c.Status == ladder.CallRunning {
		s.running.Add(1)
	}
}

// settled takes a call that is no longer running off s.running, which a
// call begun before a restart was never on.
func (s *Store) settled() {
	for {
		n := s.running.Load()
		if n <= 0 || s.running.CompareAndSwap(n, n-1) {
			return
		}
	}
}

// UpdateCall stores c over the call whose status is still from.
func (s *Store) UpdateCall(ctx context.Context, c ladder.Call, from ladder.CallStatus, audit ladder.AuditEntry) (ladder.Call, error) {
	if err := s.setCall(ctx, c, from, audit); err != nil {
		return ladder.Call{}, fmt.Errorf("update call: %w", err)
	}
	return c, nil
}

// StaleCalls returns calls running since at least minAge ago by the
// store's clock, oldest first. The partial index on running calls keeps
// this a walk over the few calls in flight, however many have finished.
func (s *Store) StaleCalls(ctx context.Context, minAge time.Duration, afterSeq int64, limit int) ([]ladder.Call, error) {
	if limit <= 0 {
		limit = 100
	}
	now := normTime(s.now())
	rows, err := s.readers.QueryContext(ctx, `SELECT seq, started_at, doc FROM calls
		WHERE status = 'running' AND seq > ? AND started_at IS NOT NULL AND started_at <= ? ORDER BY seq LIMIT ?`,
		afterSeq, fmtTime(now.Add(-minAge)), limit)
	if err != nil {
		return nil, fmt.Errorf("stale calls: %w", s.mapErr(err))
	}
	out, err := collect(rows, func(r scanner) (ladder.Call, error) {
		var (
			c       ladder.Call
			seq     int64
			started string
			doc     []byte
		)
		if err := r.Scan(&seq, &started, &doc); err != nil {
			return c, err
		}
		if err := json.Unmarshal(doc, &c); err != nil {
			return c, fmt.Errorf("stored call: %w", err)
		}
		at, err := parseTime(started)
		if err != nil {
			return c, err
		}
		c.Seq, c.RunningFor = seq, now.Sub(at)
		return c, nil
	})
	if err != nil {
		return nil, fmt.Errorf("stale calls: %w", s.mapErr(err))
	}
	return out, nil
}

package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/ladderhq/ladder"
)

const sessionColumns = "id_hash, key_id, workspace, created_at, expires_at, revoked_at"

// CreateSession stores a console session and appends audit in the same
// transaction. An id hash in use is ErrConflict.
func (s *Store) CreateSession(ctx context.Context, se ladder.Session, audit ladder.AuditEntry) error {
	err := s.write(ctx, func(w *wtx) error {
		if _, err := w.exec(`INSERT INTO sessions (`+sessionColumns+`) VALUES ($1, $2, $3, $4, $5, $6)`,
			se.IDHash, se.KeyID, se.Workspace, normTime(se.CreatedAt), normTime(se.ExpiresAt), nullTimePtr(se.RevokedAt)); err != nil {
			return err
		}
		return w.appendAudit(nil, audit)
	})
	if err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	return nil
}

// GetSession returns the session whose id hashes to idHash, or ErrNotFound.
// It reads the shared table, so a session revoked on one replica is
// refused by every other at once.
func (s *Store) GetSession(ctx context.Context, idHash []byte) (ladder.Session, error) {
	if err := s.reading(); err != nil {
		return ladder.Session{}, fmt.Errorf("get session: %w", err)
	}
	se, err := scanSession(s.pool.QueryRow(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE id_hash = $1`, idHash))
	if err != nil {
		return ladder.Session{}, fmt.Errorf("get session: %w", s.readErr(err))
	}
	return se, nil
}

// RevokeSession marks the session revoked and appends audit. A session
// revoked already keeps its first revocation time.
func (s *Store) RevokeSession(ctx context.Context, idHash []byte, at time.Time, audit ladder.AuditEntry) error {
	err := s.write(ctx, func(w *wtx) error {
		tag, err := w.exec(`UPDATE sessions SET revoked_at = COALESCE(revoked_at, $1) WHERE id_hash = $2`, normTime(at), idHash)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return ladder.ErrNotFound
		}
		return w.appendAudit(nil, audit)
	})
	if err != nil {
		return fmt.Errorf("revoke session: %w", err)
	}
	return nil
}

// DeleteExpiredSessions deletes the sessions that expired before the given
// time and returns how many.
func (s *Store) DeleteExpiredSessions(ctx context.Context, before time.Time) (int, error) {
	var n int64
	err := s.write(ctx, func(w *wtx) error {
		tag, err := w.exec(`DELETE FROM sessions WHERE expires_at < $1`, normTime(before))
		if err != nil {
			return err
		}
		n = tag.RowsAffected()
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("delete expired sessions: %w", err)
	}
	return int(n), nil
}

func scanSession(r pgx.Row) (ladder.Session, error) {
	var (
		se      ladder.Session
		revoked *time.Time
	)
	if err := r.Scan(&se.IDHash, &se.KeyID, &se.Workspace, &se.CreatedAt, &se.ExpiresAt, &revoked); err != nil {
		return ladder.Session{}, err
	}
	se.CreatedAt, se.ExpiresAt, se.RevokedAt = se.CreatedAt.UTC(), se.ExpiresAt.UTC(), fromNullPtr(revoked)
	return se, nil
}

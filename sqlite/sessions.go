package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/ladderhq/ladder"
)

const sessionColumns = "id_hash, key_id, workspace, created_at, expires_at, revoked_at"

// CreateSession stores a console session and appends audit in the same
// transaction. An id hash in use is ErrConflict.
func (s *Store) CreateSession(ctx context.Context, se ladder.Session, audit ladder.AuditEntry) error {
	err := s.write(ctx, func(w *wtx) error {
		if _, err := w.exec(`INSERT INTO sessions (`+sessionColumns+`) VALUES (?, ?, ?, ?, ?, ?)`,
			se.IDHash, se.KeyID, se.Workspace, fmtTime(se.CreatedAt), fmtTime(se.ExpiresAt), fmtTimePtr(se.RevokedAt)); err != nil {
			return err
		}
		_, err := w.appendAudit(audit)
		return err
	})
	if err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	return nil
}

// GetSession returns the session whose id hashes to idHash, or ErrNotFound.
// Every console request reads it, so it goes through a prepared statement.
func (s *Store) GetSession(ctx context.Context, idHash []byte) (ladder.Session, error) {
	se, err := scanSession(s.readRow(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE id_hash = ?`, idHash))
	if err != nil {
		return ladder.Session{}, fmt.Errorf("get session: %w", s.readErr(err))
	}
	return se, nil
}

// RevokeSession marks the session revoked and appends audit. A session
// revoked already keeps its first revocation time.
func (s *Store) RevokeSession(ctx context.Context, idHash []byte, at time.Time, audit ladder.AuditEntry) error {
	err := s.write(ctx, func(w *wtx) error {
		res, err := w.exec(`UPDATE sessions SET revoked_at = COALESCE(revoked_at, ?) WHERE id_hash = ?`, fmtTime(at), idHash)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return ladder.ErrNotFound
		}
		_, err = w.appendAudit(audit)
		return err
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
		res, err := w.exec(`DELETE FROM sessions WHERE expires_at < ?`, fmtTime(before))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("delete expired sessions: %w", err)
	}
	return int(n), nil
}

func scanSession(r scanner) (ladder.Session, error) {
	var (
		se               ladder.Session
		created, expires string
		revoked          sql.NullString
		err              error
	)
	if err := r.Scan(&se.IDHash, &se.KeyID, &se.Workspace, &created, &expires, &revoked); err != nil {
		return ladder.Session{}, err
	}
	if se.CreatedAt, err = parseTime(created); err != nil {
		return ladder.Session{}, err
	}
	if se.ExpiresAt, err = parseTime(expires); err != nil {
		return ladder.Session{}, err
	}
	if se.RevokedAt, err = parseTimePtr(revoked); err != nil {
		return ladder.Session{}, err
	}
	return se, nil
}

package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/ladderhq/ladder"
)

const keyColumns = "id, workspace, kind, name, secret_hash, created_at, expires_at, revoked_at"

// CreateKey stores k and appends audit in the same transaction. An id that
// exists is ErrConflict.
func (s *Store) CreateKey(ctx context.Context, k ladder.Key, audit ladder.AuditEntry) error {
	err := s.write(ctx, func(w *wtx) error {
		if _, err := w.exec(`INSERT INTO keys (`+keyColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			k.ID, k.Workspace, string(k.Kind), k.Name, k.SecretHash, fmtTime(k.CreatedAt),
			fmtTimePtr(k.ExpiresAt), fmtTimePtr(k.RevokedAt)); err != nil {
			return err
		}
		_, err := w.appendAudit(audit)
		return err
	})
	if err != nil {
		return fmt.Errorf("create key: %w", err)
	}
	return nil
}

// GetKey returns the key with that id, or ErrNotFound.
func (s *Store) GetKey(ctx context.Context, id string) (ladder.Key, error) {
	k, err := scanKey(s.readRow(ctx, `SELECT `+keyColumns+` FROM keys WHERE id = ?`, id))
	if err != nil {
		return ladder.Key{}, fmt.Errorf("get key: %w", s.readErr(err))
	}
	return k, nil
}

// ListKeys returns the keys of a workspace ("" for all), oldest first.
func (s *Store) ListKeys(ctx context.Context, workspace string) ([]ladder.Key, error) {
	rows, err := s.readers.QueryContext(ctx, `SELECT `+keyColumns+` FROM keys
		WHERE ? = '' OR workspace = ? ORDER BY created_at, rowid`, workspace, workspace)
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", s.mapErr(err))
	}
	keys, err := collect(rows, scanKey)
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", s.mapErr(err))
	}
	return keys, nil
}

// RevokeKey marks the key revoked at the given time, revokes its console
// sessions and appends audit, in one transaction. A key or session revoked
// already keeps its first revocation time.
func (s *Store) RevokeKey(ctx context.Context, id string, at time.Time, audit ladder.AuditEntry) error {
	err := s.write(ctx, func(w *wtx) error {
		res, err := w.exec(`UPDATE keys SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?`, fmtTime(at), id)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return ladder.ErrNotFound
		}
		if _, err := w.exec(`UPDATE sessions SET revoked_at = COALESCE(revoked_at, ?) WHERE key_id = ?`, fmtTime(at), id); err != nil {
			return err
		}
		_, err = w.appendAudit(audit)
		return err
	})
	if err != nil {
		return fmt.Errorf("revoke key: %w", err)
	}
	return nil
}

// CountKeys returns how many keys exist, revoked ones included.
func (s *Store) CountKeys(ctx context.Context) (int, error) {
	var n int
	if err := s.readers.QueryRowContext(ctx, `SELECT COUNT(*) FROM keys`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count keys: %w", s.mapErr(err))
	}
	return n, nil
}

// scanner is a *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

func scanKey(r scanner) (ladder.Key, error) {
	var (
		k                ladder.Key
		kind, created    string
		expires, revoked sql.NullString
		err              error
	)
	if err := r.Scan(&k.ID, &k.Workspace, &kind, &k.Name, &k.SecretHash, &created, &expires, &revoked); err != nil {
		return ladder.Key{}, err
	}
	k.Kind = ladder.KeyKind(kind)
	if k.CreatedAt, err = parseTime(created); err != nil {
		return ladder.Key{}, err
	}
	if k.ExpiresAt, err = parseTimePtr(expires); err != nil {
		return ladder.Key{}, err
	}
	if k.RevokedAt, err = parseTimePtr(revoked); err != nil {
		return ladder.Key{}, err
	}
	return k, nil
}

// collect scans every row with scan and closes rows.
func collect[T any](rows *sql.Rows, scan func(scanner) (T, error)) ([]T, error) {
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

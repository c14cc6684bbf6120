package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/ladderhq/ladder"
)

const keyColumns = "id, workspace, kind, name, secret_hash, created_at, expires_at, revoked_at"

// CreateKey stores k and appends audit in the same transaction. An id that
// exists is ErrConflict. Subscribers of every replica hear of the new key
// (a cache may hold "no such key").
func (s *Store) CreateKey(ctx context.Context, k ladder.Key, audit ladder.AuditEntry) error {
	err := s.write(ctx, func(w *wtx) error {
		if _, err := w.exec(`INSERT INTO keys (`+keyColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
			k.ID, k.Workspace, string(k.Kind), k.Name, k.SecretHash, normTime(k.CreatedAt),
			nullTimePtr(k.ExpiresAt), nullTimePtr(k.RevokedAt)); err != nil {
			return err
		}
		w.notifyKey(k.ID)
		return w.appendAudit(nil, audit)
	})
	if err != nil {
		return fmt.Errorf("create key: %w", err)
	}
	return nil
}

// GetKey returns the key with that id, or ErrNotFound.
func (s *Store) GetKey(ctx context.Context, id string) (ladder.Key, error) {
	if err := s.reading(); err != nil {
		return ladder.Key{}, fmt.Errorf("get key: %w", err)
	}
	k, err := scanKey(s.pool.QueryRow(ctx, `SELECT `+keyColumns+` FROM keys WHERE id = $1`, id))
	if err != nil {
		return ladder.Key{}, fmt.Errorf("get key: %w", s.readErr(err))
	}
	return k, nil
}

// ListKeys returns the keys of a workspace ("" for all), oldest first.
func (s *Store) ListKeys(ctx context.Context, workspace string) ([]ladder.Key, error) {
	if err := s.reading(); err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	rows, err := s.pool.Query(ctx, `SELECT `+keyColumns+` FROM keys
		WHERE $1::text = '' OR workspace = $1 ORDER BY created_at, ord`, workspace)
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
// already keeps its first revocation time. Subscribers of every replica
// hear of the revocation.
func (s *Store) RevokeKey(ctx context.Context, id string, at time.Time, audit ladder.AuditEntry) error {
	err := s.write(ctx, func(w *wtx) error {
		tag, err := w.exec(`UPDATE keys SET revoked_at = COALESCE(revoked_at, $1) WHERE id = $2`, normTime(at), id)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return ladder.ErrNotFound
		}
		if _, err := w.exec(`UPDATE sessions SET revoked_at = COALESCE(revoked_at, $1) WHERE key_id = $2`, normTime(at), id); err != nil {
			return err
		}
		w.notifyKey(id)
		return w.appendAudit(nil, audit)
	})
	if err != nil {
		return fmt.Errorf("revoke key: %w", err)
	}
	return nil
}

// CountKeys returns how many keys exist, revoked ones included.
func (s *Store) CountKeys(ctx context.Context) (int, error) {
	if err := s.reading(); err != nil {
		return 0, fmt.Errorf("count keys: %w", err)
	}
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT COUNT(*) FROM keys`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count keys: %w", s.mapErr(err))
	}
	return n, nil
}

func scanKey(r pgx.Row) (ladder.Key, error) {
	var (
		k                ladder.Key
		kind             string
		expires, revoked *time.Time
	)
	if err := r.Scan(&k.ID, &k.Workspace, &kind, &k.Name, &k.SecretHash, &k.CreatedAt, &expires, &revoked); err != nil {
		return ladder.Key{}, err
	}
	k.Kind = ladder.KeyKind(kind)
	k.CreatedAt = k.CreatedAt.UTC()
	k.ExpiresAt, k.RevokedAt = fromNullPtr(expires), fromNullPtr(revoked)
	return k, nil
}

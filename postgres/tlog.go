package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/ladderhq/ladder"
)

// IntegrateTx runs fn in one transaction that holds workspace's tree lock:
// its tlog_head row, created when missing and locked FOR UPDATE, so two
// replicas integrating one workspace take turns and build one tree, and
// integrators of different workspaces do not wait on each other. It runs
// beside the group commit, never inside an audit append.
func (s *Store) IntegrateTx(ctx context.Context, workspace string, fn func(ladder.TlogTx) error) error {
	if s.closed.Load() {
		return errClosed
	}
	ctx, cancel := context.WithTimeout(ctx, batchTimeout)
	defer cancel()
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO tlog_head (workspace, size, last_seq) VALUES ($1, 0, 0) ON CONFLICT (workspace) DO NOTHING`, workspace); err != nil {
			return err
		}
		t := &tlogTx{ctx: ctx, tx: tx, ws: workspace}
		if err := tx.QueryRow(ctx, `SELECT size, last_seq FROM tlog_head WHERE workspace = $1 FOR UPDATE`, workspace).Scan(&t.size, &t.lastSeq); err != nil {
			return err
		}
		return fn(t)
	})
	if err != nil {
		return fmt.Errorf("integrate %s: %w", workspace, s.mapErr(err))
	}
	return nil
}

// tlogTx is ladder.TlogTx over a transaction holding the head row lock.
type tlogTx struct {
	ctx           context.Context
	tx            pgx.Tx
	ws            string
	size, lastSeq int64
}

func (t *tlogTx) Head() (size, lastSeq int64, err error) { return t.size, t.lastSeq, nil }

// TlogPending returns workspace's committed records from position from
// on, read outside the integration's transaction, so the tree lock is
// held only for the append. A record holds what its leaf covers; the
// chain hashes are not read.
func (s *Store) TlogPending(ctx context.Context, workspace string, from int64, limit int) ([]ladder.AuditRecord, error) {
	if err := s.reading(); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT seq, workspace, actor, kind, subject, at, data, ws_idx FROM audit WHERE workspace = $1 AND ws_idx >= $2 ORDER BY ws_idx LIMIT $3`, workspace, from, limit)
	if err != nil {
		return nil, fmt.Errorf("tlog pending: %w", s.mapErr(err))
	}
	recs, err := pendingRecords(rows, from, limit)
	if err != nil {
		return nil, fmt.Errorf("tlog pending: %w", s.mapErr(err))
	}
	return recs, nil
}

// pendingRecords scans records and their positions, keeping those at
// from, from+1, … up to the first position missing: the head lock
// commits a workspace's records in position order, so a gap is never
// filled later, but a store bug must not make a tree skip one.
func pendingRecords(rows pgx.Rows, from int64, limit int) ([]ladder.AuditRecord, error) {
	defer rows.Close()
	// Under load every integration reads a whole batch (ladder.TlogBatch):
	// room for it at once, rather than doubling up to it.
	recs := make([]ladder.AuditRecord, 0, min(limit, ladder.TlogBatch))
	for rows.Next() {
		var (
			rec  ladder.AuditRecord
			data []byte
			idx  int64
		)
		if err := rows.Scan(&rec.Seq, &rec.Workspace, &rec.Actor, &rec.Kind, &rec.Subject, &rec.At, &data, &idx); err != nil {
			return nil, err
		}
		if idx != from+int64(len(recs)) {
			break
		}
		rec.At, rec.Data = rec.At.UTC(), data
		recs = append(recs, rec)
	}
	// After a break the rows are closed unread, which is not an error.
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return recs, nil
}

func (t *tlogTx) Append(size, lastSeq int64, leaves []ladder.TlogLeaf, hashes []ladder.TlogHash) error {
	// The leaves are not stored: a leaf's index is its record's position,
	// audit.ws_idx (migration 0018), and the head's size says which
	// positions are leaves.
	if err := ladder.CheckLeaves(size, leaves); err != nil {
		return err
	}
	var (
		hIdx  []int64
		hHash [][]byte
	)
	for _, h := range hashes {
		hIdx, hHash = append(hIdx, h.Index), append(hHash, h.Hash[:])
	}
	if _, err := t.tx.Exec(t.ctx, `INSERT INTO tlog_hash (workspace, idx, hash) SELECT $1, i, h FROM unnest($2::bigint[], $3::bytea[]) AS u(i, h)`, t.ws, hIdx, hHash); err != nil {
		return fmt.Errorf("insert stored hashes: %w", err)
	}
	_, err := t.tx.Exec(t.ctx, `UPDATE tlog_head SET size = $2, last_seq = $3 WHERE workspace = $1`, t.ws, size, lastSeq)
	return err
}

// TlogHead returns workspace's tree size and last leaf seq.
func (s *Store) TlogHead(ctx context.Context, workspace string) (size, lastSeq int64, err error) {
	if err := s.reading(); err != nil {
		return 0, 0, err
	}
	err = s.pool.QueryRow(ctx, `SELECT size, last_seq FROM tlog_head WHERE workspace = $1`, workspace).Scan(&size, &lastSeq)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("tlog head: %w", s.mapErr(err))
	}
	return size, lastSeq, nil
}

// TlogHashes returns workspace's stored hashes at indexes, read in one
// query.
func (s *Store) TlogHashes(ctx context.Context, workspace string, indexes []int64) ([][32]byte, error) {
	if err := s.reading(); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT idx, hash FROM tlog_hash WHERE workspace = $1 AND idx = ANY($2)`, workspace, indexes)
	if err != nil {
		return nil, s.mapErr(err)
	}
	got := map[int64][32]byte{}
	_, err = collect(rows, func(r pgx.Row) (struct{}, error) {
		var (
			ix int64
			b  []byte
			h  [32]byte
		)
		err := r.Scan(&ix, &b)
		copy(h[:], b)
		got[ix] = h
		return struct{}{}, err
	})
	if err != nil {
		return nil, s.mapErr(err)
	}
	out := make([][32]byte, len(indexes))
	for i, ix := range indexes {
		h, ok := got[ix]
		if !ok {
			return nil, fmt.Errorf("stored hash %d of %s: %w", ix, workspace, ladder.ErrNotFound)
		}
		out[i] = h
	}
	return out, nil
}

// TlogLeafOf returns the leaf index of workspace's record seq: its
// position in the workspace's log, once the tree holds that position.
func (s *Store) TlogLeafOf(ctx context.Context, workspace string, seq int64) (int64, error) {
	if err := s.reading(); err != nil {
		return 0, err
	}
	var idx int64
	err := s.pool.QueryRow(ctx, `SELECT a.ws_idx FROM audit AS a JOIN tlog_head AS h ON h.workspace = a.workspace
		WHERE a.seq = $1 AND a.workspace = $2 AND a.ws_idx < h.size`, seq, workspace).Scan(&idx)
	if err != nil {
		return 0, s.readErr(err)
	}
	return idx, nil
}

// TlogWorkspaces returns the workspaces with records, or with pending
// those whose chain head is ahead of their tree.
func (s *Store) TlogWorkspaces(ctx context.Context, pending bool) ([]string, error) {
	if err := s.reading(); err != nil {
		return nil, err
	}
	query := `SELECT workspace FROM audit_ws_head WHERE size > 0`
	if pending {
		query = `SELECT a.workspace FROM audit_ws_head AS a LEFT JOIN tlog_head AS t USING (workspace) WHERE a.size > COALESCE(t.size, 0)`
	}
	rows, err := s.pool.Query(ctx, query+` ORDER BY 1`)
	if err != nil {
		return nil, fmt.Errorf("tlog workspaces: %w", s.mapErr(err))
	}
	ws, err := collect(rows, func(r pgx.Row) (string, error) {
		var w string
		return w, r.Scan(&w)
	})
	if err != nil {
		return nil, fmt.Errorf("tlog workspaces: %w", s.mapErr(err))
	}
	return ws, nil
}

// TlogMeta returns the database-wide log state.
func (s *Store) TlogMeta(ctx context.Context) (ladder.TlogMeta, error) {
	var m ladder.TlogMeta
	if err := s.reading(); err != nil {
		return m, err
	}
	err := s.pool.QueryRow(ctx, `SELECT legacy_seq, adopted, chain_seq FROM tlog_meta`).Scan(&m.LegacySeq, &m.Adopted, &m.ChainSeq)
	if err != nil {
		return m, fmt.Errorf("tlog meta: %w", s.mapErr(err))
	}
	return m, nil
}

// TlogAdopt marks the legacy chain adopted, reporting whether this call
// did.
func (s *Store) TlogAdopt(ctx context.Context) (bool, error) {
	if s.closed.Load() {
		return false, errClosed
	}
	tag, err := s.pool.Exec(ctx, `UPDATE tlog_meta SET adopted = true WHERE NOT adopted`)
	if err != nil {
		return false, fmt.Errorf("tlog adopt: %w", s.mapErr(err))
	}
	return tag.RowsAffected() == 1, nil
}

// TlogUnadopt undoes TlogAdopt.
func (s *Store) TlogUnadopt(ctx context.Context) error {
	if s.closed.Load() {
		return errClosed
	}
	if _, err := s.pool.Exec(ctx, `UPDATE tlog_meta SET adopted = false`); err != nil {
		return fmt.Errorf("tlog unadopt: %w", s.mapErr(err))
	}
	return nil
}

// SaveCheckpoint keeps c unless a checkpoint of its workspace and size is
// kept already, and returns the one kept.
func (s *Store) SaveCheckpoint(ctx context.Context, c ladder.TlogCheckpoint) (ladder.TlogCheckpoint, error) {
	if s.closed.Load() {
		return ladder.TlogCheckpoint{}, errClosed
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO tlog_checkpoint (workspace, size, root, note, at) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (workspace, size) DO NOTHING`, c.Workspace, c.Size, c.Root[:], c.Note, normTime(c.At))
	if err != nil {
		return ladder.TlogCheckpoint{}, fmt.Errorf("save checkpoint: %w", s.mapErr(err))
	}
	return s.loadCheckpoint(ctx, `SELECT workspace, size, root, note, at FROM tlog_checkpoint WHERE workspace = $1 AND size = $2`, c.Workspace, c.Size)
}

// LatestCheckpoint returns workspace's largest checkpoint.
func (s *Store) LatestCheckpoint(ctx context.Context, workspace string) (ladder.TlogCheckpoint, error) {
	if err := s.reading(); err != nil {
		return ladder.TlogCheckpoint{}, err
	}
	return s.loadCheckpoint(ctx, `SELECT workspace, size, root, note, at FROM tlog_checkpoint WHERE workspace = $1 ORDER BY size DESC LIMIT 1`, workspace)
}

func (s *Store) loadCheckpoint(ctx context.Context, query string, args ...any) (ladder.TlogCheckpoint, error) {
	var (
		c    ladder.TlogCheckpoint
		root []byte
	)
	if err := s.pool.QueryRow(ctx, query, args...).Scan(&c.Workspace, &c.Size, &root, &c.Note, &c.At); err != nil {
		return c, s.readErr(err)
	}
	copy(c.Root[:], root)
	c.At = c.At.UTC()
	return c, nil
}

// TlogFed implements ladder.TlogStore: the leaves this store's committed
// batches appended (wtx.fed). Another replica's leaves are not in it, and
// are read back (TlogPending).
func (s *Store) TlogFed(workspace string, from int64, limit int) []ladder.FedLeaf {
	return s.feed.Take(workspace, from, limit)
}

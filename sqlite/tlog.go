package sqlite

import (
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"math"

	"github.com/ladderhq/ladder"
)

// IntegrateTx runs fn in one write transaction (BEGIN IMMEDIATE, through
// the group commit), which holds the database's write lock and so
// workspace's tree lock.
func (s *Store) IntegrateTx(ctx context.Context, workspace string, fn func(ladder.TlogTx) error) error {
	err := s.write(ctx, func(w *wtx) error { return fn(tlogTx{w: w, ws: workspace}) })
	if err != nil {
		return fmt.Errorf("integrate %s: %w", workspace, err)
	}
	return nil
}

// tlogTx is ladder.TlogTx over a write transaction.
type tlogTx struct {
	w  *wtx
	ws string
}

func (t tlogTx) Head() (size, lastSeq int64, err error) {
	err = t.w.queryRow(`SELECT size, last_seq FROM tlog_head WHERE workspace = ?`, t.ws).Scan(&size, &lastSeq)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, nil
	}
	return size, lastSeq, err
}

// TlogPending returns workspace's committed records from position from
// on, read on a reader: the writer, which every route waits on, is not
// held while an integration reads them. A record holds what its leaf
// covers; the chain hashes are not read.
func (s *Store) TlogPending(ctx context.Context, workspace string, from int64, limit int) ([]ladder.AuditRecord, error) {
	rows, err := s.readers.QueryContext(ctx, `SELECT `+leafColumns+`, ws_idx FROM audit WHERE workspace = ? AND ws_idx >= ? ORDER BY ws_idx LIMIT ?`, workspace, from, limit)
	if err != nil {
		return nil, fmt.Errorf("tlog pending: %w", s.mapErr(err))
	}
	defer rows.Close()
	// Under load every integration reads a whole batch: room for it at
	// once, rather than doubling up to it a record at a time.
	recs := make([]ladder.AuditRecord, 0, min(limit, ladder.TlogBatch))
	for rows.Next() {
		var (
			rec  ladder.AuditRecord
			at   string
			data []byte
			idx  int64
		)
		if err := rows.Scan(&rec.Seq, &rec.Workspace, &rec.Actor, &rec.Kind, &rec.Subject, &at, &data, &idx); err != nil {
			return nil, fmt.Errorf("tlog pending: %w", s.mapErr(err))
		}
		// Records are kept up to the first position missing, so a store
		// bug cannot make a tree skip one.
		if idx != from+int64(len(recs)) {
			break
		}
		if rec.At, err = parseTime(at); err != nil {
			return nil, fmt.Errorf("tlog pending: %w", err)
		}
		rec.Data = data
		recs = append(recs, rec)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("tlog pending: %w", s.mapErr(err))
	}
	return recs, nil
}

// leafColumns are the audit columns a record's leaf covers (Canonical's
// fields): auditColumns without the chain hashes.
const leafColumns = "seq, workspace, actor, kind, subject, at, data"

func (t tlogTx) Append(size, lastSeq int64, leaves []ladder.TlogLeaf, hashes []ladder.TlogHash) error {
	// Each table takes its rows in one statement over a JSON array of
	// their one varying column, the index being the first one's plus the
	// element's position (as PostgreSQL's takes arrays through unnest): a
	// statement per row was most of an integration's time in the one
	// writer (BENCHMARKS.md). Integration adds consecutive leaves, whose
	// stored hashes are consecutive too; anything else is refused. The
	// leaves themselves are not stored: a leaf's index is its record's
	// position, audit.ws_idx (migration 0018).
	if err := ladder.CheckLeaves(size, leaves); err != nil {
		return err
	}
	if len(hashes) > 0 {
		if err := consecutive("hash", len(hashes), func(i int) int64 { return hashes[i].Index }); err != nil {
			return fmt.Errorf("insert stored hashes: %w", err)
		}
		hexes := jsonArray(len(hashes), func(b []byte, i int) []byte {
			return append(hex.AppendEncode(append(b, '"'), hashes[i].Hash[:]), '"')
		})
		if _, err := t.w.exec(`INSERT INTO tlog_hash (workspace, idx, hash) SELECT ?, ? + j.key, unhex(j.value) FROM json_each(?) AS j`, t.ws, hashes[0].Index, hexes); err != nil {
			return fmt.Errorf("insert stored hashes: %w", err)
		}
	}
	_, err := t.w.exec(`INSERT INTO tlog_head (workspace, size, last_seq) VALUES (?, ?, ?)
		ON CONFLICT (workspace) DO UPDATE SET size = excluded.size, last_seq = excluded.last_seq`, t.ws, size, lastSeq)
	return err
}

// consecutive refuses n indexes (index(i) the i-th) unless each is the one
// after the one before it.
func consecutive(what string, n int, index func(i int) int64) error {
	for i := 1; i < n; i++ {
		if index(i) != index(i-1)+1 {
			return fmt.Errorf("%s %d after %s %d is not the next one", what, index(i), what, index(i-1))
		}
	}
	return nil
}

// jsonArray returns a JSON array of n elements, element i written by elem
// (numbers and hex strings only, so nothing needs escaping).
func jsonArray(n int, elem func(b []byte, i int) []byte) string {
	b := make([]byte, 0, 72*n)
	b = append(b, '[')
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		b = elem(b, i)
	}
	return string(append(b, ']'))
}

// TlogHead returns workspace's tree size and last leaf seq.
func (s *Store) TlogHead(ctx context.Context, workspace string) (size, lastSeq int64, err error) {
	err = s.readers.QueryRowContext(ctx, `SELECT size, last_seq FROM tlog_head WHERE workspace = ?`, workspace).Scan(&size, &lastSeq)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("tlog head: %w", s.mapErr(err))
	}
	return size, lastSeq, nil
}

// TlogHashes returns workspace's stored hashes at indexes.
func (s *Store) TlogHashes(ctx context.Context, workspace string, indexes []int64) ([][32]byte, error) {
	out := make([][32]byte, len(indexes))
	for i, ix := range indexes {
		var b []byte
		err := s.readers.QueryRowContext(ctx, `SELECT hash FROM tlog_hash WHERE workspace = ? AND idx = ?`, workspace, ix).Scan(&b)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("stored hash %d of %s: %w", ix, workspace, ladder.ErrNotFound)
		}
		if err != nil {
			return nil, fmt.Errorf("stored hash %d: %w", ix, s.mapErr(err))
		}
		copy(out[i][:], b)
	}
	return out, nil
}

// TlogLeafOf returns the leaf index of workspace's record seq: its
// position in the workspace's log, once the tree holds that position.
func (s *Store) TlogLeafOf(ctx context.Context, workspace string, seq int64) (int64, error) {
	query := `SELECT a.ws_idx FROM audit AS a JOIN tlog_head AS h ON h.workspace = a.workspace
		WHERE a.seq = ? AND a.workspace = ? AND a.ws_idx < h.size`
	if s.globalChain {
		// A read-only database from before migration 0014 has no
		// positions; its leaves are in tlog_leaf (migration 0012).
		query = `SELECT idx FROM tlog_leaf WHERE seq = ? AND workspace = ?`
	}
	var idx int64
	err := s.readers.QueryRowContext(ctx, query, seq, workspace).Scan(&idx)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, ladder.ErrNotFound
	}
	if err != nil {
		return 0, fmt.Errorf("tlog leaf: %w", s.mapErr(err))
	}
	return idx, nil
}

// TlogWorkspaces returns the workspaces with records, or with pending
// those whose chain head is ahead of their tree.
func (s *Store) TlogWorkspaces(ctx context.Context, pending bool) ([]string, error) {
	query := `SELECT workspace FROM audit_ws_head WHERE size > 0`
	if pending {
		query = `SELECT a.workspace FROM audit_ws_head AS a LEFT JOIN tlog_head AS t USING (workspace) WHERE a.size > COALESCE(t.size, 0)`
	}
	rows, err := s.readers.QueryContext(ctx, query+` ORDER BY 1`)
	if err != nil {
		return nil, fmt.Errorf("tlog workspaces: %w", s.mapErr(err))
	}
	ws, err := collect(rows, func(r scanner) (string, error) {
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
	if s.globalChain {
		return ladder.TlogMeta{ChainSeq: math.MaxInt64}, nil
	}
	err := s.readers.QueryRowContext(ctx, `SELECT legacy_seq, adopted, chain_seq FROM tlog_meta WHERE id = 1`).Scan(&m.LegacySeq, &m.Adopted, &m.ChainSeq)
	if err != nil {
		return m, fmt.Errorf("tlog meta: %w", s.mapErr(err))
	}
	return m, nil
}

// TlogAdopt marks the legacy chain adopted, reporting whether this call
// did.
func (s *Store) TlogAdopt(ctx context.Context) (bool, error) {
	var won bool
	err := s.write(ctx, func(w *wtx) error {
		res, err := w.exec(`UPDATE tlog_meta SET adopted = 1 WHERE id = 1 AND adopted = 0`)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		won = n == 1
		return err
	})
	if err != nil {
		return false, fmt.Errorf("tlog adopt: %w", err)
	}
	return won, nil
}

// TlogUnadopt undoes TlogAdopt.
func (s *Store) TlogUnadopt(ctx context.Context) error {
	err := s.write(ctx, func(w *wtx) error {
		_, err := w.exec(`UPDATE tlog_meta SET adopted = 0 WHERE id = 1`)
		return err
	})
	if err != nil {
		return fmt.Errorf("tlog unadopt: %w", err)
	}
	return nil
}

// SaveCheckpoint keeps c unless a checkpoint of its workspace and size is
// kept already, and returns the one kept.
func (s *Store) SaveCheckpoint(ctx context.Context, c ladder.TlogCheckpoint) (ladder.TlogCheckpoint, error) {
	err := s.write(ctx, func(w *wtx) error {
		_, err := w.exec(`INSERT INTO tlog_checkpoint (workspace, size, root, note, at) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (workspace, size) DO NOTHING`, c.Workspace, c.Size, c.Root[:], c.Note, fmtTime(normTime(c.At)))
		return err
	})
	if err != nil {
		return ladder.TlogCheckpoint{}, fmt.Errorf("save checkpoint: %w", err)
	}
	return s.loadCheckpoint(ctx, `SELECT workspace, size, root, note, at FROM tlog_checkpoint WHERE workspace = ? AND size = ?`, c.Workspace, c.Size)
}

// LatestCheckpoint returns workspace's largest checkpoint.
func (s *Store) LatestCheckpoint(ctx context.Context, workspace string) (ladder.TlogCheckpoint, error) {
	return s.loadCheckpoint(ctx, `SELECT workspace, size, root, note, at FROM tlog_checkpoint WHERE workspace = ? ORDER BY size DESC LIMIT 1`, workspace)
}

func (s *Store) loadCheckpoint(ctx context.Context, query string, args ...any) (ladder.TlogCheckpoint, error) {
	var (
		c    ladder.TlogCheckpoint
		root []byte
		at   string
	)
	err := s.readers.QueryRowContext(ctx, query, args...).Scan(&c.Workspace, &c.Size, &root, &c.Note, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return c, ladder.ErrNotFound
	}
	if err != nil {
		return c, fmt.Errorf("checkpoint: %w", s.mapErr(err))
	}
	copy(c.Root[:], root)
	var perr error
	if c.At, perr = parseTime(at); perr != nil {
		return c, perr
	}
	return c, nil
}

// TlogFed implements ladder.TlogStore: the leaves this store's committed
// batches appended (wtx.fed).
func (s *Store) TlogFed(workspace string, from int64, limit int) []ladder.FedLeaf {
	return s.feed.Take(workspace, from, limit)
}

package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/ladderhq/ladder"
)

const auditColumns = "seq, workspace, actor, kind, subject, at, data, prev_hash, hash"

// AppendAudit appends entries in order, sealing each into the chain, and
// returns the stored records.
func (s *Store) AppendAudit(ctx context.Context, entries ...ladder.AuditEntry) ([]ladder.AuditRecord, error) {
	ready, err := s.readyAudit(entries)
	if err != nil {
		return nil, fmt.Errorf("append audit: %w", err)
	}
	var recs []ladder.AuditRecord
	err = s.write(ctx, func(w *wtx) error {
		var err error
		recs, err = w.appendReady(ready)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("append audit: %w", err)
	}
	return recs, nil
}

// readyEntry is an audit entry made ready to be sealed: its time set (the
// store's clock when it was zero) and in UTC at microseconds, its data
// canonical JSON, and the queue and step its data names. Callers make
// entries ready before their write (readyAudit), so that the one writer
// goroutine, which every write waits for, only seals and inserts them.
type readyEntry struct {
	ladder.AuditEntry
	queue, step string
}

// readyAudit makes entries ready to be sealed.
func (s *Store) readyAudit(entries []ladder.AuditEntry) ([]readyEntry, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	out := make([]readyEntry, len(entries))
	for i, e := range entries {
		if e.At.IsZero() {
			e.At = s.now()
		}
		e.At = normTime(e.At)
		data, queue, step, err := ladder.CanonicalAuditData(e.Data)
		if err != nil {
			return nil, fmt.Errorf("audit %s data: %w", e.Kind, err)
		}
		e.Data = data
		out[i] = readyEntry{AuditEntry: e, queue: queue, step: step}
	}
	return out, nil
}

// appendAudit seals and inserts entries inside the batch's transaction;
// see appendReady.
func (w *wtx) appendAudit(entries ...ladder.AuditEntry) ([]ladder.AuditRecord, error) {
	ready, err := w.s.readyAudit(entries)
	if err != nil {
		return nil, err
	}
	return w.appendReady(ready)
}

// appendReady seals and inserts entries inside the batch's transaction.
// Each workspace's chain has its own head (audit_ws_head): a record's
// prev_hash is the hash of its workspace's previous record and its ws_idx
// its position in the workspace's log (its leaf index). The heads and the
// last seq are read from the tables once per transaction, not kept across
// them: another process may have appended since this one last did, and
// BEGIN IMMEDIATE holds the write lock, so they cannot move before the
// commit. Within the transaction wtx keeps them (runBatch forgets them
// when an op's savepoint is rolled back), and the moved heads are written
// to audit_ws_head when the transaction flushes (wtx.flush), before its
// commit.
//
// Each entry is stored as it is hashed (readyEntry): its time in UTC at
// microseconds and its data as canonical JSON, so re-hashing a stored
// record reproduces its hash.
func (w *wtx) appendReady(entries []readyEntry) ([]ladder.AuditRecord, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	if !w.head.known {
		err := w.queryRow(`SELECT seq FROM audit ORDER BY seq DESC LIMIT 1`).Scan(&w.head.seq)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("audit head: %w", err)
		}
		w.head.known = true
	}
	if w.heads == nil {
		w.heads = map[string]wsHead{}
	}
	recs := make([]ladder.AuditRecord, 0, len(entries))
	for _, e := range entries {
		h, ok := w.heads[e.Workspace]
		if !ok {
			err := w.queryRow(`SELECT size, hash FROM audit_ws_head WHERE workspace = ?`, e.Workspace).Scan(&h.size, &h.hash)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return nil, fmt.Errorf("audit head of %s: %w", e.Workspace, err)
			}
		}
		rec := ladder.AuditRecord{Seq: w.head.seq + 1, AuditEntry: e.AuditEntry}
		// Sealed, and its leaf kept for the feed, before its INSERT: runBatch
		// truncates w.fed to an op's start when its savepoint rolls back.
		w.fed = w.s.feed.Seal(&rec, h.hash, h.size, w.fed)
		if _, err := w.exec(`INSERT INTO audit (`+auditColumns+`, queue, step, ws_idx) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			rec.Seq, rec.Workspace, rec.Actor, rec.Kind, rec.Subject, fmtTime(rec.At), []byte(rec.Data),
			rec.PrevHash, rec.Hash, e.queue, e.step, h.size); err != nil {
			return nil, fmt.Errorf("insert audit: %w", err)
		}
		if e.Event != nil {
			if err := w.insertEvent(e.Event); err != nil {
				return nil, err
			}
		}
		w.head.seq = rec.Seq
		if !ok || !w.movedIn(e.Workspace) {
			w.moved = append(w.moved, e.Workspace)
		}
		w.heads[e.Workspace] = wsHead{size: h.size + 1, hash: rec.Hash}
		recs = append(recs, rec)
	}
	return recs, nil
}

// ListAudit returns records matching q, in seq order (or reverse with Desc).
// Only the filters q sets become conditions, so SQLite picks the index of
// the one that narrows (migrations 0001, 0011 and 0016). A kind across
// every workspace has no index of its own (migration 0017): see
// auditListQuery.
func (s *Store) ListAudit(ctx context.Context, q ladder.AuditQuery) ([]ladder.AuditRecord, error) {
	if s.noAuditStep && (q.Queue != "" || q.Step != "") {
		return nil, fmt.Errorf("list audit: the database %s predates the audit step filter (migration 0011) and is open read-only; open it once read-write (ladder serve) to migrate it", s.path)
	}
	// A read-only database from before migration 0014 has no workspace
	// heads to go through, and still has audit_by_kind.
	query, args := auditListQuery(q, kindAcrossWorkspaces(q) && !s.globalChain)
	rows, err := s.readers.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list audit: %w", s.mapErr(err))
	}
	recs, err := collect(rows, scanAudit)
	if err != nil {
		return nil, fmt.Errorf("list audit: %w", s.mapErr(err))
	}
	return recs, nil
}

// kindAcrossWorkspaces reports whether q is a kind filter across every
// workspace.
func kindAcrossWorkspaces(q ladder.AuditQuery) bool { return q.Workspace == "" && q.Kind != "" }

// auditListQuery is ListAudit's statement and arguments for q. With
// perWorkspace (a kind across every workspace) it reads each workspace's
// first page of the kind from audit_by_workspace_kind (seqs only, from the
// index), for every workspace head, takes the first page of those seqs,
// and only then reads those records: one statement, so one snapshot,
// however many workspaces. SQLite has no LATERAL join; a correlated IN
// subquery per head is its equivalent. The index is named so a filter on
// another column cannot move the read off it.
func auditListQuery(q ladder.AuditQuery, perWorkspace bool) (string, []any) {
	var (
		where []string
		args  []any
	)
	if perWorkspace {
		where = append(where, "workspace = h.workspace")
	}
	for _, f := range []struct{ col, val string }{
		{"workspace", q.Workspace}, {"kind", q.Kind}, {"actor", q.Actor}, {"step", q.Step}, {"queue", q.Queue},
	} {
		if f.val != "" {
			where, args = append(where, f.col+" = ?"), append(args, f.val)
		}
	}
	if q.Step != "" {
		// Implied by step = ?, but SQLite uses the partial step index
		// (migration 0016) only when the query names its WHERE term.
		where = append(where, "step <> ''")
	}
	// Stored times are fixed-width RFC 3339 in UTC (timeLayout), so they
	// compare as text.
	if !q.Since.IsZero() {
		where, args = append(where, "at >= ?"), append(args, fmtTime(q.Since))
	}
	if !q.Until.IsZero() {
		where, args = append(where, "at < ?"), append(args, fmtTime(q.Until))
	}
	order := "seq"
	if q.Desc {
		if q.BeforeSeq > 0 {
			where, args = append(where, "seq < ?"), append(args, q.BeforeSeq)
		}
		order = "seq DESC"
	} else {
		where, args = append(where, "seq > ?"), append(args, q.AfterSeq)
	}
	limit := ladder.PageLimit(q.Limit)
	if perWorkspace {
		return `SELECT ` + auditColumns + ` FROM audit WHERE seq IN (
			SELECT c.seq FROM audit_ws_head AS h, audit AS c WHERE c.seq IN (
				SELECT seq FROM audit INDEXED BY audit_by_workspace_kind WHERE ` + strings.Join(where, " AND ") + `
				ORDER BY ` + order + ` LIMIT ?)
			ORDER BY c.` + order + ` LIMIT ?)
			ORDER BY ` + order, append(args, limit, limit)
	}
	query := `SELECT ` + auditColumns + ` FROM audit`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, " AND ")
	}
	query += ` ORDER BY ` + order + ` LIMIT ?`
	return query, append(args, limit)
}

// walkPage is how many records WalkAudit reads per query. Paging keeps a
// slow fn from holding one read snapshot open for the whole walk, which
// would stop WAL checkpoints.
const walkPage = 1000

// WalkAudit calls fn for every record with seq > afterSeq, in order,
// stopping at the first error fn returns.
func (s *Store) WalkAudit(ctx context.Context, afterSeq int64, fn func(ladder.AuditRecord) error) error {
	read := func(after int64, limit int) ([]ladder.AuditRecord, error) {
		rows, err := s.readers.QueryContext(ctx, `SELECT `+auditColumns+` FROM audit WHERE seq > ? ORDER BY seq LIMIT ?`, after, limit)
		if err != nil {
			return nil, fmt.Errorf("walk audit: %w", s.mapErr(err))
		}
		recs, err := collect(rows, scanAudit)
		if err != nil {
			return nil, fmt.Errorf("walk audit: %w", s.mapErr(err))
		}
		return recs, nil
	}
	// fn's own error comes back as fn returned it.
	return ladder.WalkPages(afterSeq, walkPage, read, fn)
}

func scanAudit(r scanner) (ladder.AuditRecord, error) {
	var (
		rec  ladder.AuditRecord
		at   string
		data []byte
		err  error
	)
	if err := r.Scan(&rec.Seq, &rec.Workspace, &rec.Actor, &rec.Kind, &rec.Subject, &at, &data, &rec.PrevHash, &rec.Hash); err != nil {
		return ladder.AuditRecord{}, err
	}
	if rec.At, err = parseTime(at); err != nil {
		return ladder.AuditRecord{}, err
	}
	rec.Data = data
	return rec, nil
}

// movedIn reports whether ws's head has moved since the last flush.
func (w *wtx) movedIn(ws string) bool {
	for _, m := range w.moved {
		if m == ws {
			return true
		}
	}
	return false
}

package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/ladderhq/ladder"
)

const auditColumns = "seq, workspace, actor, kind, subject, at, data, prev_hash, hash"

// AppendAudit appends entries in order, sealing each into the chain, and
// returns the stored records.
func (s *Store) AppendAudit(ctx context.Context, entries ...ladder.AuditEntry) ([]ladder.AuditRecord, error) {
	var recs []ladder.AuditRecord
	err := s.write(ctx, func(w *wtx) error {
		return w.appendAudit(&recs, entries...)
	})
	if err != nil {
		return nil, fmt.Errorf("append audit: %w", err)
	}
	return recs, nil
}

// appendAudit queues entries to be appended by the batch's transaction
// (see flush); out, when not nil, receives the sealed records. Each entry
// is normalized here, as it will be stored and hashed: its time in UTC at
// microseconds (the store's clock when it is zero) and its data as
// canonical JSON. An entry whose data is not JSON fails the op.
func (w *wtx) appendAudit(out *[]ladder.AuditRecord, entries ...ladder.AuditEntry) error {
	if len(entries) == 0 {
		if out != nil {
			*out = nil
		}
		return nil
	}
	norm := make([]readyEntry, len(entries))
	for i, e := range entries {
		if e.At.IsZero() {
			e.At = w.s.now()
		}
		e.At = normTime(e.At)
		data, queue, step, err := ladder.CanonicalAuditData(e.Data)
		if err != nil {
			return fmt.Errorf("audit %s data: %w", e.Kind, err)
		}
		e.Data = data
		norm[i] = readyEntry{AuditEntry: e, queue: queue, step: step}
	}
	w.audit = append(w.audit, pendingAudit{entries: norm, out: out})
	return nil
}

// flush appends the audit entries the batch's ops queued and sends their
// notifications, as the last statements before the commit.
//
// Each workspace's chain has its own head (audit_ws_head), locked FOR
// UPDATE only here, so a head's lock is held from the insert to the commit
// and no longer, and the heads are the last locks any write transaction
// takes. Appends to one workspace, from every replica, are serialized by
// the database and its log never forks; appends to different workspaces
// do not wait on each other. A batch of several workspaces locks their
// heads in workspace order, so two batches never wait on each other in a
// cycle. The seqs come from a sequence, drawn after the heads are locked:
// within a workspace they grow in chain order; across workspaces they may
// commit out of order, and a rolled-back batch leaves a gap.
func (w *wtx) flush() error {
	if n := countEntries(w.audit); n > 0 {
		heads, seqs, err := w.lockHeads(n)
		if err != nil {
			return err
		}
		var (
			wss, actors, kinds, subjects, prevs, hashes = make([]string, 0, n), make([]string, 0, n), make([]string, 0, n), make([]string, 0, n), make([]string, 0, n), make([]string, 0, n)
			idxs                                        = make([]int64, 0, n)
			ats                                         = make([]time.Time, 0, n)
			datas                                       = make([][]byte, 0, n)
			queues, steps                               = make([]string, 0, n), make([]string, 0, n)
		)
		i := 0
		for _, p := range w.audit {
			recs := make([]ladder.AuditRecord, 0, len(p.entries))
			for _, e := range p.entries {
				h := heads[e.Workspace]
				rec := ladder.AuditRecord{Seq: seqs[i], AuditEntry: e.AuditEntry}
				i++
				w.fed = w.s.feed.Seal(&rec, h.hash, h.size, w.fed)
				idxs = append(idxs, h.size)
				h.size, h.hash = h.size+1, rec.Hash
				recs = append(recs, rec)
				wss, actors, kinds, subjects = append(wss, rec.Workspace), append(actors, rec.Actor), append(kinds, rec.Kind), append(subjects, rec.Subject)
				ats, datas, prevs, hashes = append(ats, rec.At), append(datas, []byte(rec.Data)), append(prevs, rec.PrevHash), append(hashes, rec.Hash)
				queues, steps = append(queues, e.queue), append(steps, e.step)
			}
			if p.out != nil {
				*p.out = recs
			}
		}
		var (
			hws, hhash []string
			hsize      []int64
		)
		for ws, h := range heads {
			hws, hsize, hhash = append(hws, ws), append(hsize, h.size), append(hhash, h.hash)
		}
		// One statement: insert every record and move the heads.
		w.queueTail("insert audit", `WITH ins AS (
				INSERT INTO audit (`+auditColumns+`, queue, step, ws_idx)
				SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[], $7::bytea[], $8::text[], $9::text[], $10::text[], $11::text[], $12::bigint[])
			)
			UPDATE audit_ws_head AS h SET size = u.size, hash = u.hash
			FROM unnest($13::text[], $14::bigint[], $15::text[]) AS u(ws, size, hash) WHERE h.workspace = u.ws`,
			seqs, wss, actors, kinds, subjects, ats, datas, prevs, hashes, queues, steps, idxs, hws, hsize, hhash)
	}
	if err := w.flushEvents(); err != nil {
		return err
	}
	if len(w.notify) > 0 {
		w.queueTail("notify", `SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p`, notifyChannel, dedupe(w.notify))
	}
	return nil
}

// queueTail queues one of the batch's last statements, sent with its
// COMMIT (batchTx.commit); label names what it stores, for its error.
func (w *wtx) queueTail(label, sql string, args ...any) {
	queueNamed(&w.tail, label, sql, args...)
}

// wsHead is a workspace's chain head as a batch moves it.
type wsHead struct {
	size int64
	hash string
}

// lockHeads locks the chain heads of the batch's workspaces, in workspace
// order, and draws n seqs after them, in one round trip. The lock takes
// rows only when every head exists (the count is read without a lock
// first); a workspace's first append creates its head with ON CONFLICT DO
// NOTHING, which waits for a concurrent creator to commit, and tries
// again. A deadlock this could still meet (a head created while another
// is held) is rolled back and the batch run again (runBatch).
func (w *wtx) lockHeads(n int) (map[string]*wsHead, []int64, error) {
	set := map[string]bool{}
	for _, p := range w.audit {
		for _, e := range p.entries {
			set[e.Workspace] = true
		}
	}
	wss := make([]string, 0, len(set))
	for ws := range set {
		wss = append(wss, ws)
	}
	slices.Sort(wss)
	for range 3 {
		b := &pgx.Batch{}
		b.Queue(`SELECT workspace, size, hash FROM audit_ws_head
			WHERE workspace = ANY($1) AND (SELECT count(*) FROM audit_ws_head WHERE workspace = ANY($1)) = cardinality($1)
			ORDER BY workspace FOR UPDATE`, wss)
		// The seqs are drawn only when the heads were there to lock, so a
		// workspace's first append leaves no gap.
		b.Queue(`SELECT array_agg(nextval('audit_seq_gen')) FROM generate_series(1, $1)
			WHERE (SELECT count(*) FROM audit_ws_head WHERE workspace = ANY($2)) = cardinality($2)`, n, wss)
		br := w.tx.SendBatch(w.ctx, b)
		heads := map[string]*wsHead{}
		rows, err := br.Query()
		if err == nil {
			_, err = collect(rows, func(r pgx.Row) (struct{}, error) {
				var (
					ws string
					h  wsHead
				)
				err := r.Scan(&ws, &h.size, &h.hash)
				heads[ws] = &h
				return struct{}{}, err
			})
		}
		var seqs []int64
		if err == nil {
			err = br.QueryRow().Scan(&seqs)
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, nil, fmt.Errorf("audit heads: %w", err)
		}
		if len(heads) == len(wss) {
			if len(seqs) != n {
				return nil, nil, fmt.Errorf("audit heads: %d seqs drawn for %d records", len(seqs), n)
			}
			return heads, seqs, nil
		}
		if _, err := w.exec(`INSERT INTO audit_ws_head (workspace, size, hash) SELECT ws, 0, '' FROM unnest($1::text[]) AS ws ON CONFLICT (workspace) DO NOTHING`, wss); err != nil {
			return nil, nil, fmt.Errorf("audit heads: %w", err)
		}
	}
	return nil, nil, fmt.Errorf("audit heads of %v: not all exist after creating them", wss)
}

func countEntries(ps []pendingAudit) int {
	n := 0
	for _, p := range ps {
		n += len(p.entries)
	}
	return n
}

// ListAudit returns records matching q, in seq order (or reverse with Desc).
// Only the filters q sets become conditions, so the planner picks the index
// of the one that narrows (migrations 0001, 0011 and 0016). A kind across
// every workspace has no index of its own (migration 0017): the statement
// then reads audit_by_workspace_kind once per workspace (auditListQuery).
func (s *Store) ListAudit(ctx context.Context, q ladder.AuditQuery) ([]ladder.AuditRecord, error) {
	if err := s.reading(); err != nil {
		return nil, fmt.Errorf("list audit: %w", err)
	}
	query, args := auditListQuery(q)
	if kindAcrossWorkspaces(q) {
		// Planned with its values every time (the unnamed statement), not
		// settled on a generic plan: that one walks the whole log in seq
		// order for any kind, as if each were common (see
		// TestAuditKindAcrossWorkspacesPlan), which for a rare one reads
		// every record.
		args = append([]any{pgx.QueryExecModeExec}, args...)
	}
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list audit: %w", s.mapErr(err))
	}
	recs, err := collect(rows, scanAudit)
	if err != nil {
		return nil, fmt.Errorf("list audit: %w", s.mapErr(err))
	}
	return recs, nil
}

// auditListQuery is ListAudit's statement and arguments for q. A kind
// filter across every workspace becomes a LATERAL join over the workspace
// heads: each workspace's first page of the kind, read on
// audit_by_workspace_kind, then the first page of those. One statement
// keeps it one snapshot.
func auditListQuery(q ladder.AuditQuery) (string, []any) {
	var (
		where []string
		args  []any
	)
	cond := func(expr string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(expr, len(args)))
	}
	perWorkspace := kindAcrossWorkspaces(q)
	if perWorkspace {
		where = append(where, "workspace = h.workspace")
	}
	for _, f := range []struct{ col, val string }{
		{"workspace", q.Workspace}, {"kind", q.Kind}, {"actor", q.Actor}, {"step", q.Step}, {"queue", q.Queue},
	} {
		if f.val != "" {
			cond(f.col+" = $%d", f.val)
		}
	}
	if q.Step != "" {
		// Implied by step = $n, but a generic plan cannot see that: the
		// planner uses the partial step index (migration 0016) only when
		// the query names its WHERE term.
		where = append(where, "step <> ''")
	}
	if !q.Since.IsZero() {
		cond("at >= $%d", q.Since)
	}
	if !q.Until.IsZero() {
		cond("at < $%d", q.Until)
	}
	order := "seq"
	if q.Desc {
		if q.BeforeSeq > 0 {
			cond("seq < $%d", q.BeforeSeq)
		}
		order = "seq DESC"
	} else {
		cond("seq > $%d", q.AfterSeq)
	}
	query := `SELECT ` + auditColumns + ` FROM audit`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, " AND ")
	}
	args = append(args, ladder.PageLimit(q.Limit))
	query += fmt.Sprintf(` ORDER BY %s LIMIT $%d`, order, len(args))
	if perWorkspace {
		query = fmt.Sprintf(`SELECT a.* FROM audit_ws_head AS h CROSS JOIN LATERAL (%s) AS a ORDER BY a.%s LIMIT $%d`, query, order, len(args))
	}
	return query, args
}

// kindAcrossWorkspaces reports whether q is a kind filter across every
// workspace, which auditListQuery reads one workspace at a time.
func kindAcrossWorkspaces(q ladder.AuditQuery) bool { return q.Workspace == "" && q.Kind != "" }

// walkPage is how many records WalkAudit reads per query, so a slow fn does
// not hold one query (and its snapshot) open for the whole walk.
const walkPage = 1000

// WalkAudit calls fn for every record with seq > afterSeq, in order,
// stopping at the first error fn returns.
func (s *Store) WalkAudit(ctx context.Context, afterSeq int64, fn func(ladder.AuditRecord) error) error {
	if err := s.reading(); err != nil {
		return fmt.Errorf("walk audit: %w", err)
	}
	read := func(after int64, limit int) ([]ladder.AuditRecord, error) {
		rows, err := s.pool.Query(ctx, `SELECT `+auditColumns+` FROM audit WHERE seq > $1 ORDER BY seq LIMIT $2`, after, limit)
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

func scanAudit(r pgx.Row) (ladder.AuditRecord, error) {
	var (
		rec  ladder.AuditRecord
		data []byte
	)
	if err := r.Scan(&rec.Seq, &rec.Workspace, &rec.Actor, &rec.Kind, &rec.Subject, &rec.At, &data, &rec.PrevHash, &rec.Hash); err != nil {
		return ladder.AuditRecord{}, err
	}
	rec.At = rec.At.UTC()
	rec.Data = data
	return rec, nil
}

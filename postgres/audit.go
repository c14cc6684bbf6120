package postgres

import (
	"context"
	"fmt"
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
	norm := make([]ladder.AuditEntry, len(entries))
	for i, e := range entries {
		if e.At.IsZero() {
			e.At = w.s.now()
		}
		e.At = normTime(e.At)
		data, err := ladder.CanonicalJSON(e.Data)
		if err != nil {
			return fmt.Errorf("audit %s data: %w", e.Kind, err)
		}
		e.Data = data
		norm[i] = e
	}
	w.audit = append(w.audit, pendingAudit{entries: norm, out: out})
	return nil
}

// flush appends the audit entries the batch's ops queued and sends their
// notifications, as the last statements before the commit.
//
// The chain's head is locked (audit_head, FOR UPDATE) only here, so the
// lock is held from the insert to the commit and no longer, and it is the
// last lock any write transaction takes: appends from every replica are
// serialized by the database without a lock-order cycle through the head.
func (w *wtx) flush() error {
	if n := countEntries(w.audit); n > 0 {
		var (
			seq  int64
			prev string
		)
		if err := w.queryRow(`SELECT seq, hash FROM audit_head WHERE id FOR UPDATE`).Scan(&seq, &prev); err != nil {
			return fmt.Errorf("audit head: %w", err)
		}
		var (
			seqs                                        = make([]int64, 0, n)
			wss, actors, kinds, subjects, prevs, hashes = make([]string, 0, n), make([]string, 0, n), make([]string, 0, n), make([]string, 0, n), make([]string, 0, n), make([]string, 0, n)
			ats                                         = make([]time.Time, 0, n)
			datas                                       = make([][]byte, 0, n)
			queues, steps                               = make([]string, 0, n), make([]string, 0, n)
		)
		for _, p := range w.audit {
			recs := make([]ladder.AuditRecord, 0, len(p.entries))
			for _, e := range p.entries {
				seq++
				rec := ladder.AuditRecord{Seq: seq, AuditEntry: e}
				rec.Seal(prev)
				prev = rec.Hash
				recs = append(recs, rec)
				seqs, wss, actors, kinds, subjects = append(seqs, rec.Seq), append(wss, rec.Workspace), append(actors, rec.Actor), append(kinds, rec.Kind), append(subjects, rec.Subject)
				ats, datas, prevs, hashes = append(ats, rec.At), append(datas, []byte(rec.Data)), append(prevs, rec.PrevHash), append(hashes, rec.Hash)
				queue, step := ladder.AuditStepOf(rec.Data)
				queues, steps = append(queues, queue), append(steps, step)
			}
			if p.out != nil {
				*p.out = recs
			}
		}
		// One statement: insert every record and move the head.
		if _, err := w.exec(`WITH ins AS (
				INSERT INTO audit (`+auditColumns+`, queue, step)
				SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[], $7::bytea[], $8::text[], $9::text[], $12::text[], $13::text[])
			)
			UPDATE audit_head SET seq = $10, hash = $11 WHERE id`,
			seqs, wss, actors, kinds, subjects, ats, datas, prevs, hashes, seq, prev, queues, steps); err != nil {
			return fmt.Errorf("insert audit: %w", err)
		}
	}
	if err := w.flushEvents(); err != nil {
		return err
	}
	if len(w.notify) > 0 {
		if _, err := w.exec(`SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p`, notifyChannel, dedupe(w.notify)); err != nil {
			return fmt.Errorf("notify: %w", err)
		}
	}
	return nil
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
// of the one that narrows (migrations 0001 and 0011).
func (s *Store) ListAudit(ctx context.Context, q ladder.AuditQuery) ([]ladder.AuditRecord, error) {
	if err := s.reading(); err != nil {
		return nil, fmt.Errorf("list audit: %w", err)
	}
	limit := ladder.PageLimit(q.Limit)
	var (
		where []string
		args  []any
	)
	cond := func(expr string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(expr, len(args)))
	}
	for _, f := range []struct{ col, val string }{
		{"workspace", q.Workspace}, {"kind", q.Kind}, {"actor", q.Actor}, {"step", q.Step}, {"queue", q.Queue},
	} {
		if f.val != "" {
			cond(f.col+" = $%d", f.val)
		}
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
	args = append(args, limit)
	query += fmt.Sprintf(` ORDER BY %s LIMIT $%d`, order, len(args))
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

package service

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ladderhq/ladder"
)

// Audit trail page sizes (GET /v1/audit): DESIGN.md §3.2's list default and
// maximum.
const (
	DefaultAuditLimit = 50
	MaxAuditLimit     = 500
)

// exportPage is the most records an export reads per store query: a
// bounded read, and no query (with its snapshot) open while the records
// are written to a slow client. Reads are smaller when records are large
// (exportChunk).
const exportPage = 500

// exportChunk is how many records an export's next store read asks for:
// about PageBytes of them at the size of the records read so far (records
// carry call payloads of up to a request body each), between 1 and
// exportPage, and firstChunk before any size is known.
func exportChunk(seen, seenBytes int) int {
	if seen == 0 {
		return firstChunk
	}
	return max(1, min(exportPage, PageBytes/max(seenBytes/seen, 1)))
}

var auditCursor = cursor{"au1:", "pass next_cursor from the previous page unchanged, or leave cursor out to start from the newest record"}

// AuditCursor returns the cursor of the page of records older than seq. The
// console turns its older page links (?before=SEQ) into cursors with it.
func AuditCursor(beforeSeq int64) string { return auditCursor.encode(beforeSeq) }

// auditScope is the workspace whose records p may read: its own, or every
// workspace for an operator's admin key of all workspaces.
func auditScope(p ladder.Principal) string {
	if p.Workspace == AllWorkspaces {
		return ""
	}
	return p.Workspace
}

// auditQuery checks req's filters and turns them into a store query of
// workspace ("" for all). Every bad value is refused naming its field.
func auditQuery(workspace string, req ladder.AuditListRequest) (ladder.AuditQuery, error) {
	q := ladder.AuditQuery{Workspace: workspace, Kind: req.Kind, Actor: req.Actor}
	if req.Step != "" {
		queue, step, ok := strings.Cut(req.Step, "/")
		if !ok {
			queue, step = "", req.Step
		}
		if step == "" || strings.Contains(step, "/") || ok && queue == "" {
			return q, ladder.InvalidField("step", fmt.Sprintf("The step %q is not a step id or queue/step.", req.Step),
				"send a step id like post_tms, or queue/step like bills/post_tms")
		}
		q.Queue, q.Step = queue, step
	}
	var err error
	if q.Since, err = auditTime("since", req.Since, false); err != nil {
		return q, err
	}
	if q.Until, err = auditTime("until", req.Until, true); err != nil {
		return q, err
	}
	return q, nil
}

// auditTime parses a since or until bound: RFC 3339, or a date meaning
// that day (UTC) — its start for since, its end for until, so
// since=2026-09-01&until=2026-09-30 covers both days whole.
func auditTime(field, in string, end bool) (time.Time, error) {
	if in == "" {
		return time.Time{}, nil
	}
	if d, err := time.Parse(time.DateOnly, in); err == nil {
		if end {
			d = d.AddDate(0, 0, 1)
		}
		return d, nil
	}
	t, err := time.Parse(time.RFC3339Nano, in)
	if err != nil {
		return time.Time{}, ladder.InvalidField(field, fmt.Sprintf("The %s value %q is not an RFC 3339 time or a date.", field, in),
			fmt.Sprintf("send %s like 2026-09-01 or 2026-09-01T09:00:00Z", field))
	}
	// Stored times are whole microseconds; rounding a bound up keeps
	// "at >= since" and "at < until" exact for them.
	if tr := t.Truncate(time.Microsecond); !tr.Equal(t) {
		t = tr.Add(time.Microsecond)
	}
	return t.UTC(), nil
}

// AuditReader answers the audit trail's queries from a store: the
// service's for a key (scoped to its workspace), or a database the CLI
// opened read-only (ladder audit list|verify|export --db). The rules of
// filters, paging and verification live here once for both.
type AuditReader struct {
	Store ladder.ChainStore
	// Progress, when set, is called by Verify every 100,000 records
	// verified (long work shows progress).
	Progress func(verified int64)
}

// AuditList returns one page of p's workspace's audit trail, newest first,
// filtered by req.
func (s *Service) AuditList(ctx context.Context, p ladder.Principal, req ladder.AuditListRequest) (ladder.AuditPage, error) {
	page, err := AuditReader{Store: s.store}.List(ctx, auditScope(p), req)
	page.Workspace = p.Workspace
	return page, err
}

// AuditExport calls fn for every record of p's workspace's audit trail
// matching req, oldest first (see AuditReader.Export).
func (s *Service) AuditExport(ctx context.Context, p ladder.Principal, req ladder.AuditListRequest, fn func(ladder.AuditRecord) error) error {
	return AuditReader{Store: s.store}.Export(ctx, auditScope(p), req, fn)
}

// AuditVerify walks every hash chain and says how far they verify (see
// AuditReader.Verify), then re-checks p's workspace's transparency log (of
// every workspace for an admin key of all; see verifyLog).
func (s *Service) AuditVerify(ctx context.Context, p ladder.Principal) (ladder.AuditVerifyResult, error) {
	res, err := AuditReader{Store: s.store}.Verify(ctx)
	if err != nil {
		return res, err
	}
	wss := []string{p.Workspace}
	if p.Workspace == AllWorkspaces {
		if wss, err = s.store.TlogWorkspaces(ctx, false); err != nil {
			return res, storeErr("verify logs", err)
		}
	}
	res.Logs = make([]ladder.AuditLogVerdict, 0, len(wss))
	for _, ws := range wss {
		v, err := s.verifyLog(ctx, ws)
		if err != nil {
			return res, storeErr("verify log", err)
		}
		res.Intact = res.Intact && v.Intact
		res.Logs = append(res.Logs, v)
	}
	return res, nil
}

// List returns one page of workspace's audit trail ("" for every
// workspace), newest first, filtered by req. The cursor names the seq the
// next page starts below, so paging neither skips nor repeats a record
// while others are appended.
func (a AuditReader) List(ctx context.Context, workspace string, req ladder.AuditListRequest) (ladder.AuditPage, error) {
	limit := req.Limit
	switch {
	case limit == 0:
		limit = DefaultAuditLimit
	case limit < 1 || limit > MaxAuditLimit:
		return ladder.AuditPage{}, ladder.InvalidField("limit", fmt.Sprintf("The limit %d is out of range 1–%d.", req.Limit, MaxAuditLimit),
			fmt.Sprintf("send a limit from 1 to %d (default %d) and page on with next_cursor", MaxAuditLimit, DefaultAuditLimit))
	}
	q, err := auditQuery(workspace, req)
	if err != nil {
		return ladder.AuditPage{}, err
	}
	q.Desc = true
	if req.Cursor != "" {
		if q.BeforeSeq, err = auditCursor.decode(req.Cursor); err != nil {
			return ladder.AuditPage{}, err
		}
	}
	page := ladder.AuditPage{Workspace: workspace, Records: []ladder.AuditRecord{}}
	// A page holds at most limit records and ends early once their data
	// reaches PageBytes (a call's payload may be large).
	b := pageBudget{limit: limit}
read:
	for {
		q.Limit = b.chunk()
		recs, err := a.Store.ListAudit(ctx, q)
		if err != nil {
			return ladder.AuditPage{}, storeErr("list audit", err)
		}
		for _, r := range recs {
			if b.full() {
				page.HasMore = true
				page.NextCursor = auditCursor.encode(q.BeforeSeq)
				break read
			}
			b.saw(len(r.Data))
			b.add(len(r.Data))
			page.Records = append(page.Records, r)
			q.BeforeSeq = r.Seq
		}
		if len(recs) < q.Limit {
			break
		}
	}
	return page, nil
}

// Export calls fn for every record of workspace's audit trail ("" for
// every workspace) matching req, oldest first, up to the newest record
// when the export starts. It reads the store a page at a time, so an
// export of any size holds one page in memory; it stops at the first error
// fn returns (a client gone, say) and when ctx ends. req takes no cursor
// or limit.
func (a AuditReader) Export(ctx context.Context, workspace string, req ladder.AuditListRequest, fn func(ladder.AuditRecord) error) error {
	switch {
	case req.Cursor != "":
		return ladder.InvalidField("cursor", "An export takes no cursor.", "leave cursor out; an export holds every matching record, oldest first")
	case req.Limit != 0:
		return ladder.InvalidField("limit", "An export takes no limit.", "leave limit out, or narrow the export with since and until")
	}
	q, err := auditQuery(workspace, req)
	if err != nil {
		return err
	}
	// The head bounds the export, so appends made while it streams do not
	// keep it going.
	head, err := a.Store.ListAudit(ctx, ladder.AuditQuery{Desc: true, Limit: 1})
	if err != nil {
		return storeErr("audit head", err)
	}
	if len(head) == 0 {
		return nil
	}
	last := head[0].Seq
	seen, seenBytes := 0, 0
	for {
		q.Limit = exportChunk(seen, seenBytes)
		recs, err := a.Store.ListAudit(ctx, q)
		if err != nil {
			return storeErr("export audit", err)
		}
		for _, r := range recs {
			if r.Seq > last {
				return nil
			}
			if err := fn(r); err != nil {
				return err
			}
			q.AfterSeq = r.Seq
			seen, seenBytes = seen+1, seenBytes+len(r.Data)
		}
		if len(recs) < q.Limit {
			return nil
		}
	}
}

// chainBreak carries the verifier's verdict out of a walk, told apart from
// a store failure.
type chainBreak struct{ err error }

func (c chainBreak) Error() string { return c.err.Error() }

// Verify walks every workspace's hash chain and says how far they verify.
// The records before per-workspace chains (migration 0014) form one chain
// across workspaces, so the walk reads them all; the result holds only
// counts, sequence numbers and a hash, never a record's content. The walk
// streams (WalkAudit reads a page at a time) and stops when ctx ends.
//
// On PostgreSQL, records of different workspaces may commit out of seq
// order, so a walk beside live appends can pass a record that commits
// after the walk read past its seq, and then see its workspace's next
// record chain to a record it never saw. A break is therefore walked
// again from the start once: a real one is found again.
func (a AuditReader) Verify(ctx context.Context) (ladder.AuditVerifyResult, error) {
	res, err := a.verifyOnce(ctx)
	if err != nil || res.Intact {
		return res, err
	}
	return a.verifyOnce(ctx)
}

func (a AuditReader) verifyOnce(ctx context.Context) (ladder.AuditVerifyResult, error) {
	m, err := a.Store.TlogMeta(ctx)
	if err != nil {
		return ladder.AuditVerifyResult{}, storeErr("verify audit", err)
	}
	v := ladder.ChainVerifier{GlobalThrough: m.ChainSeq}
	var bad int64
	err = a.Store.WalkAudit(ctx, 0, func(r ladder.AuditRecord) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := v.Check(r); err != nil {
			bad = r.Seq
			return chainBreak{err}
		}
		if a.Progress != nil && v.Count()%100000 == 0 {
			a.Progress(v.Count())
		}
		return nil
	})
	if err == nil {
		if end := v.End(); end != nil {
			bad, err = v.LastSeq()+1, chainBreak{end}
		}
	}
	res := ladder.AuditVerifyResult{Intact: true, Verified: v.Count(), LastHash: v.LastHash()}
	var cb chainBreak
	switch {
	case errors.As(err, &cb):
		res.Intact, res.FirstBadSeq, res.Reason = false, &bad, cb.err.Error()
	case err != nil:
		return ladder.AuditVerifyResult{}, storeErr("verify audit", err)
	}
	return res, nil
}

// WalkAudit calls fn for every record after afterSeq, in order: verifying
// the chains needs every workspace's records, since those written before
// per-workspace chains share one. Callers show only the verdict, never the
// records.
func (s *Service) WalkAudit(ctx context.Context, afterSeq int64, fn func(ladder.AuditRecord) error) error {
	return s.store.WalkAudit(ctx, afterSeq, fn)
}

// AuditChainSeq returns the last seq of the global chain that records
// before per-workspace chains form (ladder.ChainVerifier.GlobalThrough).
func (s *Service) AuditChainSeq(ctx context.Context) (int64, error) {
	m, err := s.store.TlogMeta(ctx)
	if err != nil {
		return 0, storeErr("audit chain", err)
	}
	return m.ChainSeq, nil
}

package service

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ladderhq/ladder"
)

// Inbox page sizes.
const (
	DefaultInboxPage = 25
	MaxInboxPage     = 100
)

const (
	// inboxScan bounds the rows one source of the inbox reads for one page,
	// so a page costs the same with ten thousand reviewed shadow records
	// behind it. A source that reaches it holds the page there; the next
	// page reads on.
	inboxScan = 1000
	// inboxAuditBatch is how many route records one read of the audit
	// source fetches: most routes are not sampled, and records are small.
	inboxAuditBatch = 200
)

// Inbox pages what waits for a person of p's workspace, newest first:
// pending approvals, shadow proposals and sampled audits not reviewed
// yet. The three are merged by time; the cursor holds where each one
// stands, so every item shows on exactly one page however many there are.
func (s *Service) Inbox(ctx context.Context, p ladder.Principal, cursor string, limit int) (ladder.InboxPage, error) {
	return s.inbox(ctx, p, cursor, limit, inboxScan)
}

// inbox is Inbox with scan rows at most read per source.
func (s *Service) inbox(ctx context.Context, p ladder.Principal, cursor string, limit, scan int) (ladder.InboxPage, error) {
	switch {
	case limit == 0:
		limit = DefaultInboxPage
	case limit < 0 || limit > MaxInboxPage:
		return ladder.InboxPage{}, argError("limit", fmt.Sprintf("%d is out of range", limit), fmt.Sprintf("use 1 to %d (default %d)", MaxInboxPage, DefaultInboxPage))
	}
	pos := [3]int64{}
	if cursor != "" {
		var err error
		if pos, err = decodeInboxCursor(cursor); err != nil {
			return ladder.InboxPage{}, err
		}
	}
	rv := &reviewedRoutes{s: s, ctx: ctx, ws: p.Workspace, m: map[string]map[string]bool{}}
	srcs := [3]*inboxSource{
		{batch: limit + 1, scan: scan, fetch: s.approvalRows(ctx, p.Workspace, ladder.ApprovalPending, func(a ladder.Approval) (bool, error) {
			// The store has stored the expiry of what is past due by its
			// clock; this replica's clock does not decide.
			return a.Status == ladder.ApprovalPending, nil
		})},
		{batch: limit + 1, scan: scan, fetch: s.approvalRows(ctx, p.Workspace, ladder.ApprovalShadow, func(a ladder.Approval) (bool, error) {
			if a.RouteID == "" {
				return false, nil
			}
			done, err := rv.reviewed(a.Queue, a.Step, a.RouteID)
			return !done, err
		})},
		{batch: min(inboxAuditBatch, scan), scan: scan, fetch: s.auditRows(ctx, p.Workspace, rv)},
	}
	for i, src := range srcs {
		src.pos, src.done = pos[i], pos[i] < 0
	}

	page := ladder.InboxPage{Items: []ladder.InboxItem{}}
	for len(page.Items) < limit {
		best, bestAt := -1, time.Time{}
		for i, src := range srcs {
			if err := src.fill(); err != nil {
				return ladder.InboxPage{}, err
			}
			at, ok := src.head()
			if ok && (best < 0 || at.After(bestAt)) {
				best, bestAt = i, at
			}
		}
		if best < 0 || len(srcs[best].buf) == 0 {
			// Every source is read to its end, or the newest place left is
			// one a source has not read up to yet (it spent its reads).
			break
		}
		src := srcs[best]
		page.Items = append(page.Items, src.buf[0].item)
		src.buf = src.buf[1:]
	}
	more := false
	for i, src := range srcs {
		// Read on, so a source that has nothing left says so now rather
		// than with an empty next page.
		if err := src.fill(); err != nil {
			return ladder.InboxPage{}, err
		}
		pos[i] = src.next()
		more = more || pos[i] >= 0
	}
	if more {
		page.NextCursor = encodeInboxCursor(pos)
	}

	lanes := map[ladder.StepKey]ladder.Lane{}
	for i := range page.Items {
		it := &page.Items[i]
		if it.Kind != ladder.InboxApproval {
			continue
		}
		l, err := s.stepLanes(ctx, it.Approval.Approval, lanes)
		if err != nil {
			return ladder.InboxPage{}, err
		}
		it.Lanes = l
	}
	return page, nil
}

// ApprovalLanes returns, for a step-tied approval of p's workspace, the
// lane its step was in when the agent proposed and the lane it is in now;
// for any other approval, nothing.
func (s *Service) ApprovalLanes(ctx context.Context, p ladder.Principal, a ladder.Approval) (ladder.StepLanes, error) {
	if a.Workspace != p.Workspace {
		return ladder.StepLanes{}, nil
	}
	return s.stepLanes(ctx, a, map[ladder.StepKey]ladder.Lane{})
}

// stepLanes reads the lane of a's route (the lane when it was proposed)
// and of its step now; now caches the steps' lanes across calls.
func (s *Service) stepLanes(ctx context.Context, a ladder.Approval, now map[ladder.StepKey]ladder.Lane) (ladder.StepLanes, error) {
	if a.RouteID == "" || a.Step == "" {
		return ladder.StepLanes{}, nil
	}
	rt, err := s.store.GetRoute(ctx, a.Workspace, a.RouteID)
	if errors.Is(err, ladder.ErrNotFound) {
		return ladder.StepLanes{}, nil
	}
	if err != nil {
		return ladder.StepLanes{}, storeErr("get route", err)
	}
	key := ladder.StepKey{Workspace: a.Workspace, Queue: rt.Queue, Step: rt.Step}
	lane, ok := now[key]
	if !ok {
		st, err := s.store.GetStepState(ctx, key)
		if err != nil && !errors.Is(err, ladder.ErrNotFound) {
			return ladder.StepLanes{}, storeErr("get step state", err)
		}
		lane, now[key] = st.Lane, st.Lane
	}
	return ladder.StepLanes{Proposed: rt.Lane, Now: lane}, nil
}

// inboxRow is one row a source read: its place in the source, its time,
// and the item when the row is one the inbox shows.
type inboxRow struct {
	seq  int64
	at   time.Time
	keep bool
	item ladder.InboxItem
}

// inboxSource is one of the inbox's lists, read newest first in batches.
type inboxSource struct {
	batch int
	scan  int // rows it may read for one page
	fetch func(before int64, limit int) ([]inboxRow, error)
	// pos is where the next read starts (rows before it; 0 for the newest).
	pos  int64
	done bool // read to the end
	// buf holds the rows read and kept but not yet on the page.
	buf     []inboxRow
	scanned int
	// frontier is the time of the last row read: while buf is empty and
	// the source is not done, nothing newer than it is left unread.
	frontier time.Time
}

// fill reads until the source has an item, is done, or spent its reads.
func (src *inboxSource) fill() error {
	for len(src.buf) == 0 && !src.done && src.scanned < src.scan {
		rows, err := src.fetch(src.pos, src.batch)
		if err != nil {
			return err
		}
		src.scanned += len(rows)
		for _, r := range rows {
			src.pos, src.frontier = r.seq, r.at
			if r.keep {
				src.buf = append(src.buf, r)
			}
		}
		if len(rows) < src.batch {
			src.done = true
		}
	}
	return nil
}

// head is the time of the source's newest unplaced item, or of its read
// frontier when it spent its reads; ok is false when it is done.
func (src *inboxSource) head() (time.Time, bool) {
	switch {
	case len(src.buf) > 0:
		return src.buf[0].at, true
	case src.done:
		return time.Time{}, false
	}
	return src.frontier, true
}

// next is where the source's next page starts: its first unplaced item,
// or the end of what it read; -1 when nothing is left.
func (src *inboxSource) next() int64 {
	switch {
	case len(src.buf) > 0:
		return src.buf[0].seq + 1
	case src.done:
		return -1
	}
	return src.pos
}

// approvalRows reads approvals of one stored status; keep says which the
// inbox shows.
func (s *Service) approvalRows(ctx context.Context, ws string, st ladder.ApprovalStatus, keep func(ladder.Approval) (bool, error)) func(int64, int) ([]inboxRow, error) {
	kind := ladder.InboxApproval
	if st == ladder.ApprovalShadow {
		kind = ladder.InboxShadow
	}
	return func(before int64, limit int) ([]inboxRow, error) {
		rows, err := s.store.ListApprovals(ctx, ladder.ApprovalQuery{Workspace: ws, Status: st, BeforeSeq: before, Limit: limit})
		if err != nil {
			return nil, storeErr("list approvals", err)
		}
		out := make([]inboxRow, 0, len(rows))
		for _, a := range rows {
			k, err := keep(a)
			if err != nil {
				return nil, err
			}
			r := inboxRow{seq: a.Seq, at: a.CreatedAt, keep: k}
			if k {
				v := s.view(a)
				r.item = ladder.InboxItem{Kind: kind, At: a.CreatedAt, Approval: &v}
			}
			out = append(out, r)
		}
		return out, nil
	}
}

// routeRecord is the data of a route's audit record.
type routeRecord struct {
	Queue     string          `json:"queue"`
	Step      string          `json:"step"`
	Item      string          `json:"item"`
	Decision  ladder.Decision `json:"decision"`
	Lane      ladder.Lane     `json:"lane"`
	LaneEpoch int             `json:"lane_epoch"`
	Audit     bool            `json:"audit"`
	AuditRate float64         `json:"audit_rate"`
	Features  json.RawMessage `json:"features"`
}

// auditRows reads route records and keeps the sampled ones not reviewed.
func (s *Service) auditRows(ctx context.Context, ws string, rv *reviewedRoutes) func(int64, int) ([]inboxRow, error) {
	return func(before int64, limit int) ([]inboxRow, error) {
		recs, err := s.store.ListAudit(ctx, ladder.AuditQuery{Workspace: ws, Kind: ladder.AuditRoute, Desc: true, BeforeSeq: before, Limit: limit})
		if err != nil {
			return nil, storeErr("list audit", err)
		}
		out := make([]inboxRow, 0, len(recs))
		for _, rec := range recs {
			r := inboxRow{seq: rec.Seq, at: rec.At}
			var d routeRecord
			if json.Unmarshal(rec.Data, &d) == nil && d.Audit {
				done, err := rv.reviewed(d.Queue, d.Step, rec.Subject)
				if err != nil {
					return nil, err
				}
				if !done {
					rt := ladder.Route{ID: rec.Subject, Workspace: rec.Workspace, Queue: d.Queue, Step: d.Step, Item: d.Item, Decision: d.Decision, Lane: d.Lane,
						Audit: true, AuditRate: d.AuditRate, Features: d.Features, KeyID: rec.Actor, At: rec.At, LaneEpoch: d.LaneEpoch}
					r.keep, r.item = true, ladder.InboxItem{Kind: ladder.InboxAudit, At: rec.At, Route: &rt}
				}
			}
			out = append(out, r)
		}
		return out, nil
	}
}

// reviewedRoutes answers "is this route reviewed?" from each step's latest
// reviews, read once per step per page.
type reviewedRoutes struct {
	s   *Service
	ctx context.Context
	ws  string
	m   map[string]map[string]bool // "queue/step" → route id → reviewed
}

// reviewWindow is how many of a step's latest reviews the inbox reads to
// leave out what is reviewed already.
const reviewWindow = 1000

func (r *reviewedRoutes) reviewed(queue, step, routeID string) (bool, error) {
	k := queue + "/" + step
	m, ok := r.m[k]
	if !ok {
		rows, err := r.s.store.Reviews(r.ctx, ladder.ReviewQuery{Key: ladder.StepKey{Workspace: r.ws, Queue: queue, Step: step}, Limit: reviewWindow})
		if err != nil {
			return false, storeErr("reviews", err)
		}
		m = make(map[string]bool, len(rows))
		for _, rv := range rows {
			m[rv.RouteID] = true
		}
		r.m[k] = m
	}
	return m[routeID], nil
}

// inboxCursorPrefix names the inbox's cursor and its format version.
const inboxCursorPrefix = "ib1:"

// encodeInboxCursor writes where each source stands (-1: read to its end).
func encodeInboxCursor(pos [3]int64) string {
	parts := make([]string, len(pos))
	for i, p := range pos {
		parts[i] = strconv.FormatInt(p, 10)
	}
	return base64.RawURLEncoding.EncodeToString([]byte(inboxCursorPrefix + strings.Join(parts, ".")))
}

func decodeInboxCursor(s string) ([3]int64, error) {
	bad := &ladder.Error{Code: ladder.CodeBadCursor, Message: "The cursor is not one this server issued.",
		Hint: "follow the inbox's link to older items unchanged, or leave cursor out for the newest", Data: map[string]any{"field": "cursor"}}
	var pos [3]int64
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return pos, bad
	}
	body, ok := strings.CutPrefix(string(raw), inboxCursorPrefix)
	parts := strings.Split(body, ".")
	if !ok || len(parts) != len(pos) {
		return pos, bad
	}
	for i, p := range parts {
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil || n < -1 || strconv.FormatInt(n, 10) != p {
			return pos, bad
		}
		pos[i] = n
	}
	return pos, nil
}

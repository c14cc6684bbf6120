package postgres

import (
	"context"
	"fmt"

	"github.com/ladderhq/ladder"
)

// RouteAndBeginCall records a route and begins the call it decided in one
// op of the writer's batch: RecordRoute's statements, then BeginCall's
// (the guard's key-share-locked lane epoch read in the same transaction),
// so the call waits for one commit. A route that exists already ends the
// op there; an error in either part rolls back both.
func (s *Store) RouteAndBeginCall(ctx context.Context, r ladder.Route, routeAudit ladder.AuditEntry, c ladder.Call, callAudit ladder.AuditEntry) (ladder.RouteCall, error) {
	r = r.Resolved(s.now())
	c.StartedAt = normTime(c.StartedAt)
	var (
		out  ladder.RouteCall
		recs []ladder.AuditRecord
	)
	err := s.write(ctx, func(w *wtx) error { return w.routeAndBeginCall(r, routeAudit, c, callAudit, &out, &recs) })
	if err != nil {
		return ladder.RouteCall{}, fmt.Errorf("route and begin call: %w", err)
	}
	if out.CallCreated && len(recs) > 0 {
		out.Call.AuditSeq = recs[0].Seq
	}
	out.Route.StateAuditRate = 0 // not stored: the route as stored
	return out, nil
}

// routeAndBeginCall is RouteAndBeginCall's op; recs receives the call's
// audit record once the batch has appended it.
func (w *wtx) routeAndBeginCall(r ladder.Route, routeAudit ladder.AuditEntry, c ladder.Call, callAudit ladder.AuditEntry, out *ladder.RouteCall, recs *[]ladder.AuditRecord) error {
	// A batch run again op by op runs this again from nothing.
	*out, *recs = ladder.RouteCall{}, nil
	if err := w.recordRoute(r, routeAudit, &out.Route, &out.RouteCreated); err != nil {
		return err
	}
	// In an optimistic run the route is only queued: insert it now (with
	// the routes queued before it), since whether it was created decides
	// the rest of the op.
	if err := w.flushRoutes(); err != nil {
		return err
	}
	if !out.RouteCreated {
		return nil
	}
	return w.beginCall(c, callAudit, &out.Call, &out.CallCreated, recs)
}

package sqlite

import (
	"context"
	"fmt"

	"github.com/ladderhq/ladder"
)

// RouteAndBeginCall records a route and begins the call it decided in one
// op of the writer's batch: RecordRoute's statements, then BeginCall's
// (the guard's lane epoch read in the same transaction), so the call waits
// for one commit. A route that exists already ends the op there; an error
// in either part rolls back both.
func (s *Store) RouteAndBeginCall(ctx context.Context, r ladder.Route, routeAudit ladder.AuditEntry, c ladder.Call, callAudit ladder.AuditEntry) (ladder.RouteCall, error) {
	r = r.Resolved(s.now())
	c.StartedAt = normTime(c.StartedAt)
	ready, err := s.readyAudit([]ladder.AuditEntry{routeAudit})
	if err != nil {
		return ladder.RouteCall{}, fmt.Errorf("route and begin call: %w", err)
	}
	rc, err := s.readyCall(c, callAudit)
	if err != nil {
		return ladder.RouteCall{}, fmt.Errorf("route and begin call: %w", err)
	}
	var out ladder.RouteCall
	err = s.writeCall(ctx, func(w *wtx) error {
		// A retried op starts from nothing.
		out = ladder.RouteCall{}
		if err := w.recordRoute(r, ready, &out.Route, &out.RouteCreated); err != nil {
			return err
		}
		if !out.RouteCreated {
			return nil
		}
		return w.beginCall(rc, &out.Call, &out.CallCreated)
	})
	rc.release()
	if err != nil {
		return ladder.RouteCall{}, fmt.Errorf("route and begin call: %w", err)
	}
	s.began(out.Call, out.CallCreated)
	out.Route.StateAuditRate = 0 // not stored: the route as stored
	return out, nil
}

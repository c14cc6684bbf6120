package http_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/internal/testenv"
)

// commitStore counts the writes that commit a step-tied call's route and
// begun record, and runs hook once, just before the first guarded call
// commits: the moment between deciding that the agent may act alone and
// committing that decision.
type commitStore struct {
	ladder.Store
	hook                            atomic.Pointer[func()]
	routes, begins, routesAndBegins atomic.Int64
}

func (c *commitStore) runHook() {
	if f := c.hook.Swap(nil); f != nil {
		(*f)()
	}
}

func (c *commitStore) RecordRoute(ctx context.Context, r ladder.Route, a ladder.AuditEntry) (ladder.Route, bool, error) {
	c.routes.Add(1)
	return c.Store.RecordRoute(ctx, r, a)
}

func (c *commitStore) BeginCall(ctx context.Context, call ladder.Call, a ladder.AuditEntry) (ladder.Call, bool, error) {
	c.begins.Add(1)
	if call.Guard != nil {
		c.runHook()
	}
	return c.Store.BeginCall(ctx, call, a)
}

func (c *commitStore) RouteAndBeginCall(ctx context.Context, r ladder.Route, ra ladder.AuditEntry, call ladder.Call, ca ladder.AuditEntry) (ladder.RouteCall, error) {
	c.routesAndBegins.Add(1)
	c.runHook()
	return c.Store.RouteAndBeginCall(ctx, r, ra, call, ca)
}

// auditTrail lists a workspace's audit records as kind/subject, oldest
// first.
func auditTrail(t *testing.T, e *testenv.Env, ws string) []string {
	t.Helper()
	var out []string
	if err := e.Store.WalkAudit(t.Context(), 0, func(r ladder.AuditRecord) error {
		if r.Workspace == ws {
			out = append(out, r.Kind+"/"+r.Subject)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestActAloneCallCommitsWithItsRoute: a call to a step-tied capability
// whose step runs alone records its route and its begun record in one
// write, before the upstream runs; the audit records are those of the two
// writes it replaced, in the same order. A retry under the same
// idempotency key replays, and a second call for the same item (the item's
// route exists) begins under that route.
func TestActAloneCallCommitsWithItsRoute(t *testing.T) {
	var cs *commitStore
	e := testenv.StartWith(t, "", testenv.Options{WrapStore: func(s ladder.Store) ladder.Store { cs = &commitStore{Store: s}; return cs }})
	agent := e.Keys["vantrow-bills/agent"]
	before := auditTrail(t, e, "vantrow-bills")

	r := mustDo(t, e, 200, "POST", "/v1/capabilities/tms:postBill/call", agent, map[string]any{"bill_id": "B-1", "amount_usd": 5, "idempotency_key": "B-1"})
	if r.Body["status"] != "executed" || r.Body["decision"] != "act_alone" {
		t.Fatalf("call: %s", r.Raw)
	}
	if got := [3]int64{cs.routesAndBegins.Load(), cs.routes.Load(), cs.begins.Load()}; got != [3]int64{1, 0, 0} {
		t.Errorf("writes (route and begin, route, begin) = %v, want one write for both", got)
	}
	routeID, callID := r.Body["route_id"].(string), r.Body["call_id"].(string)
	want := append(before, ladder.AuditRoute+"/"+routeID, ladder.AuditCall+"/"+callID, ladder.AuditCallResult+"/"+callID)
	if diff := cmp.Diff(want, auditTrail(t, e, "vantrow-bills")); diff != "" {
		t.Fatalf("audit trail (-want +got):\n%s", diff)
	}
	call, err := e.Store.GetCall(t.Context(), "vantrow-bills", callID)
	if err != nil || call.RouteID != routeID || call.Status != ladder.CallOK {
		t.Fatalf("stored call %+v (%v), want ok under route %s", call, err, routeID)
	}

	// The same key again: the first call's answer, nothing runs.
	n := e.Upstream.Calls()
	again := mustDo(t, e, 200, "POST", "/v1/capabilities/tms:postBill/call", agent, map[string]any{"bill_id": "B-1", "amount_usd": 5, "idempotency_key": "B-1"})
	if again.Body["replayed"] != true || again.Body["call_id"] != callID || e.Upstream.Calls() != n {
		t.Fatalf("retry: %s; want the first call replayed and no run", again.Raw)
	}
	// Another key for the same bill: the bill's route of the epoch exists,
	// so the call begins on its own under it.
	other := mustDo(t, e, 200, "POST", "/v1/capabilities/tms:postBill/call", agent, map[string]any{"bill_id": "B-1", "amount_usd": 6, "idempotency_key": "B-1-second"})
	if other.Body["status"] != "executed" || other.Body["route_id"] != routeID || other.Body["call_id"] == callID {
		t.Fatalf("second call for the bill: %s; want a new call under route %s", other.Raw, routeID)
	}
	if e.Upstream.Calls() != n+1 {
		t.Errorf("upstream calls %d, want %d", e.Upstream.Calls(), n+1)
	}
}

// TestLaneChangeBeforeCommitStopsTheCall: a pin lands after the agent's
// call was decided to run alone and before that decision commits. The
// commit sees the new lane: nothing of the act-alone decision is stored,
// the call is decided again under the pin (a proposal), and the upstream
// never runs.
func TestLaneChangeBeforeCommitStopsTheCall(t *testing.T) {
	var cs *commitStore
	e := testenv.StartWith(t, "", testenv.Options{WrapStore: func(s ladder.Store) ladder.Store { cs = &commitStore{Store: s}; return cs }})
	agent, human := e.Keys["vantrow-bills/agent"], e.Keys["vantrow-bills/human"]
	pinned := false
	hook := func() {
		mustDo(t, e, 200, "POST", "/v1/steps/bills/post_tms/pin", human, map[string]any{"lane": "propose", "reason": "incident"})
		pinned = true
	}
	cs.hook.Store(&hook)
	before, calls := auditTrail(t, e, "vantrow-bills"), e.Upstream.Calls()

	r := e.Do("POST", "/v1/capabilities/tms:postBill/call", agent, map[string]any{"bill_id": "B-9", "amount_usd": 99, "idempotency_key": "B-9"})
	if !pinned {
		t.Fatal("the pin did not land between deciding and committing; the test proved nothing")
	}
	if r.Status != 202 || r.Body["status"] != "approval_requested" || r.Body["lane"] != "propose" {
		t.Fatalf("call with a pin before its commit: %d %s; want approval_requested in propose", r.Status, r.Raw)
	}
	if n := e.Upstream.Calls() - calls; n != 0 {
		t.Fatalf("the TMS was called %d times", n)
	}
	// After the pin: the proposal's route and its approval, nothing else.
	got := auditTrail(t, e, "vantrow-bills")[len(before):]
	kinds := make([]string, len(got))
	for i, k := range got {
		kinds[i], _, _ = strings.Cut(k, "/")
	}
	if diff := cmp.Diff([]string{ladder.AuditPin, ladder.AuditRoute, ladder.AuditApproval}, kinds); diff != "" {
		t.Fatalf("audit records after the call (-want +got):\n%s\n%v", diff, got)
	}
	if got[1] != ladder.AuditRoute+"/"+r.Body["route_id"].(string) {
		t.Errorf("route record %s, want the proposal's route %v", got[1], r.Body["route_id"])
	}
}

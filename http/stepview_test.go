package http_test

// Issue 22: routes are decided from a view of step states each replica
// keeps, a hint the commit re-checks. These replicas hear of no change
// (the test servers subscribe to no notifications), so their views stay
// stale: only the check at commit can make the state in force decide.

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/internal/testenv"
)

// routed is what a test reads off a route's answer.
type routed struct {
	Lane, Decision string
	Audit          bool
	AuditRate      float64
	LaneEpoch      float64
}

func routedOf(t *testing.T, r testenv.Response) routed {
	t.Helper()
	rate, _ := r.Body["audit_rate"].(float64)
	epoch, _ := r.Body["lane_epoch"].(float64)
	audit, _ := r.Body["audit"].(bool)
	lane, _ := r.Body["lane"].(string)
	decision, _ := r.Body["decision"].(string)
	return routed{Lane: lane, Decision: decision, Audit: audit, AuditRate: rate, LaneEpoch: epoch}
}

// TestStaleViewPinOnAnotherReplica: replica a has routed at the step (its
// view holds the step in auto); replica b pins it to propose; the next
// route on a is decided by the pin at once.
func TestStaleViewPinOnAnotherReplica(t *testing.T) {
	reps := pgReplicas(t, []*testenv.Clock{testenv.WallClock(0), testenv.WallClock(0)}, testenv.Options{})
	a, b := reps[0], reps[1]
	route := func(e *testenv.Env, item string) routed {
		t.Helper()
		return routedOf(t, mustDo(t, e, 200, "POST", "/v1/route", e.Keys["acme/agent"], map[string]any{"queue": "q", "step": "auto_step", "item": item}))
	}
	if got := route(a, "bill-1"); got.Lane != "auto" || got.LaneEpoch != 0 {
		t.Fatalf("before the pin: %+v, want lane auto in epoch 0", got)
	}
	mustDo(t, b, 200, "POST", "/v1/steps/q/auto_step/pin", b.Keys["acme/human"], map[string]any{"lane": "propose", "reason": "incident"})
	want := routed{Lane: "propose", Decision: "propose", AuditRate: 0.05, LaneEpoch: 1}
	if diff := cmp.Diff(want, route(a, "bill-2")); diff != "" {
		t.Errorf("a new item on the replica with a stale view (-want +got):\n%s", diff)
	}
	// The item routed before the pin is decided afresh too.
	if diff := cmp.Diff(want, route(a, "bill-1")); diff != "" {
		t.Errorf("the item routed before the pin (-want +got):\n%s", diff)
	}
}

// TestStaleViewAuditRateOnAnotherReplica: replica a has routed at the step
// (its view holds the audit rate 0.05); a failed audit reviewed on replica
// b doubles the rate, the lane unchanged; the next route on a is decided
// at the new rate.
func TestStaleViewAuditRateOnAnotherReplica(t *testing.T) {
	reps := pgReplicas(t, []*testenv.Clock{testenv.WallClock(0), testenv.WallClock(0)}, testenv.Options{})
	a, b := reps[0], reps[1]
	route := func(e *testenv.Env, item string) (string, routed) {
		t.Helper()
		r := mustDo(t, e, 200, "POST", "/v1/route", e.Keys["acme/agent"], map[string]any{"queue": "q", "step": "auto_step", "item": item})
		id, _ := r.Body["route_id"].(string)
		return id, routedOf(t, r)
	}
	if _, got := route(a, "bill-0"); got.AuditRate != 0.05 {
		t.Fatalf("before the audit: %+v, want the rate 0.05", got)
	}
	// On b, 40 clean audits (a review of an item routed in auto is an
	// audit), then a failed one: the rate doubles, and after 40 clean ones
	// the lane holds.
	for i := range 41 {
		id, _ := route(b, fmt.Sprintf("stock-%d", i))
		verdict := map[string]any{"verdict": "agree"}
		if i == 40 {
			verdict = map[string]any{"verdict": "disagree", "severity": 3}
		}
		mustDo(t, b, 201, "POST", "/v1/routes/"+id+"/review", b.Keys["acme/human"], verdict)
	}
	if _, got := route(b, "check-b"); got.AuditRate != 0.1 || got.Lane != "auto" || got.LaneEpoch != 0 {
		t.Fatalf("after the failed audit, on b: %+v, want auto in epoch 0 at the rate 0.1", got)
	}
	if _, got := route(a, "check-a"); got.AuditRate != 0.1 || got.Lane != "auto" || got.LaneEpoch != 0 {
		t.Errorf("after the failed audit, on the replica with a stale view: %+v, want auto in epoch 0 at the rate 0.1", got)
	}
}

// refusingStore refuses every route with err and counts the step-state
// reads and route commits.
type refusingStore struct {
	ladder.Store
	err            error
	reads, records atomic.Int64
}

func (s *refusingStore) GetStepState(ctx context.Context, k ladder.StepKey) (ladder.StepState, error) {
	s.reads.Add(1)
	return s.Store.GetStepState(ctx, k)
}

func (s *refusingStore) RecordRoute(ctx context.Context, r ladder.Route, a ladder.AuditEntry) (ladder.Route, bool, error) {
	s.records.Add(1)
	if s.err != nil {
		return ladder.Route{}, false, fmt.Errorf("record route: %w", s.err)
	}
	return s.Store.RecordRoute(ctx, r, a)
}

// TestStepViewReads: a route reads the step's state once, later routes
// decide from the view (the commit re-checks them), and a change the store
// announces (StepChanged) makes the next route read it again.
func TestStepViewReads(t *testing.T) {
	st := &refusingStore{}
	e := testenv.StartWith(t, "", testenv.Options{WrapStore: func(s ladder.Store) ladder.Store { st.Store = s; return st }})
	agent := e.Keys["vantrow-bills/agent"]
	for i := range 3 {
		mustDo(t, e, 200, "POST", "/v1/route", agent, map[string]any{"step": "post_tms", "item": fmt.Sprintf("bill-%d", i)})
	}
	if got := st.reads.Load(); got != 1 {
		t.Errorf("3 routes read the step's state %d times, want 1", got)
	}
	e.Svc.StepChanged(ladder.StepKey{Workspace: "vantrow-bills", Queue: "bills", Step: "post_tms"})
	mustDo(t, e, 200, "POST", "/v1/route", agent, map[string]any{"step": "post_tms", "item": "bill-9"})
	if got := st.reads.Load(); got != 2 {
		t.Errorf("after StepChanged, reads = %d, want 2", got)
	}
}

// TestRouteRefusedAtCommit: a route the store keeps refusing is refused
// with what changed — the lane, or only the audit rate — after a decision
// from the view and laneAttempts (4) from the store.
func TestRouteRefusedAtCommit(t *testing.T) {
	for _, tc := range []struct {
		err         error
		want, never string
	}{
		{ladder.ErrLaneChanged, "The lane of Post to the TMS changed while this was being decided, so nothing was done.", "audit rate"},
		{ladder.ErrAuditRateChanged, "The audit rate of Post to the TMS changed while this was being decided, so nothing was done.", "lane"},
	} {
		t.Run(tc.err.Error(), func(t *testing.T) {
			st := &refusingStore{}
			e := testenv.StartWith(t, "", testenv.Options{WrapStore: func(s ladder.Store) ladder.Store { st.Store = s; return st }})
			agent := e.Keys["vantrow-bills/agent"]
			mustDo(t, e, 200, "POST", "/v1/route", agent, map[string]any{"step": "post_tms", "item": "bill-1"}) // fills the view
			st.err = tc.err
			st.reads.Store(0)
			st.records.Store(0)
			r := e.Do("POST", "/v1/route", agent, map[string]any{"step": "post_tms", "item": "bill-2"})
			msg, _ := r.Body["error"].(map[string]any)["message"].(string)
			if r.Status != 409 || msg != tc.want {
				t.Errorf("refused route: %d %s; want 409 %q", r.Status, r.Raw, tc.want)
			}
			if strings.Contains(msg, tc.never) {
				t.Errorf("the message %q speaks of the %s", msg, tc.never)
			}
			if reads, records := st.reads.Load(), st.records.Load(); reads != 4 || records != 5 {
				t.Errorf("reads %d, commits tried %d; want 4 and 5 (one from the view, four from the store)", reads, records)
			}
		})
	}
}

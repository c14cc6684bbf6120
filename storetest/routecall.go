package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ladderhq/ladder"
)

// routeCallTests exercise RouteAndBeginCall: a route and the call it lets
// the agent run alone, recorded in one transaction with the rules of
// RecordRoute and BeginCall.
var routeCallTests = []struct {
	name string
	fn   func(t *testing.T, s ladder.Store)
}{
	{"RouteAndBeginCall", testRouteAndBeginCall},
	{"RouteAndBeginCallAllOrNothing", testRouteAndBeginCallAtomic},
	{"RouteAndBeginCallRacesAPin", testRouteAndBeginCallRace},
}

// actAlone is a route of stepKey that lets the agent act alone, decided
// in lane epoch epoch, and the guarded call it allows.
func actAlone(t *testing.T, routeID, callID, key, item string, epoch int) (ladder.Route, ladder.AuditEntry, ladder.Call, ladder.AuditEntry) {
	t.Helper()
	r := newRoute(routeID, wsA, item, t0)
	r.Decision, r.Lane, r.Reason, r.LaneEpoch = ladder.DecisionActAlone, ladder.LaneAuto, "auto", epoch
	c := ladder.Call{ID: callID, Workspace: wsA, Capability: "tms:postBill", KeyID: "k1", IdempotencyKey: key, Status: ladder.CallRunning,
		Payload: json.RawMessage(`{"bill_id":"` + item + `"}`), RouteID: routeID, StartedAt: t0,
		Guard: &ladder.LaneGuard{Key: stepKey, LaneEpoch: epoch}}
	return r, routeAudit(t, r), c, entry(t, wsA, ladder.AuditCall, callID, t0, map[string]any{"route_id": routeID})
}

// kindsAndSubjects lists the audit log as kind/subject, oldest first.
func kindsAndSubjects(t *testing.T, s ladder.Store) []string {
	t.Helper()
	var out []string
	check(t, s.WalkAudit(t.Context(), 0, func(r ladder.AuditRecord) error {
		out = append(out, r.Kind+"/"+r.Subject)
		return nil
	}))
	return out
}

func testRouteAndBeginCall(t *testing.T, s ladder.Store) {
	ctx := t.Context()
	check(t, s.EnsureSteps(ctx, []ladder.StepState{stateOf(stepKey, ladder.LaneAuto)}))

	// Fresh: both stored, the route's record before the call's.
	r, ra, c, ca := actAlone(t, "rt_1", "cl_1", "bill-1", "B-1", 0)
	got := must(s.RouteAndBeginCall(ctx, r, ra, c, ca))
	if !got.RouteCreated || !got.CallCreated || got.Route.ID != r.ID || got.Call.ID != c.ID || got.Call.AuditSeq == 0 {
		t.Fatalf("fresh: %+v, want route %s and call %s created with an audit seq", got, r.ID, c.ID)
	}
	if stored := must(s.GetRoute(ctx, wsA, r.ID)); stored.Decision != ladder.DecisionActAlone || stored.LaneEpoch != 0 {
		t.Errorf("stored route %+v", stored)
	}
	if stored := must(s.CallByKey(ctx, wsA, c.Capability, "bill-1")); stored.ID != c.ID || stored.Status != ladder.CallRunning || stored.RouteID != r.ID {
		t.Errorf("stored call %+v", stored)
	}
	want := []string{ladder.AuditRoute + "/rt_1", ladder.AuditCall + "/cl_1"}
	if diff := cmp.Diff(want, kindsAndSubjects(t, s)); diff != "" {
		t.Fatalf("audit after the first (-want +got):\n%s", diff)
	}
	var callSeq int64
	check(t, s.WalkAudit(ctx, 0, func(rec ladder.AuditRecord) error {
		if rec.Subject == c.ID {
			callSeq = rec.Seq
		}
		return nil
	}))
	if got.Call.AuditSeq != callSeq {
		t.Errorf("AuditSeq %d, the call's record is %d", got.Call.AuditSeq, callSeq)
	}

	// The item's route of the epoch exists: it is the answer, and the call
	// is left to the caller (nothing stored for it).
	r2, ra2, c2, ca2 := actAlone(t, "rt_2", "cl_2", "bill-2", "B-1", 0)
	got = must(s.RouteAndBeginCall(ctx, r2, ra2, c2, ca2))
	if diff := cmp.Diff(ladder.RouteCall{Route: got.Route}, got); diff != "" || got.Route.ID != r.ID {
		t.Errorf("same item: %+v, want only the first route %s (-want +got):\n%s", got, r.ID, diff)
	}
	_, err := s.CallByKey(ctx, wsA, c2.Capability, "bill-2")
	wantErr(t, "the call of an existing route", err, ladder.ErrNotFound)

	// A key used before: the route is new, the call is the first one's and
	// is not created (it must not run again).
	r3, ra3, c3, ca3 := actAlone(t, "rt_3", "cl_3", "bill-1", "B-3", 0)
	got = must(s.RouteAndBeginCall(ctx, r3, ra3, c3, ca3))
	if !got.RouteCreated || got.CallCreated || got.Call.ID != c.ID {
		t.Errorf("repeated key: %+v, want route %s created and the first call %s returned, not created", got, r3.ID, c.ID)
	}

	// After a lane change, a route and call decided before it store nothing.
	pin(t, s, ladder.LanePropose, t0.Add(time.Minute))
	r4, ra4, c4, ca4 := actAlone(t, "rt_4", "cl_4", "bill-4", "B-4", 0)
	_, err = s.RouteAndBeginCall(ctx, r4, ra4, c4, ca4)
	wantErr(t, "decided before the pin", err, ladder.ErrLaneChanged)
	_, err = s.GetRoute(ctx, wsA, r4.ID)
	wantErr(t, "the refused route", err, ladder.ErrNotFound)
	_, err = s.CallByKey(ctx, wsA, c4.Capability, "bill-4")
	wantErr(t, "the refused call", err, ladder.ErrNotFound)

	want = append(want, ladder.AuditRoute+"/rt_3", ladder.AuditPin+"/"+lastPin(t, s))
	if diff := cmp.Diff(want, kindsAndSubjects(t, s)); diff != "" {
		t.Errorf("audit at the end (-want +got):\n%s", diff)
	}
}

// lastPin is the subject of the newest pin record.
func lastPin(t *testing.T, s ladder.Store) string {
	t.Helper()
	var id string
	check(t, s.WalkAudit(t.Context(), 0, func(r ladder.AuditRecord) error {
		if r.Kind == ladder.AuditPin {
			id = r.Subject
		}
		return nil
	}))
	return id
}

// testRouteAndBeginCallAtomic: when the call's part fails, the route's
// part is undone with it.
func testRouteAndBeginCallAtomic(t *testing.T, s ladder.Store) {
	ctx := t.Context()
	check(t, s.EnsureSteps(ctx, []ladder.StepState{stateOf(stepKey, ladder.LaneAuto)}))
	pin(t, s, ladder.LaneAuto, t0.Add(time.Minute)) // epoch 1
	before := kindsAndSubjects(t, s)

	// The route is of the epoch in force, the call's guard of the one before.
	r, ra, c, ca := actAlone(t, "rt_a", "cl_a", "bill-a", "B-a", 1)
	c.Guard.LaneEpoch = 0
	_, err := s.RouteAndBeginCall(ctx, r, ra, c, ca)
	wantErr(t, "a stale guard", err, ladder.ErrLaneChanged)

	// A call id stored already is an error of the call's part too.
	must2(s.BeginCall(ctx, ladder.Call{ID: "cl_taken", Workspace: wsA, Capability: "tms:postBill", Status: ladder.CallRunning, StartedAt: t0},
		entry(t, wsA, ladder.AuditCall, "cl_taken", t0, nil)))
	before = append(before, ladder.AuditCall+"/cl_taken")
	r2, ra2, c2, ca2 := actAlone(t, "rt_b", "cl_taken", "", "B-b", 1)
	if _, err := s.RouteAndBeginCall(ctx, r2, ra2, c2, ca2); err == nil {
		t.Error("a call id stored already was begun again")
	}
	for _, id := range []string{r.ID, r2.ID} {
		_, err := s.GetRoute(ctx, wsA, id)
		wantErr(t, "the route of a failed op", err, ladder.ErrNotFound)
	}
	_, err = s.CallByKey(ctx, wsA, c.Capability, "bill-a")
	wantErr(t, "the call of a failed op", err, ladder.ErrNotFound)
	if diff := cmp.Diff(before, kindsAndSubjects(t, s)); diff != "" {
		t.Errorf("audit after two failed ops (-want +got):\n%s", diff)
	}
	// The item can still be routed: nothing of the failed op is left.
	r3, ra3, c3, ca3 := actAlone(t, "rt_c", "cl_c", "bill-c", "B-a", 1)
	if got := must(s.RouteAndBeginCall(ctx, r3, ra3, c3, ca3)); !got.RouteCreated || !got.CallCreated {
		t.Errorf("after the failed op: %+v", got)
	}
}

// testRouteAndBeginCallRace runs routes with their calls while a pin
// lands: every call the store accepted committed before the pin, with its
// route right before it in the chain, and every one after was refused.
func testRouteAndBeginCallRace(t *testing.T, s ladder.Store) {
	ctx := t.Context()
	check(t, s.EnsureSteps(ctx, []ladder.StepState{stateOf(stepKey, ladder.LaneAuto)}))
	var (
		wg               sync.WaitGroup
		stop             atomic.Bool
		created, refused atomic.Int64
		errs             = make(chan error, 8)
	)
	for w := range 8 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				id := fmt.Sprintf("%d_%d", w, i)
				r, ra, c, ca := actAlone(t, "rt_"+id, "cl_"+id, "k_"+id, "B-"+id, 0)
				got, err := s.RouteAndBeginCall(ctx, r, ra, c, ca)
				switch {
				case errors.Is(err, ladder.ErrLaneChanged):
					refused.Add(1)
				case err != nil:
					errs <- err
					return
				case got.CallCreated:
					created.Add(1)
				}
				if refused.Load() > 20 {
					return
				}
			}
		})
	}
	for created.Load() < 20 {
		time.Sleep(time.Millisecond)
	}
	pin(t, s, ladder.LanePropose, t0.Add(time.Minute))
	time.Sleep(50 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if refused.Load() == 0 {
		t.Fatal("no call raced the pin; the test proved nothing")
	}
	var (
		afterPin    bool
		prev        string
		routes, cls int64
	)
	check(t, s.WalkAudit(ctx, 0, func(r ladder.AuditRecord) error {
		switch r.Kind {
		case ladder.AuditPin:
			afterPin = true
		case ladder.AuditRoute:
			routes++
		case ladder.AuditCall:
			cls++
			if afterPin {
				t.Errorf("call %s recorded after the pin", r.Subject)
			}
			if want := "rt_" + r.Subject[len("cl_"):]; prev != want {
				t.Errorf("call %s follows %s, want its route %s", r.Subject, prev, want)
			}
		}
		prev = r.Subject
		return nil
	}))
	if cls != created.Load() || routes != cls {
		t.Errorf("%d route and %d call records for %d created calls", routes, cls, created.Load())
	}
}

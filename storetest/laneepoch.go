package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ladderhq/ladder"
)

// laneEpochTests exercise the lane epoch: a route, and a call a route lets
// the agent run alone, commit only under the lane in force at commit.
var laneEpochTests = []struct {
	name string
	fn   func(t *testing.T, s ladder.Store)
}{
	{"RouteLaneEpoch", testRouteLaneEpoch},
	{"RouteAuditRate", testRouteAuditRate},
	{"CallLaneGuard", testCallLaneGuard},
	{"CallLaneGuardRacesAPin", testCallLaneGuardRace},
	{"ByIdempotencyKey", testByIdempotencyKey},
}

// pin pins the step to lane (a lane change) and returns the new state.
func pin(t *testing.T, s ladder.Store, lane ladder.Lane, at time.Time) ladder.StepState {
	t.Helper()
	ch := ladder.LaneChange{ID: ladder.NewID("lc"), To: lane, Rule: "pinned by a person", Numbers: map[string]float64{}, Actor: "k_human", At: at}
	return must(s.SetLane(t.Context(), ladder.LaneWrite{Key: stepKey, Change: ch, Pinned: true, Reason: "incident",
		Audit: []ladder.AuditEntry{entry(t, wsA, ladder.AuditPin, ch.ID, at, nil)}}))
}

func testRouteLaneEpoch(t *testing.T, s ladder.Store) {
	ctx := t.Context()
	check(t, s.EnsureSteps(ctx, []ladder.StepState{stateOf(stepKey, ladder.LaneAuto)}))
	first := newRoute("rt_e0", wsA, "stock-9", t0)
	first.Decision, first.Lane = ladder.DecisionActAlone, ladder.LaneAuto
	mustRoute(t, s, first)

	// Within the epoch, the same item gets the first route.
	again := newRoute("rt_e0_again", wsA, "stock-9", t0.Add(time.Second))
	if got, created := must2(s.RecordRoute(ctx, again, routeAudit(t, again))); created || got.ID != first.ID {
		t.Errorf("same epoch: got %s (created %v), want the first route %s", got.ID, created, first.ID)
	}

	// A pin is a lane change: a new lane epoch.
	st := pin(t, s, ladder.LanePropose, t0.Add(time.Minute))
	if st.LaneEpoch != 1 || st.Lane != ladder.LanePropose {
		t.Fatalf("after the pin: lane %s, lane epoch %d; want propose, 1", st.Lane, st.LaneEpoch)
	}
	// A route decided before the pin does not commit after it, and the
	// first route is no longer an answer for the item.
	stale := newRoute("rt_stale", wsA, "stock-9", t0.Add(2*time.Minute))
	stale.Decision, stale.Lane = ladder.DecisionActAlone, ladder.LaneAuto
	_, _, err := s.RecordRoute(ctx, stale, routeAudit(t, stale))
	wantErr(t, "a route decided in the old epoch", err, ladder.ErrLaneChanged)
	stale.Item = "never-routed"
	_, _, err = s.RecordRoute(ctx, stale, routeAudit(t, stale))
	wantErr(t, "a new item decided in the old epoch", err, ladder.ErrLaneChanged)

	// Decided afresh in the new epoch: a new route, itself idempotent.
	fresh := newRoute("rt_e1", wsA, "stock-9", t0.Add(3*time.Minute))
	fresh.Decision, fresh.Lane, fresh.LaneEpoch = ladder.DecisionPropose, ladder.LanePropose, 1
	if got, created := must2(s.RecordRoute(ctx, fresh, routeAudit(t, fresh))); !created || got.ID != fresh.ID || got.LaneEpoch != 1 {
		t.Errorf("new epoch: got %+v (created %v), want a new route in lane epoch 1", got, created)
	}
	fresh2 := fresh
	fresh2.ID = "rt_e1_again"
	if got, created := must2(s.RecordRoute(ctx, fresh2, routeAudit(t, fresh2))); created || got.ID != fresh.ID {
		t.Errorf("new epoch, repeated: got %s (created %v), want %s", got.ID, created, fresh.ID)
	}
	// Both routes stay readable, each with its epoch.
	if r := must(s.GetRoute(ctx, wsA, first.ID)); r.LaneEpoch != 0 || r.Decision != ladder.DecisionActAlone {
		t.Errorf("first route now %+v", r)
	}
	// An unpin is a lane change too, even though the lane stays.
	ch := ladder.LaneChange{ID: ladder.NewID("lc"), Rule: "unpinned by a person", Numbers: map[string]float64{}, Actor: "k_human", At: t0.Add(4 * time.Minute)}
	st = must(s.SetLane(ctx, ladder.LaneWrite{Key: stepKey, Change: ch, Pinned: false, Reason: "over",
		Audit: []ladder.AuditEntry{entry(t, wsA, ladder.AuditUnpin, ch.ID, ch.At, nil)}}))
	if st.LaneEpoch != 2 || st.Lane != ladder.LanePropose {
		t.Errorf("after the unpin: lane %s, lane epoch %d; want propose, 2", st.Lane, st.LaneEpoch)
	}
	_, _, err = s.RecordRoute(ctx, fresh2, routeAudit(t, fresh2))
	wantErr(t, "a route of epoch 1 after the unpin", err, ladder.ErrLaneChanged)
	wantAuditKinds(t, s, map[string]int{ladder.AuditRoute: 2, ladder.AuditPin: 1, ladder.AuditUnpin: 1})
}

// testRouteAuditRate: a route commits only at the audit rate it was
// decided with (the step's, exactly), as it commits only in its lane epoch:
// a decision made from a stale copy of the state is refused, and told
// apart from a lane change.
func testRouteAuditRate(t *testing.T, s ladder.Store) {
	ctx := t.Context()
	check(t, s.EnsureSteps(ctx, []ladder.StepState{stateOf(stepKey, ladder.LaneAuto)}))
	auto := func(id, item string, rate float64) ladder.Route {
		r := newRoute(id, wsA, item, t0)
		r.Decision, r.Lane, r.StateAuditRate = ladder.DecisionActAlone, ladder.LaneAuto, rate
		return r
	}
	first := mustRoute(t, s, auto("rt_r0", "stock-1", 0.05))

	// An audit failure doubles the rate; the lane (and its epoch) stays.
	double := func(st ladder.StepState, _ []ladder.WeekAgg) (ladder.StepState, *ladder.LaneChange, []ladder.AuditEntry, error) {
		st.AuditRate *= 2
		return st, nil, nil, nil
	}
	st, change, err := s.RecordReview(ctx, review(t, "rv_r0", first, t0.Add(time.Minute), ladder.ReviewAudit, ladder.VerdictDisagree, double))
	check(t, err)
	if change != nil || st.LaneEpoch != 0 || st.AuditRate != 0.1 {
		t.Fatalf("after the audit failure: change %v, lane epoch %d, rate %v; want none, 0, 0.1", change, st.LaneEpoch, st.AuditRate)
	}

	// Decided at the old rate: refused, as a rate change, not a lane one.
	_, _, err = s.RecordRoute(ctx, auto("rt_r1", "stock-2", 0.05), routeAudit(t, auto("rt_r1", "stock-2", 0.05)))
	wantErr(t, "a new item decided at the old rate", err, ladder.ErrAuditRateChanged)
	if errors.Is(err, ladder.ErrLaneChanged) {
		t.Errorf("a rate change reads as a lane change: %v", err)
	}
	// Exactly the rate: one that rounds to it is another rate.
	near := auto("rt_r2", "stock-2", 0.1+1e-9)
	_, _, err = s.RecordRoute(ctx, near, routeAudit(t, near))
	wantErr(t, "a new item decided at a rate near the step's", err, ladder.ErrAuditRateChanged)
	// The item routed in this epoch keeps its route, whatever rate the
	// repeat was decided at (a repeat returns the first route while the
	// lane is unchanged).
	again := auto("rt_r0_again", "stock-1", 0.05)
	if got, created := must2(s.RecordRoute(ctx, again, routeAudit(t, again))); created || got.ID != first.ID {
		t.Errorf("repeat at the old rate: got %s (created %v), want the first route %s", got.ID, created, first.ID)
	}
	// Decided at the new rate: stored.
	fresh := auto("rt_r3", "stock-2", 0.1)
	if got, created := must2(s.RecordRoute(ctx, fresh, routeAudit(t, fresh))); !created || got.ID != fresh.ID {
		t.Errorf("at the new rate: got %s (created %v), want a new route", got.ID, created)
	}
	// A lane change with a stale rate is a lane change.
	pin(t, s, ladder.LanePropose, t0.Add(2*time.Minute))
	_, _, err = s.RecordRoute(ctx, auto("rt_r4", "stock-3", 0.05), routeAudit(t, auto("rt_r4", "stock-3", 0.05)))
	wantErr(t, "a stale lane and rate", err, ladder.ErrLaneChanged)
	wantAuditKinds(t, s, map[string]int{ladder.AuditRoute: 2, ladder.AuditReview: 1, ladder.AuditPin: 1})
}

func testCallLaneGuard(t *testing.T, s ladder.Store) {
	ctx := t.Context()
	check(t, s.EnsureSteps(ctx, []ladder.StepState{stateOf(stepKey, ladder.LaneAuto)}))
	call := func(id string, epoch int) ladder.Call {
		return ladder.Call{ID: id, Workspace: wsA, Capability: "tms:postBill", IdempotencyKey: id, Status: ladder.CallRunning,
			Payload: json.RawMessage(`{"bill_id":"B-1"}`), StartedAt: t0, Guard: &ladder.LaneGuard{Key: stepKey, LaneEpoch: epoch}}
	}
	if _, created := must2(s.BeginCall(ctx, call("cl_0", 0), entry(t, wsA, ladder.AuditCall, "cl_0", t0, nil))); !created {
		t.Fatal("a call in the current epoch was not created")
	}
	pin(t, s, ladder.LanePropose, t0.Add(time.Minute))
	_, _, err := s.BeginCall(ctx, call("cl_stale", 0), entry(t, wsA, ladder.AuditCall, "cl_stale", t0, nil))
	wantErr(t, "a call routed before the pin", err, ladder.ErrLaneChanged)
	_, err = s.CallByKey(ctx, wsA, "tms:postBill", "cl_stale")
	wantErr(t, "the refused call", err, ladder.ErrNotFound)
	// A repeat of a call that committed before the pin is its replay.
	if got, created := must2(s.BeginCall(ctx, call("cl_0", 0), entry(t, wsA, ladder.AuditCall, "cl_0", t0, nil))); created || got.ID != "cl_0" {
		t.Errorf("repeat of the first call: %s created %v", got.ID, created)
	}
	if _, created := must2(s.BeginCall(ctx, call("cl_1", 1), entry(t, wsA, ladder.AuditCall, "cl_1", t0, nil))); !created {
		t.Error("a call guarded by the new epoch was not created")
	}
	wantAuditKinds(t, s, map[string]int{ladder.AuditCall: 2, ladder.AuditPin: 1})
}

func testByIdempotencyKey(t *testing.T, s ladder.Store) {
	ctx := t.Context()
	a := approval("ap_k", wsA, "idem-k")
	must2(s.CreateApproval(ctx, a, entry(t, wsA, ladder.AuditApproval, a.ID, t0, nil)))
	if got := must(s.ApprovalByKey(ctx, wsA, a.Capability, "idem-k")); got.ID != a.ID {
		t.Errorf("ApprovalByKey = %s, want %s", got.ID, a.ID)
	}
	_, err := s.ApprovalByKey(ctx, wsB, a.Capability, "idem-k")
	wantErr(t, "ApprovalByKey in another workspace", err, ladder.ErrNotFound)
	_, err = s.ApprovalByKey(ctx, wsA, "other:capability", "idem-k")
	wantErr(t, "ApprovalByKey of another capability", err, ladder.ErrNotFound)

	c := ladder.Call{ID: "cl_k", Workspace: wsA, Capability: "tms:postBill", IdempotencyKey: "idem-k", Status: ladder.CallRunning, StartedAt: t0}
	must2(s.BeginCall(ctx, c, entry(t, wsA, ladder.AuditCall, c.ID, t0, nil)))
	if got := must(s.CallByKey(ctx, wsA, c.Capability, "idem-k")); got.ID != c.ID {
		t.Errorf("CallByKey = %s, want %s", got.ID, c.ID)
	}
	_, err = s.CallByKey(ctx, wsB, c.Capability, "idem-k")
	wantErr(t, "CallByKey in another workspace", err, ladder.ErrNotFound)
	_, err = s.CallByKey(ctx, wsA, c.Capability, "idem-none")
	wantErr(t, "CallByKey unknown key", err, ladder.ErrNotFound)
}

// testCallLaneGuardRace runs guarded calls while a pin lands: every call
// the store accepted committed before the pin (its audit record comes
// first in the chain), and every call after it was refused.
func testCallLaneGuardRace(t *testing.T, s ladder.Store) {
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
				id := fmt.Sprintf("cl_%d_%d", w, i)
				c := ladder.Call{ID: id, Workspace: wsA, Capability: "tms:postBill", IdempotencyKey: id, Status: ladder.CallRunning,
					Payload: json.RawMessage(`{}`), StartedAt: t0, Guard: &ladder.LaneGuard{Key: stepKey, LaneEpoch: 0}}
				_, ok, err := s.BeginCall(ctx, c, entry(t, wsA, ladder.AuditCall, id, t0, nil))
				switch {
				case errors.Is(err, ladder.ErrLaneChanged):
					refused.Add(1)
				case err != nil:
					errs <- err
					return
				case ok:
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
	var pinSeq int64
	var calls []int64
	check(t, s.WalkAudit(ctx, 0, func(r ladder.AuditRecord) error {
		switch r.Kind {
		case ladder.AuditPin:
			pinSeq = r.Seq
		case ladder.AuditCall:
			calls = append(calls, r.Seq)
		}
		return nil
	}))
	if int64(len(calls)) != created.Load() {
		t.Fatalf("%d call records for %d created calls", len(calls), created.Load())
	}
	for _, seq := range calls {
		if seq > pinSeq {
			t.Fatalf("a call guarded by the old lane epoch committed after the pin (call seq %d, pin seq %d)", seq, pinSeq)
		}
	}
	t.Logf("%d calls before the pin, %d refused after it", created.Load(), refused.Load())
}

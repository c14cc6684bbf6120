package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ladderhq/ladder"
)

// The review, lane and outcome cases: recording reviews into weekly
// aggregates, the decider inside the review's transaction, lane writes,
// and outcomes.

// setupRoutes stores the step's state in lane and n routes rt_0 … rt_{n-1}.
func setupRoutes(t *testing.T, s ladder.Store, lane ladder.Lane, n int) []ladder.Route {
	t.Helper()
	check(t, s.EnsureSteps(t.Context(), []ladder.StepState{stateOf(stepKey, lane)}))
	routes := make([]ladder.Route, n)
	for i := range routes {
		routes[i] = mustRoute(t, s, newRoute(fmt.Sprintf("rt_%d", i), wsA, fmt.Sprintf("bill-%d", i), t0))
	}
	return routes
}

// review builds the review of route at a time, with its ISO week.
func review(t *testing.T, id string, r ladder.Route, at time.Time, kind ladder.ReviewKind, verdict ladder.Verdict, decide ladder.ReviewDecider) ladder.ReviewWrite {
	week, start := ladder.ISOWeek(at)
	return ladder.ReviewWrite{
		Review: ladder.Review{ID: id, RouteID: r.ID, Workspace: r.Workspace, Queue: r.Queue, Step: r.Step, Item: r.Item,
			Kind: kind, Verdict: verdict, Reviewer: "k_human", At: at},
		Week: week, WeekStart: start,
		Audit:  entry(t, r.Workspace, ladder.AuditReview, id, at, map[string]any{"verdict": verdict}),
		Decide: decide,
	}
}

func boolPtr(b bool) *bool { return &b }

// keep is a decider that changes nothing.
func keep(st ladder.StepState, _ []ladder.WeekAgg) (ladder.StepState, *ladder.LaneChange, []ladder.AuditEntry, error) {
	return st, nil, nil, nil
}

func testReviewAggregates(t *testing.T, s ladder.Store) {
	ctx := t.Context()
	routes := setupRoutes(t, s, ladder.LaneShadow, 6)
	w35, w36 := t0, t0.Add(7*24*time.Hour)
	var seen [][]ladder.WeekAgg
	record := func(st ladder.StepState, weeks []ladder.WeekAgg) (ladder.StepState, *ladder.LaneChange, []ladder.AuditEntry, error) {
		seen = append(seen, weeks)
		return st, nil, nil, nil
	}
	writes := []ladder.ReviewWrite{
		review(t, "rv_0", routes[0], w35, ladder.ReviewShadow, ladder.VerdictAgree, record),
		review(t, "rv_1", routes[1], w35.Add(time.Hour), ladder.ReviewShadow, ladder.VerdictDisagree, record),
		review(t, "rv_2", routes[2], w35.Add(2*time.Hour), ladder.ReviewAudit, ladder.VerdictAgree, record),
		review(t, "rv_3", routes[3], w35.Add(3*time.Hour), ladder.ReviewAudit, ladder.VerdictDisagree, record),
		review(t, "rv_4", routes[4], w36, ladder.ReviewApproval, ladder.VerdictAgree, record),
		review(t, "rv_5", routes[5], w36.Add(time.Hour), ladder.ReviewApproval, ladder.VerdictDisagree, record),
	}
	writes[1].Review.Severity, writes[1].Review.OperatorError = 1, boolPtr(false)
	writes[3].Review.Severity = 1
	writes[4].Review.OperatorError = boolPtr(true)
	writes[5].Review.Severity = 2
	before := must(s.GetStepState(ctx, stepKey))
	for _, w := range writes {
		st, change, err := s.RecordReview(ctx, w)
		check(t, err)
		if change != nil {
			t.Errorf("%s: lane change %+v from a decider that keeps the lane", w.Review.ID, change)
		}
		if st.Lane != ladder.LaneShadow {
			t.Errorf("%s: lane %s, want shadow", w.Review.ID, st.Lane)
		}
	}
	_, start35 := ladder.ISOWeek(w35)
	_, start36 := ladder.ISOWeek(w36)
	want := []ladder.WeekAgg{
		{Workspace: wsA, Queue: "bills", Step: "post_tms", ISOWeek: "2026-W35", WeekStart: start35,
			N: 4, Agreements: 2, AuditN: 2, AuditAgree: 1, Sev1: 2, OpN: 1, OpErrors: 0},
		{Workspace: wsA, Queue: "bills", Step: "post_tms", ISOWeek: "2026-W36", WeekStart: start36,
			N: 2, Agreements: 1, OpN: 1, OpErrors: 1},
	}
	if diff := cmp.Diff(want, must(s.WeekAggs(ctx, stepKey))); diff != "" {
		t.Errorf("WeekAggs (-want +got):\n%s", diff)
	}
	// The decider saw the figures with its own review counted.
	if len(seen) != len(writes) {
		t.Fatalf("decider called %d times, want %d", len(seen), len(writes))
	}
	if diff := cmp.Diff(want, seen[len(seen)-1]); diff != "" {
		t.Errorf("weeks given to the last decider (-want +got):\n%s", diff)
	}
	if n := seen[0][0].N; n != 1 {
		t.Errorf("first decider saw n = %d, want 1", n)
	}
	after := must(s.GetStepState(ctx, stepKey))
	if after.Version <= before.Version {
		t.Errorf("version %d after reviews, was %d; want it to move", after.Version, before.Version)
	}
	if got := must(s.WeekAggs(ctx, ladder.StepKey{Workspace: wsB, Queue: "bills", Step: "post_tms"})); len(got) != 0 {
		t.Errorf("another workspace's WeekAggs = %+v, want none", got)
	}
	wantAuditKinds(t, s, map[string]int{ladder.AuditRoute: 6, ladder.AuditReview: 6})
}

func testReviewConflict(t *testing.T, s ladder.Store) {
	ctx := t.Context()
	routes := setupRoutes(t, s, ladder.LaneShadow, 2)
	first := review(t, "rv_first", routes[0], t0, ladder.ReviewShadow, ladder.VerdictDisagree, keep)
	first.Review.Severity, first.Review.OperatorError = 1, boolPtr(true)
	must2(s.RecordReview(ctx, first))
	must2(s.RecordReview(ctx, review(t, "rv_other", routes[1], t0.Add(-time.Minute), ladder.ReviewShadow, ladder.VerdictAgree, keep)))

	_, _, err := s.RecordReview(ctx, review(t, "rv_second", routes[0], t0.Add(time.Hour), ladder.ReviewShadow, ladder.VerdictAgree, keep))
	wantErr(t, "second review of a route", err, ladder.ErrConflict)

	_, start := ladder.ISOWeek(t0)
	agg := func(n, agree, sev1, opN, opErr int) []ladder.WeekAgg {
		return []ladder.WeekAgg{{Workspace: wsA, Queue: "bills", Step: "post_tms", ISOWeek: "2026-W35", WeekStart: start,
			N: n, Agreements: agree, Sev1: sev1, OpN: opN, OpErrors: opErr}}
	}
	if diff := cmp.Diff(agg(2, 1, 1, 1, 1), must(s.WeekAggs(ctx, stepKey))); diff != "" {
		t.Errorf("WeekAggs after the refused review (-want +got):\n%s", diff)
	}

	// An adjudication replaces the first verdict: n stays 2.
	adj := review(t, "rv_adj", routes[0], t0.Add(2*time.Hour), ladder.ReviewShadow, ladder.VerdictAgree, keep)
	adj.Review.Adjudication = true
	must2(s.RecordReview(ctx, adj))
	if diff := cmp.Diff(agg(2, 2, 0, 0, 0), must(s.WeekAggs(ctx, stepKey))); diff != "" {
		t.Errorf("WeekAggs after adjudication (-want +got):\n%s", diff)
	}
	// A second adjudication replaces the first one's.
	adj2 := review(t, "rv_adj2", routes[0], t0.Add(3*time.Hour), ladder.ReviewShadow, ladder.VerdictDisagree, keep)
	adj2.Review.Adjudication, adj2.Review.Severity = true, 1
	must2(s.RecordReview(ctx, adj2))
	if diff := cmp.Diff(agg(2, 1, 1, 0, 0), must(s.WeekAggs(ctx, stepKey))); diff != "" {
		t.Errorf("WeekAggs after second adjudication (-want +got):\n%s", diff)
	}
	got := must(s.Reviews(ctx, ladder.ReviewQuery{Key: stepKey}))
	var ids []string
	for _, r := range got {
		ids = append(ids, r.ID)
	}
	if diff := cmp.Diff([]string{"rv_adj2", "rv_adj", "rv_first", "rv_other"}, ids); diff != "" {
		t.Errorf("Reviews ids, newest first (-want +got):\n%s", diff)
	}
	wantAuditKinds(t, s, map[string]int{ladder.AuditRoute: 2, ladder.AuditReview: 4})
}

func testReviewConcurrentConflict(t *testing.T, s ladder.Store) {
	ctx := t.Context()
	routes := setupRoutes(t, s, ladder.LaneShadow, 1)
	// 32 people review one item at once: one review counts, the others
	// are refused, and the refused ones leave nothing behind.
	const callers = 32
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			_, _, errs[i] = s.RecordReview(ctx, review(t, fmt.Sprintf("rv_%d", i), routes[0], t0, ladder.ReviewShadow, ladder.VerdictAgree, keep))
		})
	}
	wg.Wait()
	ok := 0
	for i, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, ladder.ErrConflict):
			t.Errorf("review %d: err = %v, want nil or ErrConflict", i, err)
		}
	}
	if ok != 1 {
		t.Errorf("%d reviews of one route succeeded, want 1", ok)
	}
	if aggs := must(s.WeekAggs(ctx, stepKey)); len(aggs) != 1 || aggs[0].N != 1 {
		t.Errorf("WeekAggs = %+v, want n = 1", aggs)
	}
	if n := len(must(s.Reviews(ctx, ladder.ReviewQuery{Key: stepKey}))); n != 1 {
		t.Errorf("%d reviews stored, want 1", n)
	}
	wantAuditKinds(t, s, map[string]int{ladder.AuditRoute: 1, ladder.AuditReview: 1})
}

func testReviewScope(t *testing.T, s ladder.Store) {
	ctx := t.Context()
	routes := setupRoutes(t, s, ladder.LaneShadow, 1)
	w := review(t, "rv_1", routes[0], t0, ladder.ReviewShadow, ladder.VerdictAgree, keep)
	w.Review.Workspace = wsB // a ws-b key reviewing a ws-a route
	_, _, err := s.RecordReview(ctx, w)
	wantErr(t, "review of another workspace's route", err, ladder.ErrNotFound)
	w = review(t, "rv_2", newRoute("rt_unknown", wsA, "bill-x", t0), t0, ladder.ReviewShadow, ladder.VerdictAgree, keep)
	_, _, err = s.RecordReview(ctx, w)
	wantErr(t, "review of an unknown route", err, ladder.ErrNotFound)
	if got := must(s.WeekAggs(ctx, stepKey)); len(got) != 0 {
		t.Errorf("WeekAggs after refused reviews = %+v, want none", got)
	}
	wantAuditKinds(t, s, map[string]int{ladder.AuditRoute: 1})
}

func testReviewDeciderError(t *testing.T, s ladder.Store) {
	ctx := t.Context()
	routes := setupRoutes(t, s, ladder.LaneShadow, 1)
	before := must(s.GetStepState(ctx, stepKey))
	errRules := errors.New("rules broke")
	fail := func(ladder.StepState, []ladder.WeekAgg) (ladder.StepState, *ladder.LaneChange, []ladder.AuditEntry, error) {
		return ladder.StepState{}, nil, nil, errRules
	}
	_, _, err := s.RecordReview(ctx, review(t, "rv_1", routes[0], t0, ladder.ReviewShadow, ladder.VerdictAgree, fail))
	wantErr(t, "RecordReview with a failing decider", err, errRules)
	// Nothing of the review remains: not the review, its count, nor audit.
	if got := must(s.Reviews(ctx, ladder.ReviewQuery{Key: stepKey})); len(got) != 0 {
		t.Errorf("Reviews = %+v, want none", got)
	}
	if got := must(s.WeekAggs(ctx, stepKey)); len(got) != 0 && got[0].N != 0 {
		t.Errorf("WeekAggs = %+v, want nothing counted", got)
	}
	if diff := cmp.Diff(before, must(s.GetStepState(ctx, stepKey))); diff != "" {
		t.Errorf("state changed (-before +after):\n%s", diff)
	}
	wantAuditKinds(t, s, map[string]int{ladder.AuditRoute: 1})
	// The route can still be reviewed.
	must2(s.RecordReview(ctx, review(t, "rv_2", routes[0], t0, ladder.ReviewShadow, ladder.VerdictAgree, keep)))
}

// epochN sums n over the weeks of the state's epoch.
func epochN(st ladder.StepState, weeks []ladder.WeekAgg) int {
	n := 0
	for _, w := range weeks {
		if w.Epoch == st.Epoch {
			n += w.N
		}
	}
	return n
}

func testPromotionOnce(t *testing.T, s ladder.Store) {
	ctx := t.Context()
	const reviews, threshold = 64, 40
	routes := setupRoutes(t, s, ladder.LaneShadow, reviews)
	promote := func(st ladder.StepState, weeks []ladder.WeekAgg) (ladder.StepState, *ladder.LaneChange, []ladder.AuditEntry, error) {
		n := epochN(st, weeks)
		if st.Lane != ladder.LaneShadow || n < threshold {
			return st, nil, nil, nil
		}
		at := t0.Add(time.Hour)
		ch := &ladder.LaneChange{At: at, From: st.Lane, To: ladder.LanePropose, Rule: "test.promote",
			Numbers: map[string]float64{"n": float64(n)}, Actor: "system"}
		st.Lane, st.LaneSince = ladder.LanePropose, at
		e, err := ladder.NewAuditEntry(st.Workspace, "system", ladder.AuditLaneChange, st.Step, at, ch)
		return st, ch, []ladder.AuditEntry{e}, err
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		changes []*ladder.LaneChange
	)
	for i, r := range routes {
		wg.Go(func() {
			_, ch, err := s.RecordReview(ctx, review(t, fmt.Sprintf("rv_%d", i), r, t0.Add(time.Duration(i)*time.Second), ladder.ReviewShadow, ladder.VerdictAgree, promote))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Errorf("review %d: %v", i, err)
			}
			if ch != nil {
				changes = append(changes, ch)
			}
		})
	}
	wg.Wait()
	if len(changes) != 1 {
		t.Fatalf("%d reviews returned a lane change, want exactly 1", len(changes))
	}
	stored := must(s.LaneChanges(ctx, stepKey))
	if diff := cmp.Diff([]ladder.LaneChange{*changes[0]}, stored); diff != "" {
		t.Errorf("LaneChanges (-returned +stored):\n%s", diff)
	}
	if ch := stored[0]; ch.From != ladder.LaneShadow || ch.To != ladder.LanePropose || ch.Numbers["n"] != threshold || ch.ID == "" {
		t.Errorf("lane change = %+v, want shadow → propose at n = %d with an id", ch, threshold)
	}
	st := must(s.GetStepState(ctx, stepKey))
	if st.Lane != ladder.LanePropose {
		t.Errorf("lane = %s, want propose", st.Lane)
	}
	if aggs := must(s.WeekAggs(ctx, stepKey)); len(aggs) != 1 || aggs[0].N != reviews {
		t.Errorf("WeekAggs = %+v, want one week with n = %d", aggs, reviews)
	}
	wantAuditKinds(t, s, map[string]int{ladder.AuditRoute: reviews, ladder.AuditReview: reviews, ladder.AuditLaneChange: 1})
}

func testEpoch(t *testing.T, s ladder.Store) {
	ctx := t.Context()
	routes := setupRoutes(t, s, ladder.LanePropose, 3)
	// Demote on any severity-1 error in the current epoch, and start a new
	// epoch, as the rules do.
	demote := func(st ladder.StepState, weeks []ladder.WeekAgg) (ladder.StepState, *ladder.LaneChange, []ladder.AuditEntry, error) {
		for _, w := range weeks {
			if w.Epoch == st.Epoch && w.Sev1 > 0 && st.Lane == ladder.LanePropose {
				ch := &ladder.LaneChange{At: t0.Add(time.Hour), From: st.Lane, To: ladder.LaneShadow, Rule: "test.demote",
					Numbers: map[string]float64{"severity": 1}, Actor: "system"}
				st.Lane, st.LaneSince, st.Epoch, st.LastSev1At = ladder.LaneShadow, ch.At, st.Epoch+1, ch.At
				return st, ch, []ladder.AuditEntry{entry(t, st.Workspace, ladder.AuditLaneChange, st.Step, ch.At, ch)}, nil
			}
		}
		return st, nil, nil, nil
	}
	must2(s.RecordReview(ctx, review(t, "rv_0", routes[0], t0, ladder.ReviewApproval, ladder.VerdictAgree, demote)))
	bad := review(t, "rv_1", routes[1], t0.Add(time.Minute), ladder.ReviewApproval, ladder.VerdictDisagree, demote)
	bad.Review.Severity = 1
	st, ch, err := s.RecordReview(ctx, bad)
	check(t, err)
	if ch == nil || st.Epoch != 1 || st.Lane != ladder.LaneShadow || !st.LastSev1At.Equal(t0.Add(time.Hour)) {
		t.Fatalf("after severity-1 review: state %+v, change %+v; want shadow in epoch 1", st, ch)
	}
	must2(s.RecordReview(ctx, review(t, "rv_2", routes[2], t0.Add(2*time.Minute), ladder.ReviewShadow, ladder.VerdictAgree, demote)))

	_, start := ladder.ISOWeek(t0)
	want := []ladder.WeekAgg{
		{Workspace: wsA, Queue: "bills", Step: "post_tms", ISOWeek: "2026-W35", WeekStart: start, Epoch: 0, N: 2, Agreements: 1, Sev1: 1},
		{Workspace: wsA, Queue: "bills", Step: "post_tms", ISOWeek: "2026-W35", WeekStart: start, Epoch: 1, N: 1, Agreements: 1},
	}
	if diff := cmp.Diff(want, must(s.WeekAggs(ctx, stepKey))); diff != "" {
		t.Errorf("WeekAggs across a demotion (-want +got):\n%s", diff)
	}
	got := must(s.GetStepState(ctx, stepKey))
	if diff := cmp.Diff(st, got, ignoreVersion); diff != "" {
		t.Errorf("stored state (-returned after demotion +stored):\n%s", diff)
	}
	if n := len(must(s.LaneChanges(ctx, stepKey))); n != 1 {
		t.Errorf("%d lane changes, want 1", n)
	}
}

func testSetLane(t *testing.T, s ladder.Store) {
	ctx := t.Context()
	check(t, s.EnsureSteps(ctx, []ladder.StepState{stateOf(stepKey, ladder.LaneShadow)}))
	st := must(s.GetStepState(ctx, stepKey))

	up := ladder.LaneChange{ID: "lc_up", At: t0.Add(time.Hour), To: ladder.LanePropose, Rule: "manual",
		Numbers: map[string]float64{"n": 120}, Actor: "k_admin", Reason: "evidence reviewed"}
	moved := must(s.SetLane(ctx, ladder.LaneWrite{Key: stepKey, Change: up, IfVersion: st.Version,
		Audit: []ladder.AuditEntry{entry(t, wsA, ladder.AuditLaneChange, stepKey.Step, up.At, up)}}))
	if moved.Lane != ladder.LanePropose || !moved.LaneSince.Equal(up.At) || moved.Version == st.Version || moved.Epoch != 0 {
		t.Errorf("after SetLane: %+v; want propose since %v, a new version, epoch 0", moved, up.At)
	}
	if diff := cmp.Diff(moved, must(s.GetStepState(ctx, stepKey))); diff != "" {
		t.Errorf("stored state (-returned +stored):\n%s", diff)
	}

	// A write based on the old version loses.
	stale := ladder.LaneWrite{Key: stepKey, IfVersion: st.Version,
		Change: ladder.LaneChange{At: t0.Add(2 * time.Hour), To: ladder.LaneAuto, Rule: "manual", Actor: "k_admin"},
		Audit:  []ladder.AuditEntry{entry(t, wsA, ladder.AuditLaneChange, stepKey.Step, t0, nil)}}
	_, err := s.SetLane(ctx, stale)
	wantErr(t, "SetLane with a stale IfVersion", err, ladder.ErrConflict)
	if diff := cmp.Diff(moved, must(s.GetStepState(ctx, stepKey))); diff != "" {
		t.Errorf("state after a refused SetLane (-want +got):\n%s", diff)
	}

	// A pin moves down: a new epoch starts.
	pin := ladder.LaneChange{ID: "lc_pin", At: t0.Add(3 * time.Hour), To: ladder.LaneHumanOnly, Rule: "pin", Actor: "k_admin", Reason: "dispute"}
	pinned := must(s.SetLane(ctx, ladder.LaneWrite{Key: stepKey, Change: pin, Pinned: true, Reason: "dispute",
		Audit: []ladder.AuditEntry{entry(t, wsA, ladder.AuditPin, stepKey.Step, pin.At, pin)}}))
	if pinned.Lane != ladder.LaneHumanOnly || !pinned.Pinned || pinned.PinReason != "dispute" || pinned.Epoch != 1 {
		t.Errorf("after pin: %+v; want human_only, pinned for dispute, epoch 1", pinned)
	}

	// An unpin keeps the lane but is recorded as a lane change too.
	unpin := ladder.LaneChange{ID: "lc_unpin", At: t0.Add(4 * time.Hour), To: ladder.LaneHumanOnly, Rule: "unpin", Actor: "k_admin", Reason: "settled"}
	unpinned := must(s.SetLane(ctx, ladder.LaneWrite{Key: stepKey, Change: unpin, Pinned: false, Reason: "settled",
		Audit: []ladder.AuditEntry{entry(t, wsA, ladder.AuditUnpin, stepKey.Step, unpin.At, unpin)}}))
	if unpinned.Lane != ladder.LaneHumanOnly || unpinned.Pinned || unpinned.Epoch != 1 || !unpinned.LaneSince.Equal(pin.At) {
		t.Errorf("after unpin: %+v; want human_only since the pin, not pinned, epoch 1", unpinned)
	}

	want := []ladder.LaneChange{
		{ID: "lc_up", Workspace: wsA, Queue: "bills", Step: "post_tms", At: up.At, From: ladder.LaneShadow, To: ladder.LanePropose,
			Rule: "manual", Numbers: map[string]float64{"n": 120}, Actor: "k_admin", Reason: "evidence reviewed"},
		{ID: "lc_pin", Workspace: wsA, Queue: "bills", Step: "post_tms", At: pin.At, From: ladder.LanePropose, To: ladder.LaneHumanOnly,
			Rule: "pin", Actor: "k_admin", Reason: "dispute"},
		{ID: "lc_unpin", Workspace: wsA, Queue: "bills", Step: "post_tms", At: unpin.At, From: ladder.LaneHumanOnly, To: ladder.LaneHumanOnly,
			Rule: "unpin", Actor: "k_admin", Reason: "settled"},
	}
	if diff := cmp.Diff(want, must(s.LaneChanges(ctx, stepKey)), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("LaneChanges (-want +got):\n%s", diff)
	}
	if got := must(s.LaneChanges(ctx, ladder.StepKey{Workspace: wsB, Queue: "bills", Step: "post_tms"})); len(got) != 0 {
		t.Errorf("another workspace's LaneChanges = %+v, want none", got)
	}
	_, err = s.SetLane(ctx, ladder.LaneWrite{Key: ladder.StepKey{Workspace: wsB, Queue: "bills", Step: "post_tms"},
		Change: ladder.LaneChange{To: ladder.LaneAuto}})
	wantErr(t, "SetLane of an unknown step", err, ladder.ErrNotFound)
	wantAuditKinds(t, s, map[string]int{ladder.AuditLaneChange: 1, ladder.AuditPin: 1, ladder.AuditUnpin: 1})
}

func testReviewsFilters(t *testing.T, s ladder.Store) {
	ctx := t.Context()
	routes := setupRoutes(t, s, ladder.LaneAuto, 6)
	kinds := []ladder.ReviewKind{ladder.ReviewShadow, ladder.ReviewAudit, ladder.ReviewApproval, ladder.ReviewAudit, ladder.ReviewShadow, ladder.ReviewAudit}
	verdicts := []ladder.Verdict{ladder.VerdictAgree, ladder.VerdictDisagree, ladder.VerdictDisagree, ladder.VerdictAgree, ladder.VerdictDisagree, ladder.VerdictAgree}
	var all []ladder.Review
	for i, r := range routes {
		w := review(t, fmt.Sprintf("rv_%d", i), r, t0.Add(time.Duration(i)*time.Hour), kinds[i], verdicts[i], keep)
		w.Review.Note = fmt.Sprintf("note %d", i)
		w.Review.Correction = json.RawMessage(`{"amount":1300}`)
		w.Review.Severity = i % 3
		if i == 2 {
			w.Review.OperatorError = boolPtr(true)
		}
		must2(s.RecordReview(ctx, w))
		all = append(all, w.Review)
	}
	slices.Reverse(all) // newest first
	pick := func(idx ...int) []ladder.Review {
		var out []ladder.Review
		for _, i := range idx {
			out = append(out, all[len(all)-1-i])
		}
		return out
	}
	for _, tc := range []struct {
		name string
		q    ladder.ReviewQuery
		want []ladder.Review
	}{
		{"all", ladder.ReviewQuery{Key: stepKey}, all},
		{"disagreements", ladder.ReviewQuery{Key: stepKey, Disagreement: true}, pick(4, 2, 1)},
		{"audits", ladder.ReviewQuery{Key: stepKey, Kind: ladder.ReviewAudit}, pick(5, 3, 1)},
		{"audit disagreements", ladder.ReviewQuery{Key: stepKey, Kind: ladder.ReviewAudit, Disagreement: true}, pick(1)},
		{"limit", ladder.ReviewQuery{Key: stepKey, Limit: 2}, pick(5, 4)},
		{"other step", ladder.ReviewQuery{Key: ladder.StepKey{Workspace: wsA, Queue: "bills", Step: "read_bill"}}, nil},
		{"other workspace", ladder.ReviewQuery{Key: ladder.StepKey{Workspace: wsB, Queue: "bills", Step: "post_tms"}}, nil},
	} {
		got := must(s.Reviews(ctx, tc.q))
		if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("Reviews %s (-want +got):\n%s", tc.name, diff)
		}
	}
}

func testOutcomes(t *testing.T, s ladder.Store) {
	ctx := t.Context()
	add := func(step, by string, ok bool, n int) {
		t.Helper()
		for i := range n {
			o := ladder.Outcome{Workspace: wsA, Queue: "bills", Step: step, Item: fmt.Sprintf("%s-%s-%v-%d", step, by, ok, i),
				HandledBy: by, OK: ok, At: t0.Add(time.Duration(i) * time.Minute)}
			check(t, s.RecordOutcome(ctx, o, entry(t, wsA, ladder.AuditOutcome, o.Item, o.At, map[string]any{"ok": ok})))
		}
	}
	add("post_tms", ladder.HandledByAgent, true, 3)
	add("post_tms", ladder.HandledByAgent, false, 1)
	add("post_tms", ladder.HandledByPerson, true, 2)
	add("post_tms", ladder.HandledByPerson, false, 2)
	add("read_bill", ladder.HandledByAgent, false, 5)
	want := ladder.OutcomeCounts{AgentN: 4, AgentFailures: 1, PersonN: 4, PersonFailures: 2}
	if diff := cmp.Diff(want, must(s.OutcomeCounts(ctx, stepKey))); diff != "" {
		t.Errorf("OutcomeCounts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(ladder.OutcomeCounts{}, must(s.OutcomeCounts(ctx, ladder.StepKey{Workspace: wsB, Queue: "bills", Step: "post_tms"}))); diff != "" {
		t.Errorf("OutcomeCounts of another workspace (-want +got):\n%s", diff)
	}
	wantAuditKinds(t, s, map[string]int{ladder.AuditOutcome: 13})

	// Outcomes lists the step's outcomes oldest first, as stored, for a
	// backtest to replay.
	got := must(s.Outcomes(ctx, stepKey))
	if len(got) != 8 {
		t.Fatalf("Outcomes: %d, want the step's 8", len(got))
	}
	for i, o := range got {
		if o.Workspace != wsA || o.Step != "post_tms" || o.ID == "" || o.Item == "" || (i > 0 && o.At.Before(got[i-1].At)) {
			t.Errorf("Outcomes[%d] = %+v, out of order or not the step's", i, o)
		}
	}
	if o := got[len(got)-1]; o.Item != "post_tms-agent-true-2" || o.HandledBy != ladder.HandledByAgent || !o.OK || !o.At.Equal(t0.Add(2*time.Minute)) {
		t.Errorf("the latest outcome = %+v, want the third good agent-handled one", o)
	}
	if got := must(s.Outcomes(ctx, ladder.StepKey{Workspace: wsB, Queue: "bills", Step: "post_tms"})); len(got) != 0 {
		t.Errorf("Outcomes of another workspace: %+v", got)
	}
}

// testAdjudicationSev1Clock: an adjudication replaces the verdict it
// overrules in every rule (DESIGN.md §4), so an overruled severity-1
// disagreement no longer holds the step's severity-1 clock: the clock the
// decider sees falls back to the latest severity-1 error still counted, or
// to none.
func testAdjudicationSev1Clock(t *testing.T, s ladder.Store) {
	ctx := t.Context()
	routes := setupRoutes(t, s, ladder.LanePropose, 3)
	// The decider sets the clock as the service does, and records what it
	// was shown.
	var shown []time.Time
	sev1Clock := func(at time.Time, sev1 bool) ladder.ReviewDecider {
		return func(st ladder.StepState, _ []ladder.WeekAgg) (ladder.StepState, *ladder.LaneChange, []ladder.AuditEntry, error) {
			shown = append(shown, st.LastSev1At)
			if sev1 {
				st.LastSev1At = at
			}
			return st, nil, nil, nil
		}
	}
	sev1 := func(id string, r ladder.Route, at time.Time, adjudication bool) ladder.ReviewWrite {
		w := review(t, id, r, at, ladder.ReviewApproval, ladder.VerdictDisagree, sev1Clock(at, true))
		w.Review.Severity, w.Review.Adjudication = 1, adjudication
		return w
	}
	agree := func(id string, r ladder.Route, at time.Time) ladder.ReviewWrite {
		w := review(t, id, r, at, ladder.ReviewApproval, ladder.VerdictAgree, sev1Clock(at, false))
		w.Review.Adjudication = true
		return w
	}
	t1, t2 := t0.Add(time.Hour), t0.Add(2*time.Hour)
	must2(s.RecordReview(ctx, sev1("rv_a", routes[0], t1, false)))
	st, _ := must2(s.RecordReview(ctx, sev1("rv_b", routes[1], t2, false)))
	if !st.LastSev1At.Equal(t2) {
		t.Fatalf("clock after two severity-1 errors: %v, want %v", st.LastSev1At, t2)
	}
	// Overruling the later one leaves the earlier one's time.
	st, _ = must2(s.RecordReview(ctx, agree("rv_b_adj", routes[1], t2.Add(time.Hour))))
	if !st.LastSev1At.Equal(t1) || !shown[len(shown)-1].Equal(t1) {
		t.Errorf("clock after overruling the later error: stored %v, decider shown %v; want %v", st.LastSev1At, shown[len(shown)-1], t1)
	}
	// Overruling the other leaves none.
	st, _ = must2(s.RecordReview(ctx, agree("rv_a_adj", routes[0], t2.Add(2*time.Hour))))
	if !st.LastSev1At.IsZero() || !shown[len(shown)-1].IsZero() {
		t.Errorf("clock after overruling every error: stored %v, decider shown %v; want none", st.LastSev1At, shown[len(shown)-1])
	}
	// Overruling an agreement with a severity-1 error starts it again, and
	// overruling a verdict that was not severity 1 leaves it alone.
	st, _ = must2(s.RecordReview(ctx, agree("rv_c", routes[2], t2.Add(3*time.Hour))))
	st, _ = must2(s.RecordReview(ctx, sev1("rv_c_adj", routes[2], t2.Add(4*time.Hour), true)))
	if !st.LastSev1At.Equal(t2.Add(4 * time.Hour)) {
		t.Errorf("clock after an adjudication to a severity-1 error: %v, want %v", st.LastSev1At, t2.Add(4*time.Hour))
	}
}

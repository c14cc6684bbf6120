// Package storetest is the one conformance suite every ladder.Store
// implementation runs (sqlite, postgres): what the domain's Store
// interface promises, written down as tests, so the backends cannot drift
// apart.
//
// A backend's test calls Run with a function that opens a fresh, empty
// store:
//
//	func TestStore(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) ladder.Store {
//			s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "ladder.db"), sqlite.Options{})
//			if err != nil {
//				t.Fatal(err)
//			}
//			return s
//		})
//	}
//
// Run closes every store it opens, after checking that its audit chain
// verifies; open should register any other cleanup (dropping a database)
// with t.Cleanup.
package storetest

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/ladderhq/ladder"
)

// Run runs the conformance suite, one subtest per behavior, each against a
// fresh store from open.
func Run(t *testing.T, open func(t *testing.T) ladder.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s ladder.Store)
	}{
		{"Keys", testKeys},
		{"AuditAppend", testAuditAppend},
		{"AuditConcurrentAppends", testAuditConcurrent},
		{"AuditListAndWalk", testAuditList},
		{"AuditWalkManyPages", testAuditWalkLarge},
		{"AuditFilters", testAuditFilters},
		{"RouteIdempotent", testRouteIdempotent},
		{"RouteWorkspaceScope", testRouteScope},
		{"EnsureStepsKeepsExisting", testEnsureSteps},
		{"ReviewAggregates", testReviewAggregates},
		{"ReviewConflictAndAdjudication", testReviewConflict},
		{"ReviewConcurrentConflict", testReviewConcurrentConflict},
		{"ReviewScope", testReviewScope},
		{"ReviewDeciderError", testReviewDeciderError},
		{"AdjudicationSev1Clock", testAdjudicationSev1Clock},
		{"ReviewPromotionOnce", testPromotionOnce},
		{"ReviewEpochAfterDemotion", testEpoch},
		{"SetLane", testSetLane},
		{"ReviewsFilters", testReviewsFilters},
		{"Outcomes", testOutcomes},
		{"ImportRecords", testImportRecords},
		{"Ping", testPing},
	}
	tests = append(tests, gateTests...)
	tests = append(tests, approvalTests...)
	tests = append(tests, callTests...)
	tests = append(tests, laneEpochTests...)
	tests = append(tests, routeCallTests...)
	tests = append(tests, sessionTests...)
	tests = append(tests, eventTests...)
	tests = append(tests, tlogTests...)
	tests = append(tests, keyCheckTests...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if r := recover(); r != nil {
					if f, ok := r.(failure); ok {
						t.Fatalf("%s: %v", f.where, f.err)
					}
					panic(r)
				}
			}()
			s := open(t)
			t.Cleanup(func() {
				// Every subtest must leave a chain that verifies.
				if n, err := ladder.VerifyAudit(context.Background(), s); err != nil {
					t.Errorf("audit chain after %d records: %v", n, err)
				}
				if err := s.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			tt.fn(t, s)
		})
	}
}

// t0 is Monday 2026-08-24 09:00 UTC, in ISO week 2026-W35: every time in
// the suite is derived from it, so comparisons are deterministic.
var t0 = time.Date(2026, 8, 24, 9, 0, 0, 0, time.UTC)

const (
	wsA = "ws-a"
	wsB = "ws-b"
	wsC = "ws-c"
)

var stepKey = ladder.StepKey{Workspace: wsA, Queue: "bills", Step: "post_tms"}

// must returns v, or stops the subtest on err. It takes no *testing.T so
// that it can wrap a call returning (value, error) directly; Run turns the
// panic into t.Fatal naming the line. Use it only on the test goroutine.
func must[T any](v T, err error) T {
	if err != nil {
		fail(err)
	}
	return v
}

// must2 is must for calls returning two values and an error.
func must2[A, B any](a A, b B, err error) (A, B) {
	if err != nil {
		fail(err)
	}
	return a, b
}

// fail panics with a failure naming the test line that called must.
func fail(err error) {
	_, file, line, _ := runtime.Caller(2)
	panic(failure{where: fmt.Sprintf("%s:%d", filepath.Base(file), line), err: err})
}

// failure is what must panics with.
type failure struct {
	where string
	err   error
}

func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// wantErr fails the test unless err wraps target.
func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: err = %v, want %v", what, err, target)
	}
}

func entry(t *testing.T, workspace, kind, subject string, at time.Time, data any) ladder.AuditEntry {
	t.Helper()
	return must(ladder.NewAuditEntry(workspace, "system", kind, subject, at, data))
}

// auditKinds counts the audit records of each kind.
func auditKinds(t *testing.T, s ladder.Store) map[string]int {
	t.Helper()
	got := map[string]int{}
	check(t, s.WalkAudit(context.Background(), 0, func(r ladder.AuditRecord) error {
		got[r.Kind]++
		return nil
	}))
	return got
}

func wantAuditKinds(t *testing.T, s ladder.Store, want map[string]int) {
	t.Helper()
	if diff := cmp.Diff(want, auditKinds(t, s)); diff != "" {
		t.Errorf("audit records per kind (-want +got):\n%s", diff)
	}
}

func seqs(recs []ladder.AuditRecord) []int64 {
	out := make([]int64, len(recs))
	for i, r := range recs {
		out[i] = r.Seq
	}
	return out
}

func seqRange(from, to int64, step int64) []int64 {
	var out []int64
	if step > 0 {
		for i := from; i <= to; i += step {
			out = append(out, i)
		}
	} else {
		for i := from; i >= to; i += step {
			out = append(out, i)
		}
	}
	return out
}

func testKeys(t *testing.T, s ladder.Store) {
	ctx := t.Context()
	hash := func(s string) []byte { h := sha256.Sum256([]byte(s)); return h[:] }
	expires := t0.Add(72 * time.Hour)
	keys := []ladder.Key{
		{ID: "k1", Workspace: wsA, Kind: ladder.KeyAgent, Name: "agent one", SecretHash: hash("s1"), CreatedAt: t0, ExpiresAt: &expires},
		{ID: "k2", Workspace: wsB, Kind: ladder.KeyHuman, Name: "reviewer", SecretHash: hash("s2"), CreatedAt: t0.Add(time.Minute)},
		{ID: "k3", Workspace: wsA, Kind: ladder.KeyAdmin, SecretHash: hash("s3"), CreatedAt: t0.Add(2 * time.Minute)},
	}
	for _, k := range keys {
		check(t, s.CreateKey(ctx, k, entry(t, k.Workspace, ladder.AuditKeyCreate, k.ID, k.CreatedAt, map[string]string{"kind": string(k.Kind)})))
	}
	wantErr(t, "CreateKey with an id in use", s.CreateKey(ctx, keys[0], entry(t, wsA, ladder.AuditKeyCreate, "k1", t0, nil)), ladder.ErrConflict)

	if diff := cmp.Diff(keys[0], must(s.GetKey(ctx, "k1"))); diff != "" {
		t.Errorf("GetKey k1 (-want +got):\n%s", diff)
	}
	_, err := s.GetKey(ctx, "k-unknown")
	wantErr(t, "GetKey unknown", err, ladder.ErrNotFound)

	for _, tc := range []struct {
		workspace string
		want      []ladder.Key
	}{
		{wsA, []ladder.Key{keys[0], keys[2]}},
		{wsB, []ladder.Key{keys[1]}},
		{"", keys},
		{"ws-none", nil},
	} {
		got := must(s.ListKeys(ctx, tc.workspace))
		if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("ListKeys(%q) (-want +got):\n%s", tc.workspace, diff)
		}
	}

	revokedAt := t0.Add(time.Hour)
	check(t, s.RevokeKey(ctx, "k1", revokedAt, entry(t, wsA, ladder.AuditKeyRevoke, "k1", revokedAt, nil)))
	got := must(s.GetKey(ctx, "k1"))
	if got.RevokedAt == nil || !got.RevokedAt.Equal(revokedAt) {
		t.Errorf("RevokedAt = %v, want %v", got.RevokedAt, revokedAt)
	}
	if got.Active(t0) {
		t.Errorf("revoked key is active")
	}
	if err := s.RevokeKey(ctx, "k1", revokedAt.Add(time.Hour), entry(t, wsA, ladder.AuditKeyRevoke, "k1", revokedAt, nil)); err != nil {
		t.Errorf("revoking a revoked key: %v", err)
	}
	wantErr(t, "RevokeKey unknown", s.RevokeKey(ctx, "k-unknown", revokedAt, entry(t, wsA, ladder.AuditKeyRevoke, "k-unknown", revokedAt, nil)), ladder.ErrNotFound)
	if got := must(s.GetKey(ctx, "k2")); got.RevokedAt != nil {
		t.Errorf("k2 RevokedAt = %v, want nil", got.RevokedAt)
	}
	if n := must(s.CountKeys(ctx)); n != 3 {
		t.Errorf("CountKeys = %d, want 3", n)
	}
	wantAuditKinds(t, s, map[string]int{ladder.AuditKeyCreate: 3, ladder.AuditKeyRevoke: 2})
}

func testAuditAppend(t *testing.T, s ladder.Store) {
	ctx := t.Context()
	// A time finer than a microsecond and data in no particular form: the
	// store keeps microseconds and canonical JSON, so hashes re-verify.
	e1 := ladder.AuditEntry{Workspace: wsA, Actor: "k1", Kind: ladder.AuditRoute, Subject: "rt_1",
		At: t0.Add(1500 * time.Nanosecond), Data: json.RawMessage(`{ "b": 1, "a": [1, 2] }`)}
	e2 := entry(t, wsB, ladder.AuditReview, "rv_1", t0.Add(time.Second), map[string]any{"verdict": "agree"})
	e3 := entry(t, wsA, ladder.AuditOutcome, "oc_1", t0.Add(2*time.Second), nil)
	recs := must(s.AppendAudit(ctx, e1, e2, e3))

	want := []ladder.AuditRecord{
		{Seq: 1, AuditEntry: ladder.AuditEntry{Workspace: wsA, Actor: "k1", Kind: ladder.AuditRoute, Subject: "rt_1",
			At: t0.Add(time.Microsecond), Data: json.RawMessage(`{"a":[1,2],"b":1}`)}},
		{Seq: 2, AuditEntry: e2},
		{Seq: 3, AuditEntry: e3},
	}
	// Each workspace's records form their own chain.
	prev := map[string]string{}
	for i := range want {
		want[i].Seal(prev[want[i].Workspace])
		prev[want[i].Workspace] = want[i].Hash
	}
	if diff := cmp.Diff(want, recs); diff != "" {
		t.Errorf("AppendAudit records (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, must(s.ListAudit(ctx, ladder.AuditQuery{}))); diff != "" {
		t.Errorf("ListAudit after AppendAudit (-want +got):\n%s", diff)
	}
	more := must(s.AppendAudit(ctx, entry(t, wsA, ladder.AuditServerStart, "", t0.Add(time.Minute), nil)))
	if len(more) != 1 || more[0].Seq != 4 || more[0].PrevHash != want[2].Hash {
		t.Errorf("next append = %+v, want seq 4 chained to %s", more, want[2].Hash)
	}
	if n, err := ladder.VerifyAudit(ctx, s); err != nil || n != 4 {
		t.Errorf("VerifyAudit = %d, %v; want 4, nil", n, err)
	}
	if recs := must(s.AppendAudit(ctx)); len(recs) != 0 {
		t.Errorf("AppendAudit with no entries returned %d records", len(recs))
	}
}

func testAuditConcurrent(t *testing.T, s ladder.Store) {
	ctx := t.Context()
	const goroutines, calls = 32, 5
	var wg sync.WaitGroup
	errs := make(chan error, goroutines*calls)
	for g := range goroutines {
		wg.Go(func() {
			for c := range calls {
				subject := fmt.Sprintf("g%d-c%d", g, c)
				a := entry(t, wsA, ladder.AuditCall, subject, t0, map[string]int{"g": g, "c": c})
				b := entry(t, wsA, ladder.AuditCallResult, subject, t0, map[string]int{"g": g, "c": c})
				recs, err := s.AppendAudit(ctx, a, b)
				if err != nil {
					errs <- err
					continue
				}
				// One call's entries are appended together, in order.
				if len(recs) != 2 || recs[1].Seq != recs[0].Seq+1 || recs[1].PrevHash != recs[0].Hash {
					errs <- fmt.Errorf("%s: records not adjacent: %+v", subject, seqs(recs))
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	n, err := ladder.VerifyAudit(ctx, s)
	if err != nil || n != goroutines*calls*2 {
		t.Errorf("VerifyAudit = %d, %v; want %d, nil", n, err, goroutines*calls*2)
	}
}

func testAuditList(t *testing.T, s ladder.Store) {
	ctx := t.Context()
	// 60 records: odd seqs in ws-a, even in ws-b; every third a review.
	var entries []ladder.AuditEntry
	for i := 1; i <= 60; i++ {
		ws, kind := wsA, ladder.AuditRoute
		if i%2 == 0 {
			ws = wsB
		}
		if i%3 == 0 {
			kind = ladder.AuditReview
		}
		entries = append(entries, entry(t, ws, kind, fmt.Sprint(i), t0.Add(time.Duration(i)*time.Second), nil))
	}
	must(s.AppendAudit(ctx, entries[:25]...))
	must(s.AppendAudit(ctx, entries[25:]...))

	var wsAOdd, wsBReviewsDesc []int64
	for i := int64(1); i <= 60; i++ {
		if i%2 == 1 && len(wsAOdd) < 50 {
			wsAOdd = append(wsAOdd, i)
		}
	}
	for i := int64(60); i >= 1; i-- {
		if i%2 == 0 && i%3 == 0 && len(wsBReviewsDesc) < 4 {
			wsBReviewsDesc = append(wsBReviewsDesc, i)
		}
	}
	for _, tc := range []struct {
		name string
		q    ladder.AuditQuery
		want []int64
	}{
		{"default limit is 50", ladder.AuditQuery{}, seqRange(1, 50, 1)},
		{"workspace", ladder.AuditQuery{Workspace: wsA}, wsAOdd},
		{"kind", ladder.AuditQuery{Kind: ladder.AuditReview, Limit: 5}, []int64{3, 6, 9, 12, 15}},
		{"after seq", ladder.AuditQuery{AfterSeq: 10, Limit: 5}, seqRange(11, 15, 1)},
		{"after the end", ladder.AuditQuery{AfterSeq: 60}, nil},
		{"next page", ladder.AuditQuery{AfterSeq: 50, Limit: 50}, seqRange(51, 60, 1)},
		{"desc", ladder.AuditQuery{Desc: true, Limit: 3}, []int64{60, 59, 58}},
		{"desc before seq", ladder.AuditQuery{Desc: true, BeforeSeq: 10, Limit: 3}, []int64{9, 8, 7}},
		{"desc to the start", ladder.AuditQuery{Desc: true, BeforeSeq: 3}, []int64{2, 1}},
		{"desc workspace and kind", ladder.AuditQuery{Workspace: wsB, Kind: ladder.AuditReview, Desc: true, Limit: 4}, wsBReviewsDesc},
		{"unknown workspace", ladder.AuditQuery{Workspace: "ws-none"}, nil},
	} {
		got := seqs(must(s.ListAudit(ctx, tc.q)))
		if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("ListAudit %s %+v: seqs (-want +got):\n%s", tc.name, tc.q, diff)
		}
	}

	var walked []int64
	check(t, s.WalkAudit(ctx, 55, func(r ladder.AuditRecord) error { walked = append(walked, r.Seq); return nil }))
	if diff := cmp.Diff(seqRange(56, 60, 1), walked); diff != "" {
		t.Errorf("WalkAudit after 55 (-want +got):\n%s", diff)
	}
	errStop := errors.New("stop")
	calls := 0
	err := s.WalkAudit(ctx, 0, func(r ladder.AuditRecord) error {
		calls++
		if r.Seq == 3 {
			return errStop
		}
		return nil
	})
	if !errors.Is(err, errStop) || calls != 3 {
		t.Errorf("WalkAudit stopping at 3: err = %v after %d calls, want %v after 3", err, calls, errStop)
	}
	// What ListAudit returns is what WalkAudit returns.
	var all []ladder.AuditRecord
	check(t, s.WalkAudit(ctx, 0, func(r ladder.AuditRecord) error { all = append(all, r); return nil }))
	if diff := cmp.Diff(all[:50], must(s.ListAudit(ctx, ladder.AuditQuery{}))); diff != "" {
		t.Errorf("ListAudit vs WalkAudit (-walk +list):\n%s", diff)
	}
}

func testAuditWalkLarge(t *testing.T, s ladder.Store) {
	ctx := t.Context()
	const total = 2500 // more than any backend's page
	for start := 0; start < total; start += 500 {
		batch := make([]ladder.AuditEntry, 500)
		for i := range batch {
			batch[i] = entry(t, wsA, ladder.AuditRoute, fmt.Sprint(start+i), t0, nil)
		}
		must(s.AppendAudit(ctx, batch...))
	}
	var next int64 = 1
	check(t, s.WalkAudit(ctx, 0, func(r ladder.AuditRecord) error {
		if r.Seq != next {
			return fmt.Errorf("walk gave seq %d, want %d", r.Seq, next)
		}
		next++
		return nil
	}))
	if next != total+1 {
		t.Errorf("walked %d records, want %d", next-1, total)
	}
}

func newRoute(id, workspace, item string, at time.Time) ladder.Route {
	return ladder.Route{
		ID: id, Workspace: workspace, Queue: stepKey.Queue, Step: stepKey.Step, Item: item,
		Decision: ladder.DecisionHumanOnly, Lane: ladder.LaneShadow, AuditRate: 0.05, StateAuditRate: 0.05,
		Reason: "shadow: a person handles it", Features: json.RawMessage(`{"amount":1250}`), KeyID: "k1", At: at,
	}
}

func routeAudit(t *testing.T, r ladder.Route) ladder.AuditEntry {
	t.Helper()
	return entry(t, r.Workspace, ladder.AuditRoute, r.ID, r.At, map[string]any{"item": r.Item, "decision": r.Decision})
}

// mustRoute stores a route and returns it.
func mustRoute(t *testing.T, s ladder.Store, r ladder.Route) ladder.Route {
	t.Helper()
	got, _, err := s.RecordRoute(t.Context(), r, routeAudit(t, r))
	check(t, err)
	return got
}

func testRouteIdempotent(t *testing.T, s ladder.Store) {
	ctx := t.Context()
	const callers = 32
	type result struct {
		route   ladder.Route
		created bool
		err     error
	}
	results := make([]result, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			// Each caller makes its own id, as a server would.
			r := newRoute(fmt.Sprintf("rt_%02d", i), wsA, "bill-7", t0.Add(time.Duration(i)*time.Millisecond))
			got, created, err := s.RecordRoute(ctx, r, routeAudit(t, r))
			results[i] = result{got, created, err}
		})
	}
	wg.Wait()
	created := 0
	for i, r := range results {
		if r.err != nil {
			t.Fatalf("caller %d: %v", i, r.err)
		}
		if r.created {
			created++
		}
		if diff := cmp.Diff(results[0].route, r.route); diff != "" {
			t.Errorf("caller %d got another route (-first +got):\n%s", i, diff)
		}
	}
	if created != 1 {
		t.Errorf("%d callers created the route, want 1", created)
	}
	winner := results[0].route
	if diff := cmp.Diff(winner, must(s.GetRoute(ctx, wsA, winner.ID))); diff != "" {
		t.Errorf("GetRoute (-recorded +got):\n%s", diff)
	}
	recs := must(s.ListAudit(ctx, ladder.AuditQuery{Kind: ladder.AuditRoute}))
	if len(recs) != 1 || recs[0].Subject != winner.ID {
		t.Errorf("route audit records = %+v, want one about %s", recs, winner.ID)
	}

	// A second item is a second route; the stored route is what was sent.
	r2 := newRoute("rt_second", wsA, "bill-8", t0.Add(time.Hour))
	r2.Decision, r2.Lane, r2.Audit = ladder.DecisionActAlone, ladder.LaneAuto, true
	got, isNew, err := s.RecordRoute(ctx, r2, routeAudit(t, r2))
	check(t, err)
	if !isNew {
		t.Errorf("second item: created = false")
	}
	want := r2
	want.StateAuditRate = 0 // the decision's input, not stored
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("second route (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, must(s.GetRoute(ctx, wsA, "rt_second"))); diff != "" {
		t.Errorf("GetRoute second (-want +got):\n%s", diff)
	}
	// The same item at another step is another route.
	r3 := newRoute("rt_third", wsA, "bill-7", t0)
	r3.Step = "read_bill"
	if _, isNew, err := s.RecordRoute(ctx, r3, routeAudit(t, r3)); err != nil || !isNew {
		t.Errorf("same item, other step: created = %v, err = %v; want a new route", isNew, err)
	}
	wantAuditKinds(t, s, map[string]int{ladder.AuditRoute: 3})
}

func testRouteScope(t *testing.T, s ladder.Store) {
	ctx := t.Context()
	r := mustRoute(t, s, newRoute("rt_a", wsA, "bill-1", t0))
	_, err := s.GetRoute(ctx, wsB, r.ID)
	wantErr(t, "GetRoute from another workspace", err, ladder.ErrNotFound)
	_, err = s.GetRoute(ctx, wsA, "rt_unknown")
	wantErr(t, "GetRoute unknown id", err, ladder.ErrNotFound)
	// The same item in another workspace is that workspace's own route.
	rb := newRoute("rt_b", wsB, "bill-1", t0)
	got, created, err := s.RecordRoute(ctx, rb, routeAudit(t, rb))
	if err != nil || !created || got.ID != "rt_b" {
		t.Errorf("same item in another workspace: %+v, created %v, err %v", got, created, err)
	}
}

func stateOf(key ladder.StepKey, lane ladder.Lane) ladder.StepState {
	return ladder.StepState{Workspace: key.Workspace, Queue: key.Queue, Step: key.Step, Lane: lane, LaneSince: t0, AuditRate: 0.05, AuditRateSince: t0.Add(time.Minute)}
}

var ignoreVersion = cmpopts.IgnoreFields(ladder.StepState{}, "Version")

func testEnsureSteps(t *testing.T, s ladder.Store) {
	ctx := t.Context()
	a := stateOf(stepKey, ladder.LaneShadow)
	b := stateOf(ladder.StepKey{Workspace: wsA, Queue: "bills", Step: "read_bill"}, ladder.LanePropose)
	other := stateOf(ladder.StepKey{Workspace: wsB, Queue: "loads", Step: "check_call"}, ladder.LaneAuto)
	check(t, s.EnsureSteps(ctx, []ladder.StepState{a, b, other}))

	got := must(s.GetStepState(ctx, stepKey))
	if diff := cmp.Diff(a, got, ignoreVersion); diff != "" {
		t.Errorf("GetStepState (-want +got):\n%s", diff)
	}
	if got.Version == 0 {
		t.Errorf("a stored state has version 0; IfVersion could not guard it")
	}
	_, err := s.GetStepState(ctx, ladder.StepKey{Workspace: wsA, Queue: "bills", Step: "nope"})
	wantErr(t, "GetStepState unknown", err, ladder.ErrNotFound)
	_, err = s.GetStepState(ctx, ladder.StepKey{Workspace: wsB, Queue: stepKey.Queue, Step: stepKey.Step})
	wantErr(t, "GetStepState in another workspace", err, ladder.ErrNotFound)

	moved := must(s.SetLane(ctx, ladder.LaneWrite{Key: stepKey,
		Change: ladder.LaneChange{To: ladder.LanePropose, Rule: "test", Actor: "k_human", At: t0.Add(time.Hour)}}))

	// Ensuring again (a restart with one more step in the config) keeps
	// what the ladder learned and adds the new step, in config order.
	c := stateOf(ladder.StepKey{Workspace: wsA, Queue: "bills", Step: "match_rate"}, ladder.LaneHumanOnly)
	check(t, s.EnsureSteps(ctx, []ladder.StepState{a, b, c}))
	want := []ladder.StepState{moved, b, c}
	if diff := cmp.Diff(want, must(s.ListStepStates(ctx, wsA)), ignoreVersion); diff != "" {
		t.Errorf("ListStepStates after second EnsureSteps (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]ladder.StepState{other}, must(s.ListStepStates(ctx, wsB)), ignoreVersion); diff != "" {
		t.Errorf("ListStepStates ws-b (-want +got):\n%s", diff)
	}
	if got := must(s.ListStepStates(ctx, "ws-none")); len(got) != 0 {
		t.Errorf("ListStepStates unknown workspace = %+v, want none", got)
	}
}

// testPing: Ping succeeds on a working store, again and again, alone and
// among concurrent writes (its probe write shares their transactions), and
// its probe leaves nothing a caller can see: no audit record.
func testPing(t *testing.T, s ladder.Store) {
	ctx := t.Context()
	for i := range 3 {
		if err := s.Ping(ctx); err != nil {
			t.Fatalf("Ping %d: %v", i, err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for g := range 4 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for range 5 {
				if err := s.Ping(ctx); err != nil {
					errs <- fmt.Errorf("ping among writes: %w", err)
				}
			}
		}()
		go func() {
			defer wg.Done()
			for i := range 5 {
				e, err := ladder.NewAuditEntry(wsA, "system", ladder.AuditRoute, fmt.Sprintf("ping-%d-%d", g, i), t0, nil)
				if err == nil {
					_, err = s.AppendAudit(ctx, e)
				}
				if err != nil {
					errs <- fmt.Errorf("append among Pings: %w", err)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := auditKinds(t, s); len(got) != 1 || got[ladder.AuditRoute] != 20 {
		t.Errorf("audit records after Pings and 20 appends: %v, want only the 20 appends", got)
	}
}

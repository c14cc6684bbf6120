package ladder_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ladderhq/ladder"
)

// weekKey names one week row of the fake.
type weekKey struct {
	key   ladder.StepKey
	week  string
	epoch int
}

// storedReview is a review as the fake keeps it.
type storedReview struct {
	rv      ladder.Review
	week    string
	epoch   int
	counted bool
}

// fakeTx is an in-memory ReviewTx (and LaneTx, ExpiryTx): the SQL of a
// store, as maps, so the shared routines can be tested without one.
type fakeTx struct {
	routes    map[string]ladder.Route
	states    map[ladder.StepKey]ladder.StepState
	reviews   []storedReview
	weeks     map[weekKey]ladder.WeekAgg
	changes   []ladder.LaneChange
	audit     []ladder.AuditEntry
	notified  []ladder.StepKey
	closed    []string
	approvals []ladder.Approval
	failOn    string // the method that fails, for error paths
}

var errFake = errors.New("fake failure")

func newFakeTx() *fakeTx {
	return &fakeTx{
		routes: map[string]ladder.Route{},
		states: map[ladder.StepKey]ladder.StepState{},
		weeks:  map[weekKey]ladder.WeekAgg{},
	}
}

func (f *fakeTx) fail(method string) error {
	if f.failOn == method {
		return errFake
	}
	return nil
}

func (f *fakeTx) LockState(k ladder.StepKey) (ladder.StepState, error) {
	st, ok := f.states[k]
	if !ok {
		return ladder.StepState{}, ladder.ErrNotFound
	}
	return st, nil
}

func (f *fakeTx) UpdateState(st ladder.StepState) error {
	if err := f.fail("UpdateState"); err != nil {
		return err
	}
	f.states[ladder.StepKey{Workspace: st.Workspace, Queue: st.Queue, Step: st.Step}] = st
	return nil
}

func (f *fakeTx) InsertLaneChange(c ladder.LaneChange) error {
	f.changes = append(f.changes, c)
	return f.fail("InsertLaneChange")
}

func (f *fakeTx) AppendAudit(entries ...ladder.AuditEntry) error {
	f.audit = append(f.audit, entries...)
	return f.fail("AppendAudit")
}

func (f *fakeTx) StepChanged(k ladder.StepKey) { f.notified = append(f.notified, k) }

func (f *fakeTx) RouteOf(id string) (ladder.Route, error) {
	r, ok := f.routes[id]
	if !ok {
		return ladder.Route{}, ladder.ErrNotFound
	}
	return r, f.fail("RouteOf")
}

func (f *fakeTx) Reviewed(routeID string) (bool, error) {
	for _, s := range f.reviews {
		if s.rv.RouteID == routeID && !s.rv.Adjudication {
			return true, nil
		}
	}
	return false, nil
}

func (f *fakeTx) CountedReview(routeID string) (ladder.CountedReview, bool, error) {
	for _, s := range f.reviews {
		if s.rv.RouteID == routeID && s.counted {
			return ladder.CountedReview{Review: s.rv, Week: s.week, Epoch: s.epoch}, true, nil
		}
	}
	return ladder.CountedReview{}, false, nil
}

func (f *fakeTx) LastSev1(k ladder.StepKey) (time.Time, error) {
	var last time.Time
	for _, s := range f.reviews {
		if s.counted && s.rv.Sev1() && s.rv.Workspace == k.Workspace && s.rv.Queue == k.Queue && s.rv.Step == k.Step && s.rv.At.After(last) {
			last = s.rv.At
		}
	}
	return last, f.fail("LastSev1")
}

func (f *fakeTx) Uncount(id string) error {
	for i := range f.reviews {
		if f.reviews[i].rv.ID == id {
			f.reviews[i].counted = false
		}
	}
	return nil
}

func (f *fakeTx) InsertReview(rv ladder.Review, week string, epoch int) error {
	f.reviews = append(f.reviews, storedReview{rv: rv, week: week, epoch: epoch, counted: true})
	return f.fail("InsertReview")
}

func (f *fakeTx) CloseShadow(routeID string) error {
	f.closed = append(f.closed, routeID)
	return nil
}

func (f *fakeTx) AddToWeek(d ladder.WeekDelta) error {
	k := weekKey{d.Key, d.Week, d.Epoch}
	row, ok := f.weeks[k]
	if !ok && !d.Create {
		return nil
	}
	if !ok {
		row = ladder.WeekAgg{Workspace: d.Key.Workspace, Queue: d.Key.Queue, Step: d.Key.Step, ISOWeek: d.Week, WeekStart: d.WeekStart, Epoch: d.Epoch}
	}
	f.weeks[k] = row.Plus(d.Counts)
	return nil
}

func (f *fakeTx) WeekAggs(k ladder.StepKey) ([]ladder.WeekAgg, error) {
	var out []ladder.WeekAgg
	for wk, row := range f.weeks {
		if wk.key == k {
			out = append(out, row)
		}
	}
	slices.SortFunc(out, func(a, b ladder.WeekAgg) int {
		if c := strings.Compare(a.ISOWeek, b.ISOWeek); c != 0 {
			return c
		}
		return a.Epoch - b.Epoch
	})
	return out, nil
}

func (f *fakeTx) StoreApproval(a ladder.Approval) error {
	f.approvals = append(f.approvals, a)
	return f.fail("StoreApproval")
}

var (
	_ ladder.ReviewTx = (*fakeTx)(nil)
	_ ladder.ExpiryTx = (*fakeTx)(nil)
)

var (
	stepKey = ladder.StepKey{Workspace: "ws", Queue: "q", Step: "s"}
	// txNow is a clock reading finer and in another zone than stores keep,
	// so normalisation shows.
	txNow = time.Date(2026, 9, 1, 10, 0, 0, 123456789, time.FixedZone("X", 3600))
)

// seeded is a fake with one step in shadow and one route of it.
func seeded() *fakeTx {
	f := newFakeTx()
	f.routes["rt1"] = ladder.Route{ID: "rt1", Workspace: "ws", Queue: "q", Step: "s", Item: "i1"}
	f.states[stepKey] = ladder.StepState{Workspace: "ws", Queue: "q", Step: "s", Lane: ladder.LaneShadow, Version: 3, AuditRate: 0.1}
	return f
}

func review(verdict ladder.Verdict, adjudication bool) ladder.ReviewWrite {
	return ladder.ReviewWrite{
		Review: ladder.Review{ID: "rv-" + string(verdict), RouteID: "rt1", Workspace: "ws", Kind: ladder.ReviewShadow, Verdict: verdict, Adjudication: adjudication, Reviewer: "p"},
		Audit:  ladder.AuditEntry{Workspace: "ws", Kind: "review", Subject: "rv"},
	}
}

func TestRecordReviewTx(t *testing.T) {
	week, weekStart := ladder.ISOWeek(txNow)
	row := weekKey{stepKey, week, 0}
	promote := func(st ladder.StepState, _ []ladder.WeekAgg) (ladder.StepState, *ladder.LaneChange, []ladder.AuditEntry, error) {
		next := st.Changed(ladder.LanePropose, txNow)
		next.AuditRateSince = txNow
		return next, &ladder.LaneChange{To: ladder.LanePropose, Rule: "promote", Actor: "rules"}, []ladder.AuditEntry{{Kind: "lane"}}, nil
	}
	tests := []struct {
		name    string
		setup   func(f *fakeTx)
		write   ladder.ReviewWrite
		wantErr error
		check   func(t *testing.T, f *fakeTx, st ladder.StepState, c *ladder.LaneChange)
	}{
		{
			name: "unknown route",
			write: func() ladder.ReviewWrite {
				w := review(ladder.VerdictAgree, false)
				w.Review.RouteID = "nope"
				return w
			}(),
			wantErr: ladder.ErrNotFound,
		},
		{
			name: "route of another workspace",
			write: func() ladder.ReviewWrite {
				w := review(ladder.VerdictAgree, false)
				w.Review.Workspace = "other"
				return w
			}(),
			wantErr: ladder.ErrNotFound,
		},
		{
			name:  "first review is counted",
			write: review(ladder.VerdictAgree, false),
			check: func(t *testing.T, f *fakeTx, st ladder.StepState, c *ladder.LaneChange) {
				if diff := cmp.Diff(ladder.WeekAgg{Workspace: "ws", Queue: "q", Step: "s", ISOWeek: week, WeekStart: weekStart, N: 1, Agreements: 1}, f.weeks[row]); diff != "" {
					t.Errorf("week row (-want +got):\n%s", diff)
				}
				if st.Version != 4 || st.Lane != ladder.LaneShadow || c != nil {
					t.Errorf("state %+v, change %v; want version 4 in shadow, no change", st, c)
				}
				if got := f.reviews[0].rv; got.Queue != "q" || got.Step != "s" || got.Item != "i1" || !got.At.Equal(ladder.NormTime(txNow)) {
					t.Errorf("stored review %+v: want the route's queue, step and item, at now", got)
				}
				if !slices.Equal(f.closed, []string{"rt1"}) || len(f.audit) != 1 || len(f.notified) != 0 {
					t.Errorf("closed %v, audit %v, notified %v; want rt1 closed, one entry, nobody told", f.closed, f.audit, f.notified)
				}
			},
		},
		{
			name: "a second review is a conflict",
			setup: func(f *fakeTx) {
				f.reviews = append(f.reviews, storedReview{rv: ladder.Review{ID: "rv0", RouteID: "rt1"}, counted: true})
			},
			write:   review(ladder.VerdictAgree, false),
			wantErr: ladder.ErrConflict,
		},
		{
			name: "an adjudication replaces the counted verdict",
			setup: func(f *fakeTx) {
				earlier := ladder.Review{ID: "rv0", RouteID: "rt1", Workspace: "ws", Queue: "q", Step: "s", Kind: ladder.ReviewShadow, Verdict: ladder.VerdictDisagree, Severity: 1}
				f.reviews = append(f.reviews, storedReview{rv: earlier, week: week, epoch: 0, counted: true})
				f.weeks[row] = ladder.WeekAgg{Workspace: "ws", Queue: "q", Step: "s", ISOWeek: week, WeekStart: weekStart, N: 1, Sev1: 1}
			},
			write: review(ladder.VerdictAgree, true),
			check: func(t *testing.T, f *fakeTx, _ ladder.StepState, _ *ladder.LaneChange) {
				if diff := cmp.Diff(ladder.WeekAgg{Workspace: "ws", Queue: "q", Step: "s", ISOWeek: week, WeekStart: weekStart, N: 1, Agreements: 1}, f.weeks[row]); diff != "" {
					t.Errorf("week row (-want +got):\n%s", diff)
				}
				if f.reviews[0].counted || !f.reviews[1].counted {
					t.Errorf("counted: earlier %v, adjudication %v; want false, true", f.reviews[0].counted, f.reviews[1].counted)
				}
			},
		},
		{
			name:  "an adjudication without an earlier verdict counts alone",
			write: review(ladder.VerdictDisagree, true),
			check: func(t *testing.T, f *fakeTx, _ ladder.StepState, _ *ladder.LaneChange) {
				if got := f.weeks[row]; got.N != 1 || got.Agreements != 0 {
					t.Errorf("week row %+v: want n 1, no agreement", got)
				}
			},
		},
		{
			name:  "the decider's lane change is stored, normalised",
			write: func() ladder.ReviewWrite { w := review(ladder.VerdictAgree, false); w.Decide = promote; return w }(),
			check: func(t *testing.T, f *fakeTx, st ladder.StepState, c *ladder.LaneChange) {
				at := ladder.NormTime(txNow)
				if c == nil || c.From != ladder.LaneShadow || c.To != ladder.LanePropose || !c.At.Equal(at) || c.At.Location() != time.UTC || c.Step != "s" || c.ID == "" {
					t.Fatalf("change %+v: want shadow → propose at now, UTC, of the step, with an id", c)
				}
				if st.LaneSince != at || st.AuditRateSince != at || st.LaneEpoch != 1 || st.Version != 4 {
					t.Errorf("state %+v: want times normalised (%v), lane epoch 1, version 4", st, at)
				}
				if diff := cmp.Diff(st, f.states[stepKey]); diff != "" {
					t.Errorf("stored state (-returned +stored):\n%s", diff)
				}
				if len(f.changes) != 1 || !slices.Equal(f.notified, []ladder.StepKey{stepKey}) || len(f.audit) != 2 || f.audit[1].Kind != "lane" {
					t.Errorf("changes %v, notified %v, audit %v: want one change, the step told, review then lane audit", f.changes, f.notified, f.audit)
				}
			},
		},
		{
			name: "the key is the step's whatever the decider returns",
			write: func() ladder.ReviewWrite {
				w := review(ladder.VerdictAgree, false)
				w.Decide = func(st ladder.StepState, _ []ladder.WeekAgg) (ladder.StepState, *ladder.LaneChange, []ladder.AuditEntry, error) {
					st.Workspace, st.Step, st.Version = "x", "y", 99
					return st, nil, nil, nil
				}
				return w
			}(),
			check: func(t *testing.T, f *fakeTx, st ladder.StepState, _ *ladder.LaneChange) {
				if st.Workspace != "ws" || st.Step != "s" || st.Version != 4 {
					t.Errorf("state %+v: want the step's key and version 4", st)
				}
			},
		},
		{
			name: "the decider sees the review counted",
			write: func() ladder.ReviewWrite {
				w := review(ladder.VerdictDisagree, false)
				w.Decide = func(st ladder.StepState, weeks []ladder.WeekAgg) (ladder.StepState, *ladder.LaneChange, []ladder.AuditEntry, error) {
					if len(weeks) != 1 || weeks[0].N != 1 {
						return st, nil, nil, errors.New("review not counted")
					}
					return st, nil, nil, nil
				}
				return w
			}(),
		},
		{
			name: "a decider's error fails the write",
			write: func() ladder.ReviewWrite {
				w := review(ladder.VerdictAgree, false)
				w.Decide = func(ladder.StepState, []ladder.WeekAgg) (ladder.StepState, *ladder.LaneChange, []ladder.AuditEntry, error) {
					return ladder.StepState{}, nil, nil, errFake
				}
				return w
			}(),
			wantErr: errFake,
		},
		{
			name:    "a failing statement fails the write",
			setup:   func(f *fakeTx) { f.failOn = "InsertReview" },
			write:   review(ladder.VerdictAgree, false),
			wantErr: errFake,
		},
		{
			name:    "no step state",
			setup:   func(f *fakeTx) { delete(f.states, stepKey) },
			write:   review(ladder.VerdictAgree, false),
			wantErr: ladder.ErrNotFound,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := seeded()
			if tt.setup != nil {
				tt.setup(f)
			}
			st, c, err := ladder.RecordReviewTx(f, tt.write, txNow)
			if !errors.Is(err, tt.wantErr) || (err != nil) != (tt.wantErr != nil) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if tt.check != nil {
				tt.check(t, f, st, c)
			}
		})
	}
}

func TestSetLaneTx(t *testing.T) {
	at := ladder.NormTime(txNow)
	tests := []struct {
		name       string
		write      ladder.LaneWrite
		wantErr    error
		anyErr     bool // an error without a sentinel to match
		wantState  func(ladder.StepState) ladder.StepState
		wantChange *ladder.LaneChange
	}{
		{
			name:    "a stale version is a conflict",
			write:   ladder.LaneWrite{Key: stepKey, IfVersion: 2},
			wantErr: ladder.ErrConflict,
		},
		{
			name:   "an invalid lane is refused",
			write:  ladder.LaneWrite{Key: stepKey, Change: ladder.LaneChange{To: "sideways"}},
			anyErr: true,
		},
		{
			name:      "no move, no pin change: no lane change, the version moves",
			write:     ladder.LaneWrite{Key: stepKey, IfVersion: 3, Reason: "why"},
			wantState: func(s ladder.StepState) ladder.StepState { s.Version, s.PinReason = 4, "why"; return s },
		},
		{
			name:  "a pin in the same lane is a lane change",
			write: ladder.LaneWrite{Key: stepKey, Pinned: true, Reason: "hold", Change: ladder.LaneChange{Actor: "p", Rule: "pin"}},
			wantState: func(s ladder.StepState) ladder.StepState {
				s.Version, s.Pinned, s.PinReason, s.LaneEpoch = 4, true, "hold", 1
				return s
			},
			wantChange: &ladder.LaneChange{Workspace: "ws", Queue: "q", Step: "s", At: at, From: ladder.LaneShadow, To: ladder.LaneShadow, Rule: "pin", Actor: "p"},
		},
		{
			name:  "a move down starts a promotion epoch",
			write: ladder.LaneWrite{Key: stepKey, Pinned: true, Change: ladder.LaneChange{To: ladder.LaneHumanOnly, Actor: "p"}},
			wantState: func(s ladder.StepState) ladder.StepState {
				s.Version, s.Pinned, s.Lane, s.LaneSince, s.Epoch, s.LaneEpoch = 4, true, ladder.LaneHumanOnly, at, 1, 1
				return s
			},
			wantChange: &ladder.LaneChange{Workspace: "ws", Queue: "q", Step: "s", At: at, From: ladder.LaneShadow, To: ladder.LaneHumanOnly, Actor: "p"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := seeded()
			before := f.states[stepKey]
			st, err := ladder.SetLaneTx(f, tt.write, txNow)
			wantErr := tt.wantErr != nil || tt.anyErr
			if (err != nil) != wantErr || (tt.wantErr != nil && !errors.Is(err, tt.wantErr)) {
				t.Fatalf("err = %v, want %v (any: %v)", err, tt.wantErr, tt.anyErr)
			}
			if wantErr {
				if len(f.changes)+len(f.audit)+len(f.notified) != 0 || f.states[stepKey] != before {
					t.Errorf("a refused write wrote: changes %v, audit %v, notified %v", f.changes, f.audit, f.notified)
				}
				return
			}
			if diff := cmp.Diff(tt.wantState(before), st); diff != "" {
				t.Errorf("state (-want +got):\n%s", diff)
			}
			if f.states[stepKey] != st || !slices.Equal(f.notified, []ladder.StepKey{stepKey}) {
				t.Errorf("stored %+v, notified %v: want the returned state stored and the step told", f.states[stepKey], f.notified)
			}
			var got *ladder.LaneChange
			if len(f.changes) == 1 {
				got = &f.changes[0]
				got.ID = "" // random
			}
			if diff := cmp.Diff(tt.wantChange, got); diff != "" || len(f.changes) > 1 {
				t.Errorf("lane change (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWeekDeltas(t *testing.T) {
	op := true
	rv := ladder.Review{Workspace: "ws", Queue: "q", Step: "s", Kind: ladder.ReviewAudit, Verdict: ladder.VerdictDisagree, Severity: 1, OperatorError: &op}
	start := time.Date(2026, 8, 31, 0, 0, 0, 0, time.UTC)
	add := ladder.CountDelta(rv, "2026-W36", start, 2)
	want := ladder.WeekDelta{Key: stepKey, Week: "2026-W36", WeekStart: start, Epoch: 2,
		Counts: ladder.WeekAgg{N: 1, AuditN: 1, Sev1: 1, OpN: 1, OpErrors: 1}, Create: true}
	if diff := cmp.Diff(want, add); diff != "" {
		t.Errorf("CountDelta (-want +got):\n%s", diff)
	}
	sub := ladder.UncountDelta(ladder.CountedReview{Review: rv, Week: "2026-W35", Epoch: 1})
	want = ladder.WeekDelta{Key: stepKey, Week: "2026-W35", Epoch: 1,
		Counts: ladder.WeekAgg{N: -1, AuditN: -1, Sev1: -1, OpN: -1, OpErrors: -1}}
	if diff := cmp.Diff(want, sub); diff != "" {
		t.Errorf("UncountDelta (-want +got):\n%s", diff)
	}
}

func TestStepStateNormalizedAndMoved(t *testing.T) {
	raw := ladder.StepState{LaneSince: txNow, LastSev1At: txNow, LastAuditFailAt: txNow, AuditRateSince: txNow}
	n := raw.Normalized()
	for _, got := range []time.Time{n.LaneSince, n.LastSev1At, n.LastAuditFailAt, n.AuditRateSince} {
		if got != ladder.NormTime(txNow) {
			t.Errorf("normalised time %v, want %v", got, ladder.NormTime(txNow))
		}
	}
	base := ladder.StepState{Lane: ladder.LaneShadow, AuditRate: 0.1}
	tests := []struct {
		name string
		next func(ladder.StepState) ladder.StepState
		want bool
	}{
		{"figures only", func(s ladder.StepState) ladder.StepState { s.Version++; return s }, false},
		{"lane", func(s ladder.StepState) ladder.StepState { s.Lane = ladder.LanePropose; return s }, true},
		{"pin", func(s ladder.StepState) ladder.StepState { s.Pinned = true; return s }, true},
		{"epoch", func(s ladder.StepState) ladder.StepState { s.Epoch++; return s }, true},
		{"audit rate", func(s ladder.StepState) ladder.StepState { s.AuditRate = 0.2; return s }, true},
	}
	for _, tt := range tests {
		if got := tt.next(base).Moved(base); got != tt.want {
			t.Errorf("%s: Moved = %v, want %v", tt.name, got, tt.want)
		}
	}
}

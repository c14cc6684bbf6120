package ladder_test

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ladderhq/ladder"
)

func TestStepStateInitial(t *testing.T) {
	for _, tt := range []struct{ in, want int64 }{{0, 1}, {1, 1}, {5, 5}} {
		if got := (ladder.StepState{Version: tt.in}).Initial().Version; got != tt.want {
			t.Errorf("Initial of version %d = %d, want %d", tt.in, got, tt.want)
		}
	}
}

func TestRouteResolved(t *testing.T) {
	at := time.Date(2026, 9, 1, 8, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		in   ladder.Route
		want ladder.Route
	}{
		{"given id and time are kept", ladder.Route{ID: "rt1", At: at, Features: json.RawMessage(`{}`)}, ladder.Route{ID: "rt1", At: at, Features: json.RawMessage(`{}`)}},
		{"zero time is now, normalised; empty features none", ladder.Route{ID: "rt1", Features: json.RawMessage{}}, ladder.Route{ID: "rt1", At: ladder.NormTime(txNow)}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, tt.in.Resolved(txNow)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
	if got := (ladder.Route{}).Resolved(txNow); got.ID == "" {
		t.Error("a route without an id gets none")
	}
}

func TestGateDecisionResolved(t *testing.T) {
	if _, err := (ladder.GateDecisionRecord{}).Resolved(txNow); err == nil {
		t.Error("a decision without an id: no error")
	}
	got, err := ladder.GateDecisionRecord{ID: "gd1", Evidence: json.RawMessage{}}.Resolved(txNow)
	if err != nil || got.At != ladder.NormTime(txNow) || got.Evidence != nil {
		t.Errorf("Resolved = %+v, %v; want now, normalised, and no evidence", got, err)
	}
}

func TestOutcomeCountsAdd(t *testing.T) {
	var oc ladder.OutcomeCounts
	oc.Add(ladder.HandledByAgent, 10, 1)
	oc.Add(ladder.HandledByPerson, 20, 3)
	oc.Add("robot", 99, 99)
	if want := (ladder.OutcomeCounts{AgentN: 10, AgentFailures: 1, PersonN: 20, PersonFailures: 3}); oc != want {
		t.Errorf("counts %+v, want %+v", oc, want)
	}
}

func TestWalkPages(t *testing.T) {
	var all []ladder.AuditRecord
	for seq := int64(1); seq <= 7; seq++ {
		all = append(all, ladder.AuditRecord{Seq: seq})
	}
	read := func(reads *int) func(int64, int) ([]ladder.AuditRecord, error) {
		return func(after int64, limit int) ([]ladder.AuditRecord, error) {
			*reads++
			var out []ladder.AuditRecord
			for _, r := range all {
				if r.Seq > after && len(out) < limit {
					out = append(out, r)
				}
			}
			return out, nil
		}
	}
	stop := errors.New("stop")
	tests := []struct {
		name      string
		after     int64
		page      int
		stopAt    int64
		want      []int64
		wantReads int
		wantErr   error
	}{
		{name: "pages until a short one", page: 3, want: []int64{1, 2, 3, 4, 5, 6, 7}, wantReads: 3},
		{name: "a full last page costs one more read", page: 7, want: []int64{1, 2, 3, 4, 5, 6, 7}, wantReads: 2},
		{name: "from a seq", after: 5, page: 3, want: []int64{6, 7}, wantReads: 1},
		{name: "fn's error stops the walk", page: 2, stopAt: 3, want: []int64{1, 2, 3}, wantReads: 2, wantErr: stop},
	}
	for _, tt := range tests {
		var (
			got   []int64
			reads int
		)
		err := ladder.WalkPages(tt.after, tt.page, read(&reads), func(r ladder.AuditRecord) error {
			got = append(got, r.Seq)
			if r.Seq == tt.stopAt {
				return stop
			}
			return nil
		})
		if err != tt.wantErr || !slices.Equal(got, tt.want) || reads != tt.wantReads {
			t.Errorf("%s: walked %v in %d reads, err %v; want %v in %d, err %v", tt.name, got, reads, err, tt.want, tt.wantReads, tt.wantErr)
		}
	}
	failing := func(int64, int) ([]ladder.AuditRecord, error) { return nil, errFake }
	if err := ladder.WalkPages(0, 3, failing, func(ladder.AuditRecord) error { return nil }); !errors.Is(err, errFake) {
		t.Errorf("a failing read: err %v, want it", err)
	}
}

func TestPageLimit(t *testing.T) {
	for _, tt := range []struct{ in, want int }{{-1, 50}, {0, 50}, {1, 1}, {200, 200}} {
		if got := ladder.PageLimit(tt.in); got != tt.want {
			t.Errorf("PageLimit(%d) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

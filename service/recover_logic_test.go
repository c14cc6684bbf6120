package service

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ladderhq/ladder"
)

// TestRecoverCalls: a call a dead process began (running, no result) is
// left alone within its executor's timeout plus the margin and marked
// unknown after; a repeat of its idempotency key then answers
// OUTCOME_UNKNOWN and runs nothing.
func TestRecoverCalls(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 9, 1, 9, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	run := &fakeRunner{}
	s := newDemoServiceClock(t, clock, withRunner(run))
	ctx := context.Background()

	started := ladder.NormTime(clock())
	call := ladder.Call{ID: ladder.NewID("cl"), Workspace: demoWS, Capability: "tms:postBill", KeyID: demoAgent.KeyID, IdempotencyKey: "post-B-9",
		Status: ladder.CallRunning, Payload: json.RawMessage(`{"amount_usd":10,"bill_id":"B-9"}`), StartedAt: started}
	entry, err := ladder.NewAuditEntry(demoWS, demoAgent.KeyID, ladder.AuditCall, call.ID, started, map[string]any{"capability": call.Capability})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.store.BeginCall(ctx, call, entry); err != nil {
		t.Fatal(err)
	}
	repeat := func() error {
		t.Helper()
		_, err := s.CallCapability(ctx, demoAgent, "tms:postBill", json.RawMessage(`{"bill_id":"B-9","amount_usd":10,"idempotency_key":"post-B-9"}`))
		return err
	}
	if diff := cmp.Diff(refusal{Code: ladder.CodeConflict}, refusalOf(t, repeat())); diff != "" {
		t.Errorf("repeat while the call runs (-want +got):\n%s", diff)
	}

	for _, tt := range []struct {
		after time.Duration
		want  ladder.CallRecovery
	}{
		{time.Minute, ladder.CallRecovery{}},                     // within 5s + 2m
		{2 * time.Minute, ladder.CallRecovery{MarkedUnknown: 1}}, // 3m after it began
		{time.Minute, ladder.CallRecovery{}},                     // marked once only
	} {
		advance(tt.after)
		got, err := s.RecoverCalls(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("RecoverCalls at %s (-want +got):\n%s", clock().Sub(started), diff)
		}
	}
	if diff := cmp.Diff(refusal{Code: ladder.CodeOutcomeUnknown}, refusalOf(t, repeat())); diff != "" {
		t.Errorf("repeat after the call was marked unknown (-want +got):\n%s", diff)
	}
	if n := run.ran(); n != 0 {
		t.Errorf("ran %d calls, want none", n)
	}
}

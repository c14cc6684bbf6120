package storetest

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ladderhq/ladder"
)

// callTests exercise the call outcome's compare-and-set and the sweep's
// read of calls left running.
var callTests = []struct {
	name string
	fn   func(t *testing.T, s ladder.Store)
}{
	{"CallOutcomeCompareAndSet", testCallCompareAndSet},
	{"StaleCallsByStoreClock", testStaleCalls},
}

func beginCall(t *testing.T, s ladder.Store, id, key string) ladder.Call {
	t.Helper()
	c := ladder.Call{ID: id, Workspace: wsA, Capability: "tms:postBill", KeyID: "k_agent", IdempotencyKey: key, Status: ladder.CallRunning,
		Payload: json.RawMessage(`{"bill":"` + id + `"}`), StartedAt: t0}
	got, created := must2(s.BeginCall(t.Context(), c, entry(t, wsA, ladder.AuditCall, id, t0, nil)))
	if !created {
		t.Fatalf("BeginCall %s: not created", id)
	}
	return got
}

func withStatus(c ladder.Call, st ladder.CallStatus) ladder.Call {
	c.Status = st
	if st == ladder.CallOK {
		c.Result = json.RawMessage(`{"posted":"` + c.ID + `"}`)
	}
	return c
}

func result(t *testing.T, c ladder.Call) ladder.AuditEntry {
	return entry(t, wsA, ladder.AuditCallResult, c.ID, t0, map[string]any{"status": c.Status})
}

// testCallCompareAndSet: a call's outcome is a compare-and-set on its
// status. An unknown mark is stored only over running, so a result stored
// first wins and a second mark loses; a result is stored over unknown only
// when asked to replace it; FinishCall never overwrites an unknown mark;
// of a result and a mark racing on one call exactly one commits; a call id
// stored once can never begin again, under no key or another.
func testCallCompareAndSet(t *testing.T, s ladder.Store) {
	ctx := t.Context()
	a := beginCall(t, s, "cl_a", "key-a")
	must(s.UpdateCall(ctx, withStatus(a, ladder.CallUnknown), ladder.CallRunning, result(t, withStatus(a, ladder.CallUnknown))))
	_, err := s.UpdateCall(ctx, withStatus(a, ladder.CallUnknown), ladder.CallRunning, result(t, a))
	wantErr(t, "a second unknown mark", err, ladder.ErrConflict)
	_, err = s.FinishCall(ctx, withStatus(a, ladder.CallOK), result(t, a))
	wantErr(t, "FinishCall over an unknown mark", err, ladder.ErrConflict)
	if got := must(s.GetCall(ctx, wsA, a.ID)); got.Status != ladder.CallUnknown {
		t.Fatalf("after the mark the call is %s", got.Status)
	}
	// The truth replaces the mark, when asked to.
	must(s.UpdateCall(ctx, withStatus(a, ladder.CallOK), ladder.CallUnknown, result(t, withStatus(a, ladder.CallOK))))
	if got := must(s.CallByKey(ctx, wsA, a.Capability, "key-a")); got.Status != ladder.CallOK || string(got.Result) != `{"posted":"cl_a"}` {
		t.Fatalf("after the result replaced the mark: %s %s", got.Status, got.Result)
	}
	_, err = s.UpdateCall(ctx, withStatus(a, ladder.CallUnknown), ladder.CallRunning, result(t, a))
	wantErr(t, "a mark over a result", err, ladder.ErrConflict)

	// A result stored first wins over a late mark.
	b := beginCall(t, s, "cl_b", "key-b")
	must(s.FinishCall(ctx, withStatus(b, ladder.CallFailed), result(t, withStatus(b, ladder.CallFailed))))
	_, err = s.UpdateCall(ctx, withStatus(b, ladder.CallUnknown), ladder.CallRunning, result(t, b))
	wantErr(t, "a late unknown mark", err, ladder.ErrConflict)
	if got := must(s.GetCall(ctx, wsA, b.ID)); got.Status != ladder.CallFailed {
		t.Errorf("a late mark changed a failed call to %s", got.Status)
	}
	// Unknown ids, and another workspace's call, are not found.
	_, err = s.UpdateCall(ctx, withStatus(ladder.Call{ID: "cl_missing", Workspace: wsA}, ladder.CallUnknown), ladder.CallRunning, result(t, a))
	wantErr(t, "UpdateCall of an unknown id", err, ladder.ErrNotFound)
	other := withStatus(b, ladder.CallUnknown)
	other.Workspace = wsB
	_, err = s.UpdateCall(ctx, other, ladder.CallFailed, result(t, b))
	wantErr(t, "UpdateCall of another workspace's call", err, ladder.ErrNotFound)

	// A result and a mark racing: exactly one commits, on every round.
	const rounds = 8
	var results int
	for i := range rounds {
		c := beginCall(t, s, fmt.Sprintf("cl_race_%d", i), "")
		var wg sync.WaitGroup
		var finErr, markErr error
		fin, mark := withStatus(c, ladder.CallOK), withStatus(c, ladder.CallUnknown)
		finAudit, markAudit := result(t, fin), result(t, mark) // on the test goroutine: entry may stop the test
		wg.Go(func() { _, finErr = s.FinishCall(ctx, fin, finAudit) })
		wg.Go(func() { _, markErr = s.UpdateCall(ctx, mark, ladder.CallRunning, markAudit) })
		wg.Wait()
		got := must(s.GetCall(ctx, wsA, c.ID))
		switch {
		case finErr == nil && markErr != nil:
			wantErr(t, "the losing mark", markErr, ladder.ErrConflict)
			if got.Status != ladder.CallOK {
				t.Errorf("round %d: the result won, the call is %s", i, got.Status)
			}
		case markErr == nil && finErr != nil:
			wantErr(t, "the losing result", finErr, ladder.ErrConflict)
			if got.Status != ladder.CallUnknown {
				t.Errorf("round %d: the mark won, the call is %s", i, got.Status)
			}
		default:
			t.Errorf("round %d: result err %v, mark err %v; want exactly one to commit", i, finErr, markErr)
		}
		results++
	}

	// A call id stored once never begins again.
	for _, key := range []string{"", "key-new"} {
		again := ladder.Call{ID: b.ID, Workspace: wsA, Capability: b.Capability, IdempotencyKey: key, Status: ladder.CallRunning, StartedAt: t0}
		got, created, err := s.BeginCall(ctx, again, entry(t, wsA, ladder.AuditCall, b.ID, t0, nil))
		if err == nil || created {
			t.Errorf("BeginCall of a stored id under key %q: created %v, err %v (got %s)", key, created, err, got.ID)
		}
	}
	if got := must(s.GetCall(ctx, wsA, b.ID)); got.Status != ladder.CallFailed {
		t.Errorf("a second BeginCall of its id changed the call to %s", got.Status)
	}
	// Calls a, b and the racers began once each; a's mark and result, b's
	// result and one outcome per race were stored.
	wantAuditKinds(t, s, map[string]int{ladder.AuditCall: 2 + rounds, ladder.AuditCallResult: 2 + 1 + results})
}

// testStaleCalls: StaleCalls returns only running calls, oldest first,
// paged by seq, each with how long it has run by the store's clock; a
// minimum age beyond that leaves it out, and a call with an outcome is
// never stale.
func testStaleCalls(t *testing.T, s ladder.Store) {
	ctx := t.Context()
	var ids []string
	for i := range 4 {
		ids = append(ids, beginCall(t, s, fmt.Sprintf("cl_s%d", i), fmt.Sprintf("key-s%d", i)).ID)
	}
	done := must(s.GetCall(ctx, wsA, ids[1]))
	must(s.FinishCall(ctx, withStatus(done, ladder.CallOK), result(t, done)))
	marked := must(s.GetCall(ctx, wsA, ids[2]))
	must(s.UpdateCall(ctx, withStatus(marked, ladder.CallUnknown), ladder.CallRunning, result(t, marked)))
	time.Sleep(300 * time.Millisecond)

	got := must(s.StaleCalls(ctx, 200*time.Millisecond, 0, 10))
	if len(got) != 2 || got[0].ID != ids[0] || got[1].ID != ids[3] {
		t.Fatalf("StaleCalls = %v, want [%s %s]", callIDs(got), ids[0], ids[3])
	}
	for _, c := range got {
		if c.RunningFor < 200*time.Millisecond || c.RunningFor > time.Minute {
			t.Errorf("%s running for %v by the store's clock, want about 300ms", c.ID, c.RunningFor)
		}
		if c.Seq == 0 || c.Status != ladder.CallRunning || string(c.Payload) == "" {
			t.Errorf("StaleCalls returned %+v", c)
		}
	}
	if got[0].Seq >= got[1].Seq {
		t.Errorf("StaleCalls not oldest first: seqs %d, %d", got[0].Seq, got[1].Seq)
	}
	if page := must(s.StaleCalls(ctx, 0, got[0].Seq, 10)); len(page) != 1 || page[0].ID != ids[3] {
		t.Errorf("StaleCalls after seq %d = %v", got[0].Seq, callIDs(page))
	}
	if page := must(s.StaleCalls(ctx, 0, 0, 1)); len(page) != 1 || page[0].ID != ids[0] {
		t.Errorf("StaleCalls limit 1 = %v", callIDs(page))
	}
	if young := must(s.StaleCalls(ctx, time.Hour, 0, 10)); len(young) != 0 {
		t.Errorf("StaleCalls(1h) = %v, want none", callIDs(young))
	}
}

func callIDs(cs []ladder.Call) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.ID
	}
	return out
}

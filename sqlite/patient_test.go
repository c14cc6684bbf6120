package sqlite

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/ladderhq/ladder"
)

// TestOnlyCallWritesWaitForRunningCalls holds the store to which of its
// writes are a call's (Store.writeCall, groupcommit's DoPatient): a call's
// begin, with or without its route, and its result wait with the other
// calls' writes while calls run; a route, a readiness probe's write and an
// audit record alone never do, and each takes the waiting call's write
// with it. The writer here is the store's own, with the calls' wait made
// an hour long and a million calls running, so a write that waits is still
// waiting when the test looks, and one that should not wait but did fails
// the test after a minute.
// groupcommit's TestOnlyPatientOpsWaitTheExpectedLinger holds the rule
// itself; this holds the store's choice of it.
func TestOnlyCallWritesWaitForRunningCalls(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "ladder.db"), Options{Linger: 5 * time.Millisecond, expectLinger: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Calls running, as many as the writer counts (Expect): far more than
	// any batch here holds.
	s.running.Store(1 << 20)

	entry := func(kind, subject string) ladder.AuditEntry {
		e, err := ladder.NewAuditEntry("ws-a", "k_agent", kind, subject, t0, nil)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	route := func(id string) ladder.Route {
		return ladder.Route{ID: id, Workspace: "ws-a", Queue: "bills", Step: "post_tms", Item: "item-" + id,
			Decision: ladder.DecisionActAlone, Lane: ladder.LaneAuto, KeyID: "k_agent", At: t0}
	}
	call := func(id string) ladder.Call {
		return ladder.Call{ID: id, Workspace: "ws-a", Capability: "tms:postBill", KeyID: "k_agent", IdempotencyKey: "key-" + id,
			Status: ladder.CallRunning, StartedAt: t0}
	}
	recordRoute := func(id string) func() error {
		return func() error {
			_, _, err := s.RecordRoute(ctx, route(id), entry(ladder.AuditRoute, id))
			return err
		}
	}
	start := func(write func() error) <-chan error {
		done := make(chan error, 1)
		go func() { done <- write() }()
		return done
	}
	// waits: a call's write is still waiting for the other calls' writes
	// well past Linger.
	waits := func(name string, done <-chan error) {
		t.Helper()
		select {
		case err := <-done:
			t.Fatalf("%s committed alone (err %v) while calls run: a call's write waits with the others' (Store.writeCall)", name, err)
		case <-time.After(300 * time.Millisecond):
		}
	}
	// commits: a write is durable; the minute stands in for the hour a
	// write that waited wrongly would take.
	commits := func(name string, done <-chan error) {
		t.Helper()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		case <-time.After(time.Minute):
			t.Fatalf("%s still waiting after a minute: only a call's write may wait for the running calls (Store.write, not writeCall)", name)
		}
	}

	// A load's writer: the last batch held more than one write (a lone
	// caller never waits). The writer is held by an op of the test's own
	// while two probes queue, which then share a batch.
	started, release := make(chan struct{}), make(chan struct{})
	held := start(func() error {
		return s.batch.Do(ctx, func(*wtx) error {
			close(started)
			<-release
			return nil
		})
	})
	<-started
	probes := []<-chan error{start(func() error { return s.Ping(ctx) }), start(func() error { return s.Ping(ctx) })}
	for deadline := time.Now().Add(time.Minute); s.batch.Queued() < 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d writes queued after a minute, want 2", s.batch.Queued())
		}
	}
	close(release)
	commits("the held op", held)
	for _, p := range probes {
		commits("a probe", p)
	}

	routeCall := start(func() error {
		_, err := s.RouteAndBeginCall(ctx, route("rt_1"), entry(ladder.AuditRoute, "rt_1"), call("cl_1"), entry(ladder.AuditCall, "cl_1"))
		return err
	})
	waits("RouteAndBeginCall", routeCall)
	commits("RecordRoute", start(recordRoute("rt_2")))
	commits("RouteAndBeginCall, after a route joined it", routeCall)

	begin := start(func() error {
		_, _, err := s.BeginCall(ctx, call("cl_2"), entry(ladder.AuditCall, "cl_2"))
		return err
	})
	waits("BeginCall", begin)
	commits("Ping", start(func() error { return s.Ping(ctx) }))
	commits("BeginCall, after the probe's write joined it", begin)

	done := call("cl_2")
	done.Status = ladder.CallOK
	finish := start(func() error {
		_, err := s.FinishCall(ctx, done, entry(ladder.AuditCallResult, "cl_2"))
		return err
	})
	waits("FinishCall", finish)
	commits("AppendAudit", start(func() error {
		_, err := s.AppendAudit(ctx, entry(ladder.AuditApproval, "ap_1"))
		return err
	}))
	commits("FinishCall, after an audit record joined it", finish)

	unknown := call("cl_1")
	unknown.Status = ladder.CallUnknown
	update := start(func() error {
		_, err := s.UpdateCall(context.Background(), unknown, ladder.CallRunning, entry(ladder.AuditCallResult, "cl_1"))
		return err
	})
	waits("UpdateCall", update)
	commits("RecordRoute", start(recordRoute("rt_3")))
	commits("UpdateCall, after a route joined it", update)

	if _, err := ladder.VerifyAudit(ctx, s); err != nil {
		t.Fatalf("VerifyAudit: %v", err)
	}
}

package http_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/internal/faultstore"
	"github.com/ladderhq/ladder/internal/testenv"
	"github.com/ladderhq/ladder/upstream"
)

// resultEnv is the capability test config on a SQLite file a fresh
// service can reopen, over a store that fails on command, with a call
// margin of one second.
func resultEnv(t *testing.T, dbPath string) (*testenv.Env, *faultstore.Store) {
	t.Helper()
	idle := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(idle.Close)
	var fs *faultstore.Store
	e := testenv.StartWith(t, capConfig(idle.URL, idle.URL), testenv.Options{DBPath: dbPath, CallMargin: time.Second,
		WrapStore: func(s ladder.Store) ladder.Store { fs = faultstore.New(s); return fs }})
	return e, fs
}

// stopEnv ends an Env before the test does, as a process that exits: the
// server, then the service (its last try to store held results), then the
// store.
func stopEnv(e *testenv.Env) {
	e.Server.Close()
	e.Svc.Close()
	e.Store.Close()
}

// auditData returns the data of every audit record of kind about subject.
func auditData(t *testing.T, e *testenv.Env, kind, subject string) []map[string]any {
	t.Helper()
	var out []map[string]any
	if err := e.Store.WalkAudit(t.Context(), 0, func(r ladder.AuditRecord) error {
		if r.Kind == kind && r.Subject == subject {
			var d map[string]any
			if err := json.Unmarshal(r.Data, &d); err != nil {
				return err
			}
			d["actor"] = r.Actor
			out = append(out, d)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCallResultWriteFails: the upstream ran, then storing the call's
// result failed (the connection dropped before the COMMIT, after it, or
// the store stayed down past the caller's wait). The agent's answer is
// still executed with the result; a replay of its idempotency key returns
// that result, never CONFLICT "still running", and runs nothing again;
// the result is stored once the store takes it, with one result record in
// the audit log; and a fresh service on the same database replays it.
func TestCallResultWriteFails(t *testing.T) {
	for _, tt := range []struct {
		name   string
		inject func(*faultstore.Store)
		held   bool // the store still refuses after the caller's answer
	}{
		{"fails once before the commit", func(fs *faultstore.Store) { fs.FailNext("FinishCall", 1, faultstore.ErrDown) }, false},
		{"fails once after the commit", func(fs *faultstore.Store) { fs.FailNextAfterCommit("FinishCall", 1, faultstore.ErrDown) }, false},
		{"fails twice", func(fs *faultstore.Store) { fs.FailNext("FinishCall", 2, faultstore.ErrDown) }, false},
		{"stays down", func(fs *faultstore.Store) { fs.FailNext("FinishCall", -1, faultstore.ErrDown) }, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "ladder.db")
			e, fs := resultEnv(t, db)
			agent := e.Keys["acme/agent"]
			body := map[string]any{"payload": map[string]any{"bill_id": "B-1"}, "idempotency_key": "post-B-1"}
			before := e.Upstream.Calls()
			tt.inject(fs)

			r := e.Do("POST", "/v1/capabilities/acme:post/call", agent, body)
			if r.Status != 200 || r.Body["status"] != "executed" || r.Body["result"] == nil {
				t.Fatalf("the call that ran: %d %s", r.Status, r.Raw)
			}
			callID := r.Body["call_id"].(string)
			result, _ := json.Marshal(r.Body["result"])
			if n := e.Svc.ResultsWaiting(); (n == 1) != tt.held {
				t.Fatalf("%d results waiting in memory, want held=%v", n, tt.held)
			}
			// A replay answers with the result, whether it is stored yet or
			// held by this process, over REST and MCP.
			for i := range 2 {
				again := e.Do("POST", "/v1/capabilities/acme:post/call", agent, body)
				got, _ := json.Marshal(again.Body["result"])
				if again.Status != 200 || again.Body["status"] != "executed" || again.Body["replayed"] != true || string(got) != string(result) || again.Body["call_id"] != callID {
					t.Fatalf("replay %d: %d %s", i, again.Status, again.Raw)
				}
			}
			m := e.Do("POST", "/mcp", agent, rpcBody(7, "tools/call", map[string]any{"name": "acme:post", "arguments": body}))
			if rpcErr(m) != nil || !strings.Contains(string(m.Raw), callID) || strings.Contains(string(m.Raw), "still running") {
				t.Fatalf("mcp replay: %s", m.Raw)
			}
			if n := e.Upstream.Calls() - before; n != 1 {
				t.Fatalf("the upstream ran %d times, want once", n)
			}

			fs.ClearNext() // the store recovers
			eventually(t, 20*time.Second, func() string {
				if n := e.Svc.ResultsWaiting(); n > 0 {
					return fmt.Sprintf("%d results still waiting after the store recovered", n)
				}
				return ""
			})
			got, err := e.Store.GetCall(t.Context(), "acme", callID)
			if err != nil || got.Status != ladder.CallOK || string(got.Result) != string(result) {
				t.Fatalf("stored call: %+v %v", got, err)
			}
			if recs := auditData(t, e, ladder.AuditCallResult, callID); len(recs) != 1 || recs[0]["status"] != "ok" {
				t.Fatalf("result audit records: %v, want one", recs)
			}
			if _, err := ladder.VerifyAudit(t.Context(), e.Store); err != nil {
				t.Fatalf("audit chain: %v", err)
			}

			// A new process on the same database answers the replay from
			// the store.
			stopEnv(e)
			g, _ := resultEnv(t, db)
			again := g.Do("POST", "/v1/capabilities/acme:post/call", g.Keys["acme/agent"], body)
			if b, _ := json.Marshal(again.Body["result"]); again.Status != 200 || again.Body["replayed"] != true || string(b) != string(result) {
				t.Fatalf("replay on a fresh service: %d %s", again.Status, again.Raw)
			}
			if g.Upstream.Calls() != 0 {
				t.Fatalf("the fresh service ran the call again")
			}
		})
	}
}

// deadCall records a call as begun by a process that then died: running,
// with its audit record, and no result ever.
func deadCall(t *testing.T, e *testenv.Env, c ladder.Call) ladder.Call {
	t.Helper()
	c.Status, c.StartedAt = ladder.CallRunning, e.Clock.Now()
	a, err := ladder.NewAuditEntry(c.Workspace, "k_dead", ladder.AuditCall, c.ID, e.Clock.Now(), map[string]any{"capability": c.Capability})
	if err != nil {
		t.Fatal(err)
	}
	got, created, err := e.Store.BeginCall(t.Context(), c, a)
	if err != nil || !created {
		t.Fatalf("BeginCall: %v (created %v)", err, created)
	}
	return got
}

// TestCallLeftRunningMarkedUnknown: a call left running by a process that
// died between BeginCall and FinishCall answers CONFLICT "still running"
// until it has run longer than its executor's timeout (10 s) plus the
// margin (1 s); then the sweep marks it unknown, with an audit record, and
// a replay of its key answers OUTCOME_UNKNOWN over REST (409) and MCP
// (-32000), saying it may or may not have run, that ladder will not run it
// again, and which call to look for upstream. Nothing runs, and a sweep
// again changes nothing.
func TestCallLeftRunningMarkedUnknown(t *testing.T) {
	e, _ := resultEnv(t, "")
	agent := e.Keys["acme/agent"]
	body := map[string]any{"payload": map[string]any{"bill_id": "B-dead"}, "idempotency_key": "post-B-dead"}
	dead := deadCall(t, e, ladder.Call{ID: "cl_dead", Workspace: "acme", Capability: "acme:post", KeyID: "k_dead", IdempotencyKey: "post-B-dead",
		Payload: json.RawMessage(`{"bill_id":"B-dead"}`)})
	before := e.Upstream.Calls()

	if r := e.Do("POST", "/v1/capabilities/acme:post/call", agent, body); r.Status != 409 || r.ErrorCode() != "CONFLICT" {
		t.Fatalf("replay while it may still run: %d %s", r.Status, r.Raw)
	}
	e.Clock.Advance(10 * time.Second) // its timeout, not yet the margin
	if r, err := e.Svc.RecoverCalls(t.Context()); err != nil || r.MarkedUnknown != 0 {
		t.Fatalf("sweep within timeout plus margin: %+v %v", r, err)
	}
	e.Clock.Advance(1500 * time.Millisecond)
	if r, err := e.Svc.RecoverCalls(t.Context()); err != nil || r.MarkedUnknown != 1 {
		t.Fatalf("sweep past timeout plus margin: %+v %v", r, err)
	}
	got, err := e.Store.GetCall(t.Context(), "acme", dead.ID)
	if err != nil || got.Status != ladder.CallUnknown {
		t.Fatalf("the dead call is %s (%v), want unknown", got.Status, err)
	}
	recs := auditData(t, e, ladder.AuditCallResult, dead.ID)
	if len(recs) != 1 || recs[0]["event"] != "outcome_unknown" || recs[0]["status"] != "unknown" || recs[0]["actor"] != "system" {
		t.Fatalf("audit of the mark: %v", recs)
	}

	r := e.Do("POST", "/v1/capabilities/acme:post/call", agent, body)
	hint := r.ErrorHint()
	if r.Status != 409 || r.ErrorCode() != "OUTCOME_UNKNOWN" || !strings.Contains(hint, "may or may not have run upstream") ||
		!strings.Contains(hint, "will not run it again") || !strings.Contains(hint, "check the upstream system for call cl_dead") {
		t.Fatalf("replay of an unknown call: %d %s", r.Status, r.Raw)
	}
	m := e.Do("POST", "/mcp", agent, rpcBody(9, "tools/call", map[string]any{"name": "acme:post", "arguments": body}))
	if re := rpcErr(m); re == nil || re["code"] != float64(ladder.RPCRefused) || re["message"] != "OUTCOME_UNKNOWN" {
		t.Fatalf("mcp replay of an unknown call: %s", m.Raw)
	}
	if e.Upstream.Calls() != before {
		t.Fatalf("the unknown call ran again")
	}
	if r, err := e.Svc.RecoverCalls(t.Context()); err != nil || r.MarkedUnknown != 0 {
		t.Fatalf("a second sweep: %+v %v", r, err)
	}
	if _, err := ladder.VerifyAudit(t.Context(), e.Store); err != nil {
		t.Fatalf("audit chain: %v", err)
	}
}

// TestLateResultReplacesUnknown: a replica holds a call's result in memory
// while its store refuses it; its own sweep never marks that call, however
// long it waits, but another replica's sweep does (the call ran past its
// timeout plus the margin). When the store takes the result, the result —
// the truth — replaces the unknown mark, recorded in the audit log, and a
// replay returns it.
func TestLateResultReplacesUnknown(t *testing.T) {
	e, fs := resultEnv(t, "")
	agent := e.Keys["acme/agent"]
	body := map[string]any{"payload": map[string]any{"bill_id": "B-late"}, "idempotency_key": "post-B-late"}
	fs.FailNext("FinishCall", -1, faultstore.ErrDown)
	r := e.Do("POST", "/v1/capabilities/acme:post/call", agent, body)
	if r.Status != 200 || r.Body["status"] != "executed" || e.Svc.ResultsWaiting() != 1 {
		t.Fatalf("call: %d %s, %d waiting", r.Status, r.Raw, e.Svc.ResultsWaiting())
	}
	callID := r.Body["call_id"].(string)
	e.Clock.Advance(time.Hour)
	if rec, err := e.Svc.RecoverCalls(t.Context()); err != nil || rec.MarkedUnknown != 0 {
		t.Fatalf("this replica's sweep marked a call whose result it holds: %+v %v", rec, err)
	}
	// Another replica's sweep, through the store.
	running, err := e.Store.GetCall(t.Context(), "acme", callID)
	if err != nil || running.Status != ladder.CallRunning {
		t.Fatalf("while held the stored call is %s (%v)", running.Status, err)
	}
	mark := running
	mark.Status, mark.ErrorCode = ladder.CallUnknown, ladder.CodeOutcomeUnknown
	me, _ := ladder.NewAuditEntry("acme", "system", ladder.AuditCallResult, callID, e.Clock.Now(), map[string]any{"event": "outcome_unknown", "status": "unknown"})
	if _, err := e.Store.UpdateCall(t.Context(), mark, ladder.CallRunning, me); err != nil {
		t.Fatal(err)
	}
	// The replica that holds the truth answers with it meanwhile.
	if again := e.Do("POST", "/v1/capabilities/acme:post/call", agent, body); again.Status != 200 || again.Body["status"] != "executed" {
		t.Fatalf("replay on the replica holding the result: %d %s", again.Status, again.Raw)
	}
	fs.ClearNext()
	eventually(t, 20*time.Second, func() string {
		if c, _ := e.Store.GetCall(t.Context(), "acme", callID); c.Status != ladder.CallOK {
			return "the late result did not replace the unknown mark: the call is " + string(c.Status)
		}
		return ""
	})
	recs := auditData(t, e, ladder.AuditCallResult, callID)
	if len(recs) != 2 || recs[1]["status"] != "ok" || recs[1]["replaces"] != "unknown" {
		t.Fatalf("result audit records: %v", recs)
	}
	if again := e.Do("POST", "/v1/capabilities/acme:post/call", agent, body); again.Status != 200 || again.Body["replayed"] != true {
		t.Fatalf("replay after: %d %s", again.Status, again.Raw)
	}
}

// humanApproval asks for a human-gated commission and returns the
// approval the call created.
func humanApproval(t *testing.T, e *testenv.Env, commission string) ladder.Approval {
	t.Helper()
	r := e.Do("POST", "/v1/capabilities/acme:human/call", e.Keys["acme/agent"], map[string]any{"program": "p1", "payload": map[string]any{"commission_id": commission, "relationship": "r-1"}})
	if r.Status != 202 {
		t.Fatalf("human gate: %d %s", r.Status, r.Raw)
	}
	a, err := e.Store.GetApproval(t.Context(), "acme", r.Body["approval_id"].(string))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// diedApproving stores an approval as a process stores it when a person
// approves, before that process dies: executing, naming the call it was
// about to begin.
func diedApproving(t *testing.T, e *testenv.Env, a ladder.Approval, callID string) {
	t.Helper()
	b := a
	now := e.Clock.Now()
	b.Status, b.DecidedBy, b.DecidedAt, b.CallID = ladder.ApprovalExecuting, "k_person", &now, callID
	ae, _ := ladder.NewAuditEntry("acme", "k_person", ladder.AuditApproval, a.ID, now, map[string]any{"event": "approved"})
	if _, err := e.Store.UpdateApproval(t.Context(), b, ladder.ApprovalPending, []ladder.AuditEntry{ae}); err != nil {
		t.Fatal(err)
	}
}

// TestApprovalLeftExecuting: nobody waits forever on an approval whose
// process died while executing it. Died before its call began: once no
// call has appeared for longer than any executor's timeout plus the
// margin, the sweep claims the call's id (so no late process can begin
// it) and stores the approval approved and not executed, which a person
// can retry. Died after its call began: the sweep marks the call unknown
// and the approval with it; the agent's approval_status says
// OUTCOME_UNKNOWN, and a retry is refused, since the call may have run.
func TestApprovalLeftExecuting(t *testing.T) {
	e, _ := resultEnv(t, "")
	human, agent := e.Keys["acme/human"], e.Keys["acme/agent"]
	before := e.Upstream.Calls()

	never := humanApproval(t, e, "c-never")
	diedApproving(t, e, never, "cl_never")
	began := humanApproval(t, e, "c-began")
	diedApproving(t, e, began, "cl_began")
	deadCall(t, e, ladder.Call{ID: "cl_began", Workspace: "acme", Capability: "acme:human", KeyID: "k_person", IdempotencyKey: "approval:" + began.ID,
		Payload: began.Payload, Scope: began.Scope, ApprovalID: began.ID})

	if r, err := e.Svc.RecoverCalls(t.Context()); err != nil || r.ApprovalsSettled != 0 || r.MarkedUnknown != 0 {
		t.Fatalf("first sweep: %+v %v", r, err)
	}
	for _, id := range []string{never.ID, began.ID} {
		if st := e.Do("GET", "/v1/approvals/"+id, agent, nil); st.Body["status"] != "executing" {
			t.Fatalf("before the sweep is due: %s", st.Raw)
		}
	}
	e.Clock.Advance(12 * time.Second) // the longest timeout (10 s) plus the margin (1 s), and more
	if r, err := e.Svc.RecoverCalls(t.Context()); err != nil || r.ApprovalsSettled != 2 || r.MarkedUnknown != 1 {
		t.Fatalf("sweep when due: %+v %v", r, err)
	}

	st := e.Do("GET", "/v1/approvals/"+never.ID, agent, nil)
	if st.Body["status"] != "approved" || !strings.Contains(st.Body["exec_error"].(string), "nothing ran") {
		t.Fatalf("approval whose call never began: %s", st.Raw)
	}
	claim := ladder.Call{ID: "cl_never", Workspace: "acme", Capability: "acme:human", IdempotencyKey: "approval:" + never.ID, Status: ladder.CallRunning}
	ce, _ := ladder.NewAuditEntry("acme", "k_late", ladder.AuditCall, "cl_never", e.Clock.Now(), nil)
	if _, created, err := e.Store.BeginCall(t.Context(), claim, ce); err == nil || created {
		t.Fatalf("a late process began the claimed call: created %v, err %v", created, err)
	}
	if rt := e.Do("POST", "/v1/approvals/"+never.ID+"/retry", human, nil); rt.Status != 200 || rt.Body["status"] != "approved" || rt.Body["exec_error"] != nil {
		t.Fatalf("retry of the approval whose call never began: %d %s", rt.Status, rt.Raw)
	}
	if n := e.Upstream.Calls() - before; n != 1 {
		t.Fatalf("upstream calls %d, want 1 (the retry)", n)
	}

	st = e.Do("GET", "/v1/approvals/"+began.ID, agent, nil)
	if st.Body["status"] != "approved" || !strings.HasPrefix(st.Body["exec_error"].(string), "OUTCOME_UNKNOWN: call cl_began") || st.Body["call_id"] != "cl_began" {
		t.Fatalf("approval whose call began: %s", st.Raw)
	}
	if rt := e.Do("POST", "/v1/approvals/"+began.ID+"/retry", human, nil); rt.Status != 409 || rt.ErrorCode() != "OUTCOME_UNKNOWN" {
		t.Fatalf("retry of an unknown outcome: %d %s", rt.Status, rt.Raw)
	}
	if n := e.Upstream.Calls() - before; n != 1 {
		t.Fatalf("upstream calls %d, want 1", n)
	}
	if _, err := ladder.VerifyAudit(t.Context(), e.Store); err != nil {
		t.Fatalf("audit chain: %v", err)
	}
}

// TestApprovalOutcomeWriteFails: a person approves, the call runs, and
// then the store refuses both the call's result and the approval's
// outcome. The person is told the truth (approved, with the result); the
// approval waits in executing only until the store recovers, when the
// held result is stored and the approval settled from it.
func TestApprovalOutcomeWriteFails(t *testing.T) {
	e, fs := resultEnv(t, "")
	human := e.Keys["acme/human"]
	a := humanApproval(t, e, "c-lost")
	fs.PassNext("UpdateApproval", 1) // the decision itself commits
	fs.FailNext("UpdateApproval", -1, faultstore.ErrDown)
	fs.FailNext("FinishCall", -1, faultstore.ErrDown)
	r := e.Do("POST", "/v1/approvals/"+a.ID+"/approve", human, nil)
	if r.Status != 200 || r.Body["status"] != "approved" || r.Body["result"] == nil {
		t.Fatalf("approve: %d %s", r.Status, r.Raw)
	}
	if got, _ := e.Store.GetApproval(t.Context(), "acme", a.ID); got.Status != ladder.ApprovalExecuting {
		t.Fatalf("while the store refuses, the stored approval is %s", got.Status)
	}
	fs.ClearNext()
	eventually(t, 20*time.Second, func() string {
		if got, _ := e.Store.GetApproval(t.Context(), "acme", a.ID); got.Status != ladder.ApprovalApproved || got.Result == nil || got.ExecError != "" {
			return fmt.Sprintf("the approval was not settled from its call: %s %q", got.Status, got.ExecError)
		}
		return ""
	})
	if e.Upstream.Calls() != 1 {
		t.Fatalf("upstream calls %d, want 1", e.Upstream.Calls())
	}
}

// heldRunner is an executor whose calls run until the test releases them.
type heldRunner struct {
	started chan struct{}
	release chan struct{}
}

func (h heldRunner) Execute(ctx context.Context, x ladder.Executor, req upstream.Request) (upstream.Result, error) {
	h.started <- struct{}{}
	<-h.release
	return upstream.Result{Body: json.RawMessage(`{"posted":true}`), Status: 200}, nil
}

// TestCallSweepReplicasPostgres: two replicas on one database, the second
// with a clock an hour ahead. While the first runs a call, the second's
// sweep leaves it alone: the call's age is measured by the database's
// clock, and it is younger than its executor's timeout plus the margin.
// A call left running by a replica that died is marked unknown by the
// second replica only once it is older than that by the database's clock
// (acme:slow: 300 ms plus the 1 s margin), and both replicas answer its
// replay OUTCOME_UNKNOWN.
func TestCallSweepReplicasPostgres(t *testing.T) {
	run := heldRunner{started: make(chan struct{}, 1), release: make(chan struct{})}
	reps := pgReplicas(t, []*testenv.Clock{testenv.WallClock(0), testenv.WallClock(time.Hour)}, testenv.Options{Runner: run, CallMargin: time.Second})
	live, ahead := reps[0], reps[1]
	agent := live.Keys["acme/agent"]
	body := map[string]any{"payload": map[string]any{"bill_id": "B-live"}, "idempotency_key": "post-B-live"}
	answer := make(chan testenv.Response, 1)
	go func() { answer <- live.Do("POST", "/v1/capabilities/acme:post/call", agent, body) }()
	<-run.started
	if r, err := ahead.Svc.RecoverCalls(t.Context()); err != nil || r.MarkedUnknown != 0 {
		t.Fatalf("the replica ahead marked a call another replica runs: %+v %v", r, err)
	}
	if r := ahead.Do("POST", "/v1/capabilities/acme:post/call", agent, body); r.ErrorCode() != "CONFLICT" {
		t.Fatalf("replay while it runs: %d %s", r.Status, r.Raw)
	}
	close(run.release)
	if r := <-answer; r.Status != 200 || r.Body["status"] != "executed" {
		t.Fatalf("the live call: %d %s", r.Status, r.Raw)
	}
	if r := ahead.Do("POST", "/v1/capabilities/acme:post/call", agent, body); r.Status != 200 || r.Body["replayed"] != true {
		t.Fatalf("replay on the other replica: %d %s", r.Status, r.Raw)
	}

	dead := deadCall(t, live, ladder.Call{ID: "cl_pg_dead", Workspace: "acme", Capability: "acme:slow", KeyID: "k_dead", IdempotencyKey: "slow-dead",
		Payload: json.RawMessage(`{}`)})
	if r, err := ahead.Svc.RecoverCalls(t.Context()); err != nil || r.MarkedUnknown != 0 {
		t.Fatalf("the replica ahead marked a call begun a moment ago: %+v %v", r, err)
	}
	time.Sleep(1500 * time.Millisecond)
	if r, err := ahead.Svc.RecoverCalls(t.Context()); err != nil || r.MarkedUnknown != 1 {
		t.Fatalf("sweep once the dead call is due by the database's clock: %+v %v", r, err)
	}
	for _, e := range reps {
		if r := e.Do("POST", "/v1/capabilities/acme:slow/call", agent, map[string]any{"idempotency_key": "slow-dead"}); r.ErrorCode() != "OUTCOME_UNKNOWN" ||
			!strings.Contains(r.ErrorHint(), dead.ID) {
			t.Fatalf("replay of the dead call: %d %s", r.Status, r.Raw)
		}
	}
}

package http_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/internal/testenv"
)

// capConfig declares one capability per branch of the call path. demo:
// URLs reach the test's demo upstream (a real HTTP server and a real go-sdk
// MCP server); slow and flaky are the test's own servers.
func capConfig(slowURL, flakyURL string) string {
	return fmt.Sprintf(`
workspaces:
  - id: acme
    scopes: {program: [p1]}
    queues:
      - id: q
        steps:
          - {id: auto_step, name: Auto step, lane: auto, audit_rate: 0.05}
          - {id: prop_step, name: Propose step, lane: propose}
          - {id: shadow_step, name: Shadow step, lane: shadow}
    gate_cases:
      - id: release
        name: Release
        commits:
          - id: release_it
            name: Release it
            precondition_fn:
              name: score_release
              doc: Releases need ok evidence.
              evidence:
                type: object
                required: [bill_id]
                properties:
                  bill_id: {type: string, description: The bill the checks were made for.}
                  ok: {type: boolean, description: Whether the checks passed.}
              R: "evidence.ok ? 1.0 : 0.0"
              C: "1.0"
              O: "1.0"
              Ro: "1.0"
    capabilities:
      - id: acme:post
        title: Post a bill
        description: Posts a bill to the TMS.
        payload_schema: {type: object, required: [bill_id], properties: {bill_id: {type: string, description: The bill.}}}
        step: q/auto_step
        item: bill_id
        executor: {kind: http, url: "demo:tms"}
      - id: acme:propose
        title: Approve a rate
        description: Approves a rate.
        payload_schema: {type: object, required: [bill_id], properties: {bill_id: {type: string, description: The bill.}, rate: {type: number, description: The rate.}}}
        step: prop_step
        item: bill_id
        executor: {kind: http, url: "demo:rates"}
      - id: acme:shadow
        title: Shadowed release
        description: Releases a hold.
        payload_schema: {type: object, required: [bill_id], properties: {bill_id: {type: string, description: The bill.}}}
        step: shadow_step
        item: bill_id
        executor: {kind: http, url: "demo:payments"}
      - id: acme:gated
        title: Gated release
        description: Releases a held payment when the evidence passes.
        payload_schema: {type: object, required: [bill_id], properties: {bill_id: {type: string, description: The bill.}}}
        gate: {case: release, precondition_fn: score_release, bind: {bill_id: bill_id}}
        executor: {kind: http, url: "demo:payments"}
      - id: acme:human
        title: Approve a commission
        description: A person approves every commission.
        payload_schema: {type: object, properties: {commission_id: {type: string, description: The commission.}}}
        scope_fields: [program]
        human_gate: true
        executor: {kind: mcp, url: "demo:ledger", tool: approveCommission}
      - id: acme:slow
        title: Slow upstream
        description: An upstream that hangs.
        executor: {kind: http, url: %q, timeout: 300ms}
      - id: acme:flaky
        title: Flaky upstream
        description: An upstream that is down until the test brings it back.
        human_gate: true
        executor: {kind: http, url: %q}
      - id: acme:later
        title: Not yet
        description: Declared but not served.
        served: false
  - id: other
    scopes: {program: [p2]}
    queues: [{id: q, steps: [{id: s, name: S, lane: shadow}]}]
`, slowURL, flakyURL)
}

type capEnv struct {
	*testenv.Env
	agent, human string
	flakyDown    *atomic.Bool
	flakyCalls   *atomic.Int64
}

func startCapEnv(t *testing.T) capEnv {
	t.Helper()
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}))
	t.Cleanup(slow.Close)
	var down atomic.Bool
	var calls atomic.Int64
	down.Store(true)
	flaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "maintenance", http.StatusServiceUnavailable)
			return
		}
		calls.Add(1)
		// The caller's ladder key must never reach an upstream.
		if a := r.Header.Get("Authorization"); strings.Contains(a, "ldr_") {
			t.Errorf("the upstream received the caller's key: %q", a)
		}
		w.Write([]byte(`{"done":true}`))
	}))
	t.Cleanup(flaky.Close)
	e := testenv.Start(t, capConfig(slow.URL, flaky.URL))
	return capEnv{Env: e, agent: e.Keys["acme/agent"], human: e.Keys["acme/human"], flakyDown: &down, flakyCalls: &calls}
}

func (c capEnv) call(id string, body any) testenv.Response {
	c.T.Helper()
	return c.Do("POST", "/v1/capabilities/"+id+"/call", c.agent, body)
}

func TestCapabilityRunsAloneExactlyOnce(t *testing.T) {
	c := startCapEnv(t)
	before := c.Upstream.Calls()
	r := c.call("acme:post", map[string]any{"payload": map[string]any{"bill_id": "B-1"}, "idempotency_key": "B-1"})
	if r.Status != 200 || r.Body["status"] != "executed" {
		t.Fatalf("call: %d %s", r.Status, r.Raw)
	}
	res := r.Body["result"].(map[string]any)
	if res["system"] != "tms" || res["bill_id"] != "B-1" {
		t.Fatalf("upstream result: %v", res)
	}
	for _, f := range []string{"route_id", "call_id", "audit_seq"} {
		if r.Body[f] == nil || r.Body[f] == "" {
			t.Errorf("executed call lacks %s: %s", f, r.Raw)
		}
	}
	// The same idempotency key: the first result, nothing runs again. An
	// extra top-level key merges into the payload.
	again := c.call("acme:post", map[string]any{"bill_id": "B-1", "idempotency_key": "B-1"})
	if again.Body["replayed"] != true || again.Body["call_id"] != r.Body["call_id"] {
		t.Fatalf("repeat: %s", again.Raw)
	}
	if n := c.Upstream.Calls() - before; n != 1 {
		t.Fatalf("upstream ran %d times for one idempotency key", n)
	}
	recs, _ := c.Store.ListAudit(t.Context(), ladder.AuditQuery{Workspace: "acme", Kind: ladder.AuditCall})
	if len(recs) != 1 {
		t.Fatalf("%d call audit records, want 1", len(recs))
	}
}

func TestCapabilityBadInput(t *testing.T) {
	c := startCapEnv(t)
	r := c.call("acme:post", map[string]any{"payload": map[string]any{"bill_id": 5}})
	if r.Status != 400 || !strings.Contains(string(r.Raw), `"field":"payload.bill_id"`) {
		t.Fatalf("wrong payload type: %d %s", r.Status, r.Raw)
	}
	foreign := c.call("acme:human", map[string]any{"program": "p2", "payload": map[string]any{}})
	nowhere := c.call("acme:human", map[string]any{"program": "p-none", "payload": map[string]any{}})
	if foreign.Status != 403 || foreign.ErrorCode() != "WORKSPACE_REFUSED" || string(foreign.Raw) != string(nowhere.Raw) {
		t.Fatalf("scope refusals must match and not tell the two apart:\n%s\n%s", foreign.Raw, nowhere.Raw)
	}
	if r := c.call("acme:later", map[string]any{}); r.ErrorCode() != "CAPABILITY_NOT_SERVED" {
		t.Fatalf("not served: %s", r.Raw)
	}
	if r := c.call("acme:nope", map[string]any{}); r.ErrorCode() != "UNKNOWN_CAPABILITY" {
		t.Fatalf("unknown: %s", r.Raw)
	}
}

func TestHumanGateApprovedOnceByManyApprovers(t *testing.T) {
	c := startCapEnv(t)
	before := c.Upstream.Calls()
	r := c.call("acme:human", map[string]any{"program": "p1", "payload": map[string]any{"commission_id": "c-9", "relationship": "r-1"}})
	if r.Status != 202 || r.Body["status"] != "approval_requested" || c.Upstream.Calls() != before {
		t.Fatalf("human gate: %d %s (upstream calls %d)", r.Status, r.Raw, c.Upstream.Calls()-before)
	}
	id := r.Body["approval_id"].(string)
	if a := c.Do("POST", "/v1/approvals/"+id+"/approve", c.agent, nil); a.Status != 403 {
		t.Fatalf("an agent key approved: %d", a.Status)
	}
	var ok, closed atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 12; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := c.Do("POST", "/v1/approvals/"+id+"/approve", c.human, nil)
			switch {
			case a.Status == 200:
				ok.Add(1)
			case a.Status == 409 && a.ErrorCode() == "APPROVAL_CLOSED":
				closed.Add(1)
			default:
				t.Errorf("approver: %d %s", a.Status, a.Raw)
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 1 || closed.Load() != 11 || c.Upstream.Calls()-before != 1 {
		t.Fatalf("12 approvers: %d ok, %d conflicts, %d executions; want 1, 11, 1", ok.Load(), closed.Load(), c.Upstream.Calls()-before)
	}
	st := c.Do("GET", "/v1/approvals/"+id, c.agent, nil)
	if st.Body["status"] != "approved" || st.Body["result"].(map[string]any)["approved"] != true {
		t.Fatalf("approval status: %s", st.Raw)
	}
}

func TestProposeEditApproveRecordsReview(t *testing.T) {
	c := startCapEnv(t)
	r := c.call("acme:propose", map[string]any{"payload": map[string]any{"bill_id": "B-7", "rate": 1.5}})
	if r.Status != 202 || r.Body["decision"] != "propose" || r.Body["proposal"] == nil {
		t.Fatalf("propose: %d %s", r.Status, r.Raw)
	}
	id := r.Body["approval_id"].(string)
	if bad := c.Do("POST", "/v1/approvals/"+id+"/approve", c.human, map[string]any{"payload": map[string]any{"bill_id": "B-7", "rate": "high"}}); bad.Status != 400 || !strings.Contains(string(bad.Raw), "payload.rate") {
		t.Fatalf("edited payload of the wrong type: %d %s", bad.Status, bad.Raw)
	}
	a := c.Do("POST", "/v1/approvals/"+id+"/approve", c.human, map[string]any{"payload": map[string]any{"bill_id": "B-7", "rate": 1.25}, "reason": "contract rate"})
	if a.Status != 200 || a.Body["status"] != "approved" || a.Body["edited_payload"] == nil {
		t.Fatalf("edit then approve: %d %s", a.Status, a.Raw)
	}
	pack := c.Do("GET", "/v1/steps/q/prop_step/evidence", c.human, nil)
	dis := pack.Body["recent_disagreements"].([]any)
	if len(dis) != 1 || dis[0].(map[string]any)["kind"] != "approval" {
		t.Fatalf("an edited approval must be a disagreeing review: %v", dis)
	}
	// A rejection needs a reason, and the agent sees it.
	r2 := c.call("acme:human", map[string]any{"program": "p1", "payload": map[string]any{"commission_id": "c-8"}})
	id2 := r2.Body["approval_id"].(string)
	if rj := c.Do("POST", "/v1/approvals/"+id2+"/reject", c.human, map[string]any{}); rj.Status != 400 {
		t.Fatalf("reject without reason: %d", rj.Status)
	}
	if rj := c.Do("POST", "/v1/approvals/"+id2+"/reject", c.human, map[string]any{"reason": "wrong carrier"}); rj.Status != 200 || rj.Body["status"] != "rejected" {
		t.Fatalf("reject: %d %s", rj.Status, rj.Raw)
	}
	if st := c.Do("GET", "/v1/approvals/"+id2, c.agent, nil); st.Body["status"] != "rejected" || st.Body["decision_reason"] != "wrong carrier" {
		t.Fatalf("the agent must see the rejection and its reason: %s", st.Raw)
	}
}

func TestShadowAndGateRefusals(t *testing.T) {
	c := startCapEnv(t)
	before := c.Upstream.Calls()
	r := c.call("acme:shadow", map[string]any{"payload": map[string]any{"bill_id": "B-3"}})
	if r.Status != 403 || r.ErrorCode() != "STEP_NEEDS_PERSON" {
		t.Fatalf("shadow: %d %s", r.Status, r.Raw)
	}
	data := r.Body["error"].(map[string]any)["data"].(map[string]any)
	if data["proposal_id"] == nil {
		t.Fatalf("shadow must record the proposal: %s", r.Raw)
	}
	held := c.call("acme:gated", map[string]any{"bill_id": "B-1", "evidence": map[string]any{"bill_id": "B-1", "ok": false}})
	if held.Status != 403 || held.ErrorCode() != "GATE_HELD" {
		t.Fatalf("gate: %d %s", held.Status, held.Raw)
	}
	hd := held.Body["error"].(map[string]any)["data"].(map[string]any)
	if hd["gate_state"] != "ESCALATE" || hd["decision_id"] == nil || hd["approval_id"] == nil {
		t.Fatalf("GATE_HELD must carry the verdict: %v", hd)
	}
	if c.Upstream.Calls() != before {
		t.Fatal("a refusal executed something")
	}
	pass := c.call("acme:gated", map[string]any{"bill_id": "B-1", "evidence": map[string]any{"bill_id": "B-1", "ok": true}})
	if pass.Status != 200 || pass.Body["gate_decision_id"] == nil || pass.Body["status"] != "executed" {
		t.Fatalf("gate PASS: %d %s", pass.Status, pass.Raw)
	}
	if missing := c.call("acme:gated", map[string]any{"bill_id": "B-1"}); missing.Status != 400 || !strings.Contains(string(missing.Raw), "GET /v1/gate/functions") {
		t.Fatalf("missing evidence: %d %s", missing.Status, missing.Raw)
	}
}

func TestUpstreamTimeoutAndDownAtApproval(t *testing.T) {
	c := startCapEnv(t)
	r := c.call("acme:slow", map[string]any{"idempotency_key": "s-1"})
	if r.Status != 504 || r.ErrorCode() != "UPSTREAM_TIMEOUT" {
		t.Fatalf("slow upstream: %d %s", r.Status, r.Raw)
	}
	callID := r.Body["error"].(map[string]any)["data"].(map[string]any)["call_id"].(string)
	got, err := c.Store.GetCall(t.Context(), "acme", callID)
	if err != nil || got.Status != ladder.CallFailed || got.ErrorCode != ladder.CodeUpstreamTimeout {
		t.Fatalf("the timeout must be recorded: %+v %v", got, err)
	}
	// Not retried blindly: the same key answers with the recorded failure.
	if again := c.call("acme:slow", map[string]any{"idempotency_key": "s-1"}); again.ErrorCode() != "UPSTREAM_TIMEOUT" {
		t.Fatalf("repeat: %s", again.Raw)
	}

	req := c.call("acme:flaky", map[string]any{})
	id := req.Body["approval_id"].(string)
	a := c.Do("POST", "/v1/approvals/"+id+"/approve", c.human, nil)
	if a.ErrorCode() != "UPSTREAM_FAILED" {
		t.Fatalf("approve with the upstream down: %d %s", a.Status, a.Raw)
	}
	st := c.Do("GET", "/v1/approvals/"+id, c.human, nil)
	if st.Body["status"] != "approved" || !strings.Contains(st.Body["exec_error"].(string), "503") {
		t.Fatalf("approved, not executed, and says why: %s", st.Raw)
	}
	c.flakyDown.Store(false)
	rt := c.Do("POST", "/v1/approvals/"+id+"/retry", c.human, nil)
	if rt.Status != 200 || rt.Body["exec_error"] != nil || c.flakyCalls.Load() != 1 {
		t.Fatalf("retry: %d %s", rt.Status, rt.Raw)
	}
}

func TestApprovalExpires(t *testing.T) {
	c := startCapEnv(t)
	r := c.call("acme:human", map[string]any{"program": "p1"})
	id := r.Body["approval_id"].(string)
	c.Clock.Advance(73 * time.Hour)
	if st := c.Do("GET", "/v1/approvals/"+id, c.agent, nil); st.Body["status"] != "expired" {
		t.Fatalf("after 73h: %s", st.Raw)
	}
	if a := c.Do("POST", "/v1/approvals/"+id+"/approve", c.human, nil); a.Status != 410 || a.ErrorCode() != "APPROVAL_EXPIRED" {
		t.Fatalf("approving an expired request: %d %s", a.Status, a.Raw)
	}
	list := c.Do("GET", "/v1/approvals?status=pending", c.human, nil)
	if n := len(list.Body["approvals"].([]any)); n != 0 {
		t.Fatalf("%d pending approvals after expiry", n)
	}
}

// TestCallerGoneStillRecordsTheResult: once a call is recorded as begun it
// runs to its end and its result is recorded, even when the caller hangs
// up while the upstream is still working — a call that may have run must
// never be left without a result.
func TestCallerGoneStillRecordsTheResult(t *testing.T) {
	reached, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var calls atomic.Int64
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		once.Do(func() { close(reached) })
		<-release // deliberately deaf to r.Context(): the upstream finishes its work
		w.Write([]byte(`{"done":true}`))
	}))
	t.Cleanup(upstream.Close)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	e := testenv.Start(t, capConfig(upstream.URL, upstream.URL))

	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "POST", e.Server.URL+"/v1/capabilities/acme:slow/call", strings.NewReader(`{"payload":{}}`))
		req.Header.Set("Authorization", "Bearer "+e.Keys["acme/agent"])
		req.Header.Set("Content-Type", "application/json")
		resp, err := e.Server.Client().Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	<-reached
	cancel() // the caller hangs up while the upstream works
	if err := <-errc; err == nil {
		t.Fatal("the request finished before the caller hung up")
	}
	time.Sleep(50 * time.Millisecond) // the server notices the hang-up
	close(release)

	deadline := time.Now().Add(3 * time.Second)
	for {
		recs, err := e.Store.ListAudit(t.Context(), ladder.AuditQuery{Workspace: "acme", Kind: ladder.AuditCallResult})
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == 1 {
			if !strings.Contains(string(recs[0].Data), `"status":"ok"`) {
				t.Fatalf("call result = %s, want status ok: the upstream answered", recs[0].Data)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d call results recorded 3 s after the upstream answered, want 1", len(recs))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("upstream called %d times, want 1", n)
	}
}

// TestIdempotencyKeyReusedWithAnotherPayload: a repeat of an idempotency key
// with the same payload gets the first answer; with another payload or
// scope it is refused and nothing runs — the first answer would tell the
// agent that an action it did not ask for is the one that ran.
func TestIdempotencyKeyReusedWithAnotherPayload(t *testing.T) {
	c := startCapEnv(t)
	before := c.Upstream.Calls()
	first := c.call("acme:post", map[string]any{"payload": map[string]any{"bill_id": "B-<7>&"}, "idempotency_key": "K-1"})
	if first.Status != 200 || first.Body["status"] != "executed" {
		t.Fatalf("first call: %d %s", first.Status, first.Raw)
	}
	same := c.call("acme:post", map[string]any{"payload": map[string]any{"bill_id": "B-<7>&"}, "idempotency_key": "K-1"})
	if same.Status != 200 || same.Body["replayed"] != true || same.Body["call_id"] != first.Body["call_id"] {
		t.Fatalf("the same payload again: %d %s", same.Status, same.Raw)
	}
	other := c.call("acme:post", map[string]any{"payload": map[string]any{"bill_id": "B-8"}, "idempotency_key": "K-1"})
	if other.Status != http.StatusConflict || other.ErrorCode() != "IDEMPOTENCY_KEY_REUSED" {
		t.Fatalf("another payload with the same key: %d %s", other.Status, other.Raw)
	}
	if e := other.Body["error"].(map[string]any); e["data"].(map[string]any)["call_id"] != first.Body["call_id"] || !strings.Contains(e["hint"].(string), "new idempotency_key") {
		t.Errorf("refusal does not name the first call and the way out: %s", other.Raw)
	}
	if n := c.Upstream.Calls() - before; n != 1 {
		t.Errorf("upstream ran %d times, want 1", n)
	}

	// A human gate: the same for the approval a key created.
	args := func(commission, program string) map[string]any {
		return map[string]any{"payload": map[string]any{"commission_id": commission}, "program": program, "idempotency_key": "K-2"}
	}
	ap := c.call("acme:human", args("c-<1>", "p1"))
	if ap.Status != http.StatusAccepted || ap.Body["status"] != "approval_requested" {
		t.Fatalf("human gate: %d %s", ap.Status, ap.Raw)
	}
	if again := c.call("acme:human", args("c-<1>", "p1")); again.Body["approval_id"] != ap.Body["approval_id"] {
		t.Fatalf("the same request again made another approval: %s", again.Raw)
	}
	if r := c.call("acme:human", args("c-2", "p1")); r.Status != http.StatusConflict || r.ErrorCode() != "IDEMPOTENCY_KEY_REUSED" ||
		r.Body["error"].(map[string]any)["data"].(map[string]any)["approval_id"] != ap.Body["approval_id"] {
		t.Fatalf("another payload for the approval's key: %d %s", r.Status, r.Raw)
	}
	pending, err := c.Store.ListApprovals(t.Context(), ladder.ApprovalQuery{Workspace: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != 1 {
		t.Errorf("%d approvals, want 1", len(pending))
	}
}

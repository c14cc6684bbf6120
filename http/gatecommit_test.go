package http_test

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/internal/testenv"
)

// releaseEvidence is release_payment evidence for bill; with ordered false
// the hold's reason was not cleared first (ORDERING_PRECONDITION_UNMET).
func releaseEvidence(bill string, ordered bool) map[string]any {
	ev := goodRelease(bill)
	ev["hold_reason_cleared_before_release"] = ordered
	return ev
}

// pinDecideHold pins the release capability's step to lane.
func pinDecideHold(t *testing.T, e *testenv.Env, lane string) {
	t.Helper()
	mustDo(t, e, 200, "POST", "/v1/steps/bills/decide_hold/pin", e.Keys["vantrow-bills/human"], map[string]any{"lane": lane, "reason": "test"})
}

// TestGateDecidesAtCommitInPropose: a gated capability whose step is in
// propose is gated before the proposal exists, and again when a person
// approves it, on the payload that will run. Nothing runs without a PASS
// recorded for that exact payload at that moment.
func TestGateDecidesAtCommitInPropose(t *testing.T) {
	e := testenv.Start(t, "")
	agent, human := e.Keys["vantrow-bills/agent"], e.Keys["vantrow-bills/human"]
	pinDecideHold(t, e, "propose")
	call := func(body map[string]any) testenv.Response {
		t.Helper()
		return e.Do("POST", "/v1/capabilities/payments:releaseHold/call", agent, body)
	}
	approvals := func() int {
		t.Helper()
		return len(mustDo(t, e, 200, "GET", "/v1/approvals", human, nil).Body["approvals"].([]any))
	}

	// Evidence that fails the gate's schema never becomes an approval.
	if r := call(map[string]any{"bill_id": "B-1", "evidence": map[string]any{"nonsense_field": 123}}); r.Status != 400 || r.ErrorCode() != "EVIDENCE_INVALID" {
		t.Fatalf("evidence outside the schema: %d %s", r.Status, r.Raw)
	}
	if n := approvals(); n != 0 {
		t.Fatalf("%d approvals after evidence outside the schema, want 0", n)
	}

	// ESCALATE evidence is held: no proposal a person could run as is.
	held := call(map[string]any{"bill_id": "B-2", "evidence": releaseEvidence("B-2", false)})
	data, _ := held.Body["error"].(map[string]any)["data"].(map[string]any)
	if held.ErrorCode() != "GATE_HELD" || data["reason_code"] != "ORDERING_PRECONDITION_UNMET" {
		t.Fatalf("escalated evidence in propose: %d %s", held.Status, held.Raw)
	}
	// A person approving the escalation cannot make it run: the gate is
	// asked again at commit and holds again.
	before := e.Upstream.Calls()
	ap := e.Do("POST", "/v1/approvals/"+data["approval_id"].(string)+"/approve", human, map[string]any{"reason": "looks fine to me"})
	if ap.ErrorCode() != "GATE_HELD" || e.Upstream.Calls() != before {
		t.Fatalf("approving held evidence: %d %s (upstream calls %d → %d)", ap.Status, ap.Raw, before, e.Upstream.Calls())
	}

	// PASS evidence becomes a proposal that carries its verdict.
	prop := call(map[string]any{"bill_id": "B-3", "evidence": releaseEvidence("B-3", true), "idempotency_key": "B-3"})
	if prop.Status != 202 || prop.Body["gate_decision_id"] == nil {
		t.Fatalf("passing evidence in propose: %d %s", prop.Status, prop.Raw)
	}
	id := prop.Body["approval_id"].(string)
	view := mustDo(t, e, 200, "GET", "/v1/approvals/"+id, human, nil)
	if view.Body["gate_state"] != "PASS" || view.Body["gate_decision_id"] != prop.Body["gate_decision_id"] {
		t.Fatalf("the approver does not see the proposal's verdict: %s", view.Raw)
	}

	// Edited to another bill, the bound evidence no longer authorizes it.
	edited := e.Do("POST", "/v1/approvals/"+id+"/approve", human, map[string]any{"payload": map[string]any{"bill_id": "B-EVIL"}})
	if edited.ErrorCode() != "GATE_HELD" || e.Upstream.Calls() != before {
		t.Fatalf("edit to another bill then approve: %d %s", edited.Status, edited.Raw)
	}
	d, _ := edited.Body["error"].(map[string]any)["data"].(map[string]any)
	if d["reason_code"] != "EVIDENCE_NOT_BOUND_TO_PAYLOAD" {
		t.Errorf("edit to another bill: reason %v", d["reason_code"])
	}

	// As proposed, the gate passes again at commit and the call runs once,
	// on the new verdict.
	prop2 := call(map[string]any{"bill_id": "B-4", "evidence": releaseEvidence("B-4", true)})
	ok := mustDo(t, e, 200, "POST", "/v1/approvals/"+prop2.Body["approval_id"].(string)+"/approve", human, map[string]any{"reason": "ok"})
	if ok.Body["status"] != "approved" || e.Upstream.Calls() != before+1 {
		t.Fatalf("approving passing evidence: %s", ok.Raw)
	}
	callRec, err := e.Store.GetCall(t.Context(), "vantrow-bills", ok.Body["call_id"].(string))
	if err != nil {
		t.Fatal(err)
	}
	if callRec.GateDecisionID == "" || callRec.GateDecisionID == prop2.Body["gate_decision_id"] {
		t.Errorf("the call ran on decision %q, want a verdict recorded at approval (not the proposal's %v)", callRec.GateDecisionID, prop2.Body["gate_decision_id"])
	}
	decs, err := e.Store.GateHistory(t.Context(), ladder.GateHistoryQuery{Workspace: "vantrow-bills", Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(callRec.Payload)
	for _, dec := range decs {
		if dec.ID == callRec.GateDecisionID && (dec.GateState != "PASS" || dec.PayloadSHA256 != hex.EncodeToString(sum[:])) {
			t.Errorf("the call's gate decision: %s, payload %s; want PASS for the payload that ran", dec.GateState, dec.PayloadSHA256)
		}
	}
}

// TestEvidenceBoundToPayload: PASS-grade evidence for one bill never lets
// another bill run, and an idempotency key repeated with other evidence is
// refused.
func TestEvidenceBoundToPayload(t *testing.T) {
	e := testenv.Start(t, "")
	agent := e.Keys["vantrow-bills/agent"]
	pinDecideHold(t, e, "auto")
	before := e.Upstream.Calls()
	r := e.Do("POST", "/v1/capabilities/payments:releaseHold/call", agent, map[string]any{"bill_id": "BAD-9", "evidence": releaseEvidence("GOOD-1", true)})
	data, _ := r.Body["error"].(map[string]any)["data"].(map[string]any)
	if r.ErrorCode() != "GATE_HELD" || data["reason_code"] != "EVIDENCE_NOT_BOUND_TO_PAYLOAD" || data["approval_id"] != nil || e.Upstream.Calls() != before {
		t.Fatalf("evidence for GOOD-1, payload for BAD-9: %d %s", r.Status, r.Raw)
	}
	ok := mustDo(t, e, 200, "POST", "/v1/capabilities/payments:releaseHold/call", agent, map[string]any{"bill_id": "GOOD-1", "evidence": releaseEvidence("GOOD-1", true), "idempotency_key": "k1"})
	if ok.Body["status"] != "executed" {
		t.Fatalf("bound evidence: %s", ok.Raw)
	}
	other := releaseEvidence("GOOD-1", true)
	other["note"] = "another story"
	if r := e.Do("POST", "/v1/capabilities/payments:releaseHold/call", agent, map[string]any{"bill_id": "GOOD-1", "evidence": other, "idempotency_key": "k1"}); r.ErrorCode() != "IDEMPOTENCY_KEY_REUSED" {
		t.Fatalf("same key, other evidence: %d %s", r.Status, r.Raw)
	}
	if again := mustDo(t, e, 200, "POST", "/v1/capabilities/payments:releaseHold/call", agent, map[string]any{"bill_id": "GOOD-1", "evidence": releaseEvidence("GOOD-1", true), "idempotency_key": "k1"}); again.Body["replayed"] != true {
		t.Fatalf("same key, same evidence: %s", again.Raw)
	}
}

// TestFreightGateHoldsWhatItShould: the demo's release gate refuses an
// absent safety check instead of reading it as done or as no dispute, and
// an explicit carrier_docs_verified false stays false.
func TestFreightGateHoldsWhatItShould(t *testing.T) {
	e := testenv.Start(t, "")
	agent := e.Keys["vantrow-bills/agent"]
	noDispute := goodRelease("B-1")
	delete(noDispute, "dispute_open")
	r := e.Do("POST", "/v1/gate/authorize", agent, authorizeBody("release_payment", "score_release_hold", noDispute))
	if r.Status != 400 || r.ErrorCode() != "EVIDENCE_INVALID" || r.Body["error"].(map[string]any)["data"].(map[string]any)["field"] != "evidence.dispute_open" {
		t.Fatalf("absent dispute_open: %d %s", r.Status, r.Raw)
	}
	unverified := goodRelease("B-1")
	unverified["carrier_docs_verified"] = false
	r = mustDo(t, e, 200, "POST", "/v1/gate/authorize", agent, authorizeBody("release_payment", "score_release_hold", unverified))
	if r.Body["gate_state"] == "PASS" || r.Body["repair_attempts"].(float64) != 0 {
		t.Fatalf("carrier_docs_verified false: %s", r.Raw)
	}
	if ev := r.Body["evidence"].(map[string]any); ev["carrier_docs_verified"] != false {
		t.Fatalf("carrier_docs_verified was repaired to %v", ev["carrier_docs_verified"])
	}
}

package service

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ladderhq/ladder"
)

// TestCallAuditData holds the structs of the call and call_result records
// to the maps they replaced: the same canonical bytes, so the same hashes
// in the chain.
func TestCallAuditData(t *testing.T) {
	caps := []ladder.Capability{
		{ID: "tms:postBill", Executor: ladder.Executor{Kind: "http"}},
		{ID: `ticket6:read<&>"é"`, Executor: ladder.Executor{Kind: "mcp"}},
		{},
	}
	calls := []ladder.Call{
		{Payload: json.RawMessage(`{"amount_usd":10.50,"bill_id":"B-1"}`), Scope: map[string]string{"program": "p", "relationship": "r\u2028x"},
			IdempotencyKey: "B-1", RouteID: "rt_1", GateDecisionID: "gd_1", ApprovalID: "ap_1",
			Status: ladder.CallFailed, Error: "The upstream call failed: <boom> & \"more\"", ErrorCode: ladder.CodeUpstreamFailed, UpstreamStatus: 502},
		{Payload: json.RawMessage(`{}`), Scope: map[string]string{}, Status: ladder.CallOK, UpstreamStatus: 200},
		{Payload: json.RawMessage(`{"n":12345678901234567890,"nested":{"z":[1,{"b":2,"a":1}]}}`), Status: ladder.CallRunning},
		{},
	}
	canon := func(v any) string {
		t.Helper()
		b, err := ladder.CanonicalJSON(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, c := range caps {
		for i, call := range calls {
			old := map[string]any{
				"capability": c.ID, "payload": call.Payload, "scope": call.Scope, "idempotency_key": call.IdempotencyKey,
				"route_id": call.RouteID, "gate_decision_id": call.GateDecisionID, "approval_id": call.ApprovalID, "executor": c.Executor.Kind,
			}
			if diff := cmp.Diff(canon(old), canon(callAudit(c, call))); diff != "" {
				t.Errorf("%s, call %d: call record data (-want +got):\n%s", c.ID, i, diff)
			}
			oldResult := map[string]any{
				"capability": c.ID, "status": call.Status, "error": call.Error, "error_code": call.ErrorCode, "upstream_status": call.UpstreamStatus,
			}
			if diff := cmp.Diff(canon(oldResult), canon(callResultAudit(c, call))); diff != "" {
				t.Errorf("%s, call %d: call_result record data (-want +got):\n%s", c.ID, i, diff)
			}
		}
	}
}

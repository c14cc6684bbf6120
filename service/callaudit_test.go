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
		{Payload: json.RawMessage(` { "note" : "<b> & \u2028" , "k" : [ 1 , 2 ] } `), Scope: map[string]string{"<p>": "&"}, UpstreamStatus: -1},
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
			data, err := callAudit(c, call)
			if err != nil {
				t.Fatalf("%s, call %d: %v", c.ID, i, err)
			}
			if diff := cmp.Diff(canon(old), canon(data)); diff != "" {
				t.Errorf("%s, call %d: call record data (-want +got):\n%s", c.ID, i, diff)
			}
			// Written by hand, byte for byte what encoding/json writes.
			want, err := json.Marshal(callAuditData{ApprovalID: call.ApprovalID, Capability: c.ID, Executor: c.Executor.Kind, GateDecisionID: call.GateDecisionID,
				IdempotencyKey: call.IdempotencyKey, Payload: call.Payload, RouteID: call.RouteID, Scope: call.Scope})
			if err != nil || string(data) != string(want) {
				t.Errorf("%s, call %d: call record data\n got %s\nwant %s (%v)", c.ID, i, data, want, err)
			}
			oldResult := map[string]any{
				"capability": c.ID, "status": call.Status, "error": call.Error, "error_code": call.ErrorCode, "upstream_status": call.UpstreamStatus,
			}
			result := callResultAudit(c, call)
			if diff := cmp.Diff(canon(oldResult), canon(result)); diff != "" {
				t.Errorf("%s, call %d: call_result record data (-want +got):\n%s", c.ID, i, diff)
			}
			want, err = json.Marshal(callResultAuditData{Capability: c.ID, Error: call.Error, ErrorCode: call.ErrorCode, Status: call.Status, UpstreamStatus: call.UpstreamStatus})
			if err != nil || string(result) != string(want) {
				t.Errorf("%s, call %d: call_result record data\n got %s\nwant %s (%v)", c.ID, i, result, want, err)
			}
		}
	}
}

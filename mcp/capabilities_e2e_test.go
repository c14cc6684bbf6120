package mcp_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/config"
	"github.com/ladderhq/ladder/internal/testenv"
)

// demoEvidence is passing evidence for each gate a demo capability names,
// for the item the payload names.
var demoEvidence = map[string]func(payload map[string]any) map[string]any{
	"release_payment/score_release_hold": func(payload map[string]any) map[string]any {
		return map[string]any{"bill_id": payload["bill_id"], "pod_received": true, "invoice_matches_rate_con": true, "carrier_docs_verified": true,
			"dispute_open": false, "hold_reason_cleared_before_release": true, "docs_externally_verifiable": true, "note": "all documents on file"}
	},
}

// sampleValue is a value for a declared payload property: its first
// example, else one of its type.
func sampleValue(name string, prop map[string]any) any {
	if ex, ok := prop["examples"].([]any); ok && len(ex) > 0 {
		return ex[0]
	}
	switch prop["type"] {
	case "number":
		return 12.5
	case "integer":
		return 3
	case "boolean":
		return true
	case "object":
		return map[string]any{}
	case "array":
		return []any{}
	}
	return "T-" + name
}

// TestDemoCapabilitiesEveryDeclaredField calls every served capability of
// the demo over MCP with every field its payload schema declares (and its
// scope, and passing evidence where a gate is declared). Each call must run,
// or ask a person (a human gate or a proposal): a person then approves it
// and the call must run. A step a person handles is pinned to propose
// first, so its capability goes through the same approval. A capability
// whose upstream refuses a declared field fails here.
func TestDemoCapabilitiesEveryDeclaredField(t *testing.T) {
	e := testenv.Start(t, "")
	served := 0
	for _, ws := range e.Config.Workspaces {
		for _, c := range ws.Capabilities {
			if !c.Served {
				continue
			}
			served++
			t.Run(c.ID, func(t *testing.T) {
				agent, human := e.Keys[ws.ID+"/agent"], e.Keys[ws.ID+"/human"]
				payload := map[string]any{}
				props, _ := c.Payload["properties"].(map[string]any)
				for name, p := range props {
					payload[name] = sampleValue(name, p.(map[string]any))
				}
				args := map[string]any{"payload": payload, "idempotency_key": "every-field-" + c.ID}
				for _, f := range c.ScopeFields {
					args[f] = ws.Scopes[f][0]
				}
				if c.Gate != nil {
					ev, ok := demoEvidence[c.Gate.Case+"/"+c.Gate.Fn]
					if !ok {
						t.Fatalf("no passing evidence for %s/%s in demoEvidence", c.Gate.Case, c.Gate.Fn)
					}
					args["evidence"] = ev(payload)
				}
				res := callTool(t, e, agent, c.ID, args)
				if code, _ := res.RPCError["message"].(string); code == string(ladder.CodeStepNeedsPerson) {
					queue, step := stepOf(t, ws.Queues, c.Step)
					if r := e.Do("POST", "/v1/steps/"+queue+"/"+step+"/pin", human, map[string]any{"lane": "propose", "reason": "every declared field"}); r.Status != 200 {
						t.Fatalf("pin %s/%s: %d %s", queue, step, r.Status, r.Raw)
					}
					args["idempotency_key"] = "every-field-again-" + c.ID
					res = callTool(t, e, agent, c.ID, args)
				}
				if res.RPCError != nil || res.IsError {
					t.Fatalf("call %s with every declared field: %s", c.ID, res.Raw)
				}
				switch res.Structured["status"] {
				case "executed":
					checkResultText(t, res.Text, res.Structured["result"])
				case "approval_requested":
					id, _ := res.Structured["approval_id"].(string)
					r := e.Do("POST", "/v1/approvals/"+id+"/approve", human, map[string]any{"reason": "every declared field"})
					if r.Status != 200 || r.Body["status"] != "approved" || r.Body["exec_error"] != nil {
						t.Fatalf("approve %s: %d %s", id, r.Status, r.Raw)
					}
					st := callTool(t, e, agent, "approval_status", map[string]any{"approval_id": id})
					if st.Structured["status"] != "approved" || st.Structured["result"] == nil || !strings.Contains(st.Text, "It ran.") {
						t.Fatalf("approval_status %s: %s", id, st.Raw)
					}
				default:
					t.Fatalf("call %s: status %v: %s", c.ID, res.Structured["status"], res.Raw)
				}
			})
		}
	}
	if served < 3 {
		t.Fatalf("the demo serves %d capabilities; expected several", served)
	}
}

// checkResultText requires a capability call's text content to carry its
// result: a client that shows the model only text must see the values.
func checkResultText(t *testing.T, text string, result any) {
	t.Helper()
	raw, err := json.Marshal(result)
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if err := json.Compact(&want, raw); err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(text, " Result: ")
	if !ok {
		t.Fatalf("text %q does not carry the result %s", text, want.String())
	}
	var got, exp any
	if err := json.Unmarshal([]byte(after), &got); err != nil {
		t.Fatalf("text's result is not JSON: %q: %v", after, err)
	}
	_ = json.Unmarshal(want.Bytes(), &exp)
	if fmt.Sprint(got) != fmt.Sprint(exp) {
		t.Errorf("text's result %s, structured result %s", after, want.String())
	}
}

// stepOf finds a capability's step ("queue/step" or a step id).
func stepOf(t *testing.T, queues []config.Queue, ref string) (string, string) {
	t.Helper()
	if q, s, ok := strings.Cut(ref, "/"); ok {
		return q, s
	}
	for _, q := range queues {
		for _, s := range q.Steps {
			if s.ID == ref {
				return q.ID, s.ID
			}
		}
	}
	t.Fatalf("no step %q", ref)
	return "", ""
}

// TestGatedCapabilityEvidenceInOnePlace: a gated capability takes its
// evidence once, as the top-level evidence argument the gate scores (and
// binds to the payload). Evidence inside the payload would reach the
// upstream unscored, so it is refused naming payload.evidence, alone or
// beside the top-level evidence.
func TestGatedCapabilityEvidenceInOnePlace(t *testing.T) {
	e := testenv.Start(t, "")
	agent, human := e.Keys["vantrow-bills/agent"], e.Keys["vantrow-bills/human"]
	if r := e.Do("POST", "/v1/steps/bills/decide_hold/pin", human, map[string]any{"lane": "auto", "reason": "test"}); r.Status != 200 {
		t.Fatalf("pin: %d %s", r.Status, r.Raw)
	}
	ev := demoEvidence["release_payment/score_release_hold"](map[string]any{"bill_id": "B-7"})
	for name, args := range map[string]map[string]any{
		"payload only": {"payload": map[string]any{"bill_id": "B-7", "evidence": ev}},
		"both places":  {"payload": map[string]any{"bill_id": "B-7", "evidence": ev}, "evidence": ev},
	} {
		res := callTool(t, e, agent, "payments:releaseHold", args)
		if !res.IsError || !strings.Contains(res.Text, "payload.evidence") {
			t.Errorf("%s: %s", name, res.Raw)
		}
	}
	res := callTool(t, e, agent, "payments:releaseHold", map[string]any{"payload": map[string]any{"bill_id": "B-7"}, "evidence": ev})
	if res.Structured["status"] != "executed" {
		t.Fatalf("evidence at the top level: %s", res.Raw)
	}
	// The binding holds: evidence for another bill does not pass.
	res = callTool(t, e, agent, "payments:releaseHold", map[string]any{"payload": map[string]any{"bill_id": "B-8"}, "evidence": ev})
	if d, _ := res.RPCError["data"].(map[string]any); d["reason_code"] != "EVIDENCE_NOT_BOUND_TO_PAYLOAD" {
		t.Fatalf("evidence for another bill: %s", res.Raw)
	}
}

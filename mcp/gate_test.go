package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/gate"
	"github.com/ladderhq/ladder/internal/testenv"
)

// toolResult is a tools/call answer as a client sees it.
type toolResult struct {
	IsError    bool
	Text       string
	Structured map[string]any
	// RPCError is the JSON-RPC error, when the call was refused.
	RPCError map[string]any
	Raw      []byte
}

var callID int

func callTool(t *testing.T, e *testenv.Env, key, name string, args any) toolResult {
	t.Helper()
	callID++
	r := e.Do("POST", "/mcp", key, []byte(call(callID, name, args)))
	out := toolResult{Raw: r.Raw}
	if rpcErr, ok := r.Body["error"].(map[string]any); ok {
		out.RPCError = rpcErr
		return out
	}
	res, ok := r.Body["result"].(map[string]any)
	if !ok {
		t.Fatalf("%s: no result: %s", name, r.Raw)
	}
	out.IsError, _ = res["isError"].(bool)
	if c, _ := res["content"].([]any); len(c) > 0 {
		out.Text, _ = c[0].(map[string]any)["text"].(string)
	}
	out.Structured, _ = res["structuredContent"].(map[string]any)
	return out
}

func toyEnv(t *testing.T) *testenv.Env {
	t.Helper()
	yaml, err := os.ReadFile(filepath.Join("testdata", "toy_gate.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return testenv.Start(t, string(yaml))
}

// govEvidence is ai_investment/score_invest_governance evidence with the
// named flags true.
func govEvidence(flags ...string) map[string]any {
	ev := map[string]any{}
	for _, f := range flags {
		ev[f] = true
	}
	return ev
}

var allGovernance = []string{"filing_license_verified", "data_compliance_verified", "safety_certified", "controllability_data_present",
	"privacy_compliance_verified", "cross_border_compliance_verified", "compliance_before_operations", "evidence_source_verified"}

// checkContract checks the invariants of every authorize answer.
func checkContract(t *testing.T, sc map[string]any) {
	t.Helper()
	if sc["schema_version"] != "1" {
		t.Errorf("schema_version = %v", sc["schema_version"])
	}
	if sc["route"] != sc["gate_state"] {
		t.Errorf("route %v != gate_state %v", sc["route"], sc["gate_state"])
	}
	if sc["authorized"] != (sc["gate_state"] == "PASS") {
		t.Errorf("authorized %v with gate_state %v", sc["authorized"], sc["gate_state"])
	}
	if sc["auto_repair_available"] != (sc["repair_attempts"].(float64) > 0) {
		t.Errorf("auto_repair_available %v with repair_attempts %v", sc["auto_repair_available"], sc["repair_attempts"])
	}
	cq := sc["cq_scores"].(map[string]any)
	for dim, legacy := range map[string]string{"relevance": "R", "coverage": "C", "ordering": "O", "robustness": "Ro"} {
		if cq[dim] != sc[legacy] {
			t.Errorf("cq_scores.%s %v != %s %v", dim, cq[dim], legacy, sc[legacy])
		}
	}
	if id, _ := sc["decision_id"].(string); !strings.HasPrefix(id, "gd_") {
		t.Errorf("decision_id = %q", id)
	}
}

// TestGateReasonCodes produces every reason code of DESIGN.md §5 through
// the MCP surface: the demo's cases for most, a toy case for the codes the
// demo cannot reach. Every decision is in the audit log and gate history.
func TestGateReasonCodes(t *testing.T) {
	demo := testenv.Start(t, "")
	toy := toyEnv(t)
	type ev = map[string]any
	tests := []struct {
		name      string
		env       *testenv.Env
		workspace string
		args      ev
		state     string
		reason    string
		repairs   float64
	}{
		{"pass", demo, "iia-gate", ev{"case": "ai_investment", "precondition_fn": "score_invest_governance", "evidence": govEvidence(allGovernance...)}, "PASS", gate.ReasonPassAboveThreshold, 0},
		{"pass after repair", demo, "iia-gate", ev{"case": "ai_investment", "precondition_fn": "score_invest_governance",
			"evidence": govEvidence("safety_certified", "controllability_data_present", "privacy_compliance_verified", "compliance_before_operations")}, "PASS", gate.ReasonPassAboveThreshold, 1},
		{"quality below repair threshold", demo, "iia-gate", ev{"case": "ai_investment", "precondition_fn": "score_invest_governance", "evidence": ev{}}, "ESCALATE", gate.ReasonQualityBelowRepairThreshold, 0},
		{"gap not externally verifiable", demo, "iia-gate", ev{"case": "ai_investment", "precondition_fn": "score_invest_governance",
			"evidence": ev{"filing_license_verified": true, "data_compliance_verified": true, "governance_gap_externally_verifiable": false}}, "ESCALATE", gate.ReasonGapNotExternallyVerifiable, 0},
		{"dry rounds exhausted", demo, "iia-gate", ev{"case": "ai_investment", "precondition_fn": "score_invest_governance",
			"evidence": govEvidence("filing_license_verified", "data_compliance_verified", "evidence_source_verified")}, "ESCALATE", gate.ReasonAutoRepairDryRoundsExhausted, 3},
		{"ordering precondition unmet", demo, "vantrow-bills", ev{"case": "release_payment", "precondition_fn": "score_release_hold",
			"evidence": ev{"bill_id": "B-7", "pod_received": true, "invoice_matches_rate_con": true, "carrier_docs_verified": true, "dispute_open": false, "hold_reason_cleared_before_release": false}}, "ESCALATE", gate.ReasonOrderingPreconditionUnmet, 0},
		{"dimension below floor (open dispute)", demo, "vantrow-bills", ev{"case": "release_payment", "precondition_fn": "score_release_hold",
			"evidence": ev{"bill_id": "B-8", "pod_received": true, "invoice_matches_rate_con": true, "carrier_docs_verified": true, "dispute_open": true, "hold_reason_cleared_before_release": true}}, "ESCALATE", gate.ReasonDimensionBelowFloor, 0},
		{"no repair function", toy, "toy-gate", ev{"case": "toy", "precondition_fn": "norepair", "evidence": ev{"r": 0.4, "c": 0.4}}, "ESCALATE", gate.ReasonAutoRepairUnavailableNoRepairFn, 0},
		{"soft commit promise supported", toy, "toy-gate", ev{"case": "toy", "precondition_fn": "soft", "evidence": ev{"promise": true, "feasible": true}}, "PASS", gate.ReasonSoftCommitPromiseSupported, 0},
		{"soft commit promise unsupported", toy, "toy-gate", ev{"case": "toy", "precondition_fn": "soft", "evidence": ev{"promise": true}}, "ESCALATE", gate.ReasonSoftCommitPromiseUnsupported, 0},
		{"evaluator fault fails closed", toy, "toy-gate", ev{"case": "toy", "precondition_fn": "out_of_range", "evidence": ev{"r": 0.9}}, "BYPASS_TO_HUMAN", gate.ReasonEvaluatorFault, 0},
	}
	seen := map[string]bool{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := tt.env.Keys[tt.workspace+"/agent"]
			res := callTool(t, tt.env, key, "authorize", tt.args)
			if res.IsError || res.Structured == nil {
				t.Fatalf("authorize: %s", res.Raw)
			}
			sc := res.Structured
			if sc["gate_state"] != tt.state || sc["reason_code"] != tt.reason || sc["repair_attempts"] != tt.repairs {
				t.Fatalf("gate_state %v, reason_code %v, repair_attempts %v; want %s, %s, %v\n%s", sc["gate_state"], sc["reason_code"], sc["repair_attempts"], tt.state, tt.reason, tt.repairs, res.Raw)
			}
			checkContract(t, sc)
			if tt.state != "PASS" && !strings.Contains(res.Text, "only gate_state PASS authorizes") {
				t.Errorf("text of a non-PASS decision does not say so: %q", res.Text)
			}
			seen[tt.reason] = true
			// The decision is in the audit log and in history.
			id := sc["decision_id"].(string)
			recs, err := tt.env.Store.ListAudit(context.Background(), ladder.AuditQuery{Workspace: tt.workspace, Kind: ladder.AuditGateDecision, Limit: 500})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(recs, func(r ladder.AuditRecord) bool { return r.Subject == id }) {
				t.Errorf("no gate.decision audit record for %s", id)
			}
			h := callTool(t, tt.env, key, "gate_history_get", ev{"limit": 1})
			if ds := h.Structured["decisions"].([]any); len(ds) != 1 || ds[0].(map[string]any)["decision_id"] != id {
				t.Errorf("history's newest decision is not %s: %s", id, h.Raw)
			}
		})
	}

	t.Run("bypass to human", func(t *testing.T) {
		key := demo.Keys["iia-gate/agent"]
		res := callTool(t, demo, key, "authorize", ev{"case": "ai_investment", "precondition_fn": "team_capability", "evidence": ev{}})
		if !res.IsError || !strings.Contains(res.Text, "A person must decide") || !strings.Contains(res.Text, gate.ReasonBypassHumanJudgmentRequired) {
			t.Fatalf("authorize team_capability: %s", res.Raw)
		}
		h := callTool(t, demo, key, "gate_history_get", ev{"action_id": "team_capability"})
		ds := h.Structured["decisions"].([]any)
		if len(ds) != 1 {
			t.Fatalf("history of team_capability: %s", h.Raw)
		}
		d := ds[0].(map[string]any)
		if d["gate_state"] != "BYPASS_TO_HUMAN" || d["reason_code"] != gate.ReasonBypassHumanJudgmentRequired || d["authorized"] != false {
			t.Errorf("recorded bypass: %v", d)
		}
		if !strings.Contains(res.Text, d["decision_id"].(string)) {
			t.Errorf("refusal %q does not name decision %v", res.Text, d["decision_id"])
		}
		seen[d["reason_code"].(string)] = true
	})

	t.Run("evidence bound to another bill", func(t *testing.T) {
		// The release capability's step runs alone once pinned to auto;
		// PASS-grade evidence for GOOD-1 sent with a payload for BAD-9 is
		// not scored, and nothing runs.
		if r := demo.Do("POST", "/v1/steps/bills/decide_hold/pin", demo.Keys["vantrow-bills/human"], ev{"lane": "auto", "reason": "test"}); r.Status != 200 {
			t.Fatalf("pin: %d %s", r.Status, r.Raw)
		}
		before := demo.Upstream.Calls()
		good := ev{"bill_id": "GOOD-1", "pod_received": true, "invoice_matches_rate_con": true, "carrier_docs_verified": true, "dispute_open": false, "hold_reason_cleared_before_release": true}
		res := callTool(t, demo, demo.Keys["vantrow-bills/agent"], "payments:releaseHold", ev{"bill_id": "BAD-9", "evidence": good})
		data, _ := res.RPCError["data"].(map[string]any)
		if res.RPCError["message"] != "GATE_HELD" || data["reason_code"] != gate.ReasonEvidenceNotBound || demo.Upstream.Calls() != before {
			t.Fatalf("mismatched evidence: %s", res.Raw)
		}
		h := callTool(t, demo, demo.Keys["vantrow-bills/agent"], "gate_history_get", ev{"limit": 1})
		if d := h.Structured["decisions"].([]any)[0].(map[string]any); d["reason_code"] != gate.ReasonEvidenceNotBound || d["decision_id"] != data["decision_id"] {
			t.Errorf("history's newest decision: %v", d)
		}
		seen[gate.ReasonEvidenceNotBound] = true
	})

	for _, code := range gate.ReasonCodes {
		if !seen[code] {
			t.Errorf("no test produced reason code %s through the API", code)
		}
	}
	for _, env := range []*testenv.Env{demo, toy} {
		if n, err := ladder.VerifyAudit(context.Background(), env.Store); err != nil {
			t.Errorf("audit chain after %d records: %v", n, err)
		}
	}
}

// listedTools returns the tools a workspace's agent sees, by name.
func listedTools(t *testing.T, e *testenv.Env, workspace string) map[string]*sdk.Tool {
	t.Helper()
	cs := connect(t, e.Server.URL, e.Keys[workspace+"/agent"])
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*sdk.Tool{}
	for _, tool := range res.Tools {
		out[tool.Name] = tool
	}
	for _, name := range []string{"list_precondition_functions", "authorize", "gate_history_get"} {
		if out[name] == nil {
			t.Fatalf("%s does not list %s", workspace, name)
		}
	}
	return out
}

func schemaOf(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func prop(schema map[string]any, name string) map[string]any {
	return schemaOf(schemaOf(schema["properties"])[name])
}

// validate checks a structured result against a tool's output schema.
func validate(t *testing.T, tool *sdk.Tool, sc map[string]any) {
	t.Helper()
	raw, err := json.Marshal(tool.OutputSchema)
	if err != nil {
		t.Fatal(err)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		t.Fatalf("%s output schema: %v", tool.Name, err)
	}
	if err := rs.Validate(sc); err != nil {
		t.Errorf("%s structuredContent does not match its output schema: %v", tool.Name, err)
	}
}

// TestSeed003Review closes, one test each, the seven gaps the seed 003
// review graded D: untyped evidence, no output schemas, missing parameter
// descriptions, undiscoverable case values, errors without recovery
// guidance, no pagination, and security not surfaced in the definitions.
func TestSeed003Review(t *testing.T) {
	e := testenv.Start(t, "")
	key := e.Keys["iia-gate/agent"]
	tools := listedTools(t, e, "iia-gate")
	type ev = map[string]any

	t.Run("1 evidence is typed and documented", func(t *testing.T) {
		in := schemaOf(tools["authorize"].InputSchema)
		evp := prop(in, "evidence")
		desc, _ := evp["description"].(string)
		if evp["type"] != "object" || !strings.Contains(desc, "list_precondition_functions") {
			t.Errorf("evidence property = %v", evp)
		}
		examples, _ := evp["examples"].([]any)
		if len(examples) == 0 || schemaOf(examples[0])["filing_license_verified"] != true {
			t.Errorf("evidence has no example for this workspace: %v", evp["examples"])
		}
		// The schema list_precondition_functions gives types and describes every field.
		res := callTool(t, e, key, "list_precondition_functions", ev{"case": "ai_investment"})
		for _, c := range res.Structured["cases"].([]any) {
			for _, f := range c.(map[string]any)["functions"].([]any) {
				fm := f.(map[string]any)
				var problems []string
				walkProperties(fm["precondition_fn"].(string), fm["evidence_schema"].(map[string]any), nil, &problems)
				for _, p := range problems {
					t.Error(p)
				}
			}
		}
		// Evidence of the wrong shape is refused, naming the field, and is not a verdict.
		bad := callTool(t, e, key, "authorize", ev{"case": "ai_investment", "precondition_fn": "score_invest_governance", "evidence": ev{"safety_certified": "yes"}})
		if !bad.IsError || !strings.Contains(bad.Text, "safety_certified") || bad.Structured != nil {
			t.Errorf("mistyped evidence: %s", bad.Raw)
		}
		bad = callTool(t, e, key, "authorize", ev{"case": "ai_investment", "precondition_fn": "score_invest_governance", "evidence": ev{"revenue": 12}})
		if !bad.IsError || !strings.Contains(bad.Text, "revenue") {
			t.Errorf("unknown evidence field: %s", bad.Raw)
		}
		bad = callTool(t, e, key, "authorize", ev{"case": "ai_investment", "precondition_fn": "score_invest_governance", "evidence": "all good"})
		if !bad.IsError || !strings.Contains(bad.Text, "evidence must be a JSON object") {
			t.Errorf("evidence not an object: %s", bad.Raw)
		}
	})

	t.Run("2 output schemas are declared and kept", func(t *testing.T) {
		calls := map[string]ev{
			"list_precondition_functions": {},
			"authorize":                   {"case": "ai_investment", "precondition_fn": "score_landing_level", "evidence": ev{"production_deployed": true}},
			"gate_history_get":            {},
		}
		for name, args := range calls {
			out := schemaOf(tools[name].OutputSchema)
			if out["type"] != "object" || len(schemaOf(out["properties"])) == 0 || out["required"] == nil {
				t.Errorf("%s output schema = %v", name, out)
			}
			res := callTool(t, e, key, name, args)
			if res.IsError || res.Structured == nil {
				t.Fatalf("%s: %s", name, res.Raw)
			}
			validate(t, tools[name], res.Structured)
		}
	})

	t.Run("3 every parameter is typed and described", func(t *testing.T) {
		for _, name := range []string{"list_precondition_functions", "authorize", "gate_history_get"} {
			var problems []string
			walkProperties("input", schemaOf(tools[name].InputSchema), nil, &problems)
			walkProperties("output", schemaOf(tools[name].OutputSchema), nil, &problems)
			for _, p := range problems {
				t.Errorf("%s %s", name, p)
			}
		}
		in := schemaOf(tools["authorize"].InputSchema)
		if d, _ := prop(in, "precondition_fn")["description"].(string); !strings.Contains(d, "list_precondition_functions") {
			t.Errorf("precondition_fn does not say where its values come from: %q", d)
		}
		if req, _ := in["required"].([]any); len(req) != 3 {
			t.Errorf("authorize required = %v", in["required"])
		}
	})

	t.Run("4 case values are discoverable", func(t *testing.T) {
		for _, name := range []string{"list_precondition_functions", "authorize"} {
			c := prop(schemaOf(tools[name].InputSchema), "case")
			if diff := cmp.Diff([]any{"ai_investment"}, c["enum"]); diff != "" {
				t.Errorf("%s case enum (-want +got):\n%s", name, diff)
			}
		}
		fn := prop(schemaOf(tools["authorize"].InputSchema), "precondition_fn")
		if diff := cmp.Diff([]any{"score_invest_governance", "score_landing_level"}, fn["enum"]); diff != "" {
			t.Errorf("precondition_fn enum (-want +got):\n%s", diff)
		}
		res := callTool(t, e, key, "list_precondition_functions", ev{})
		if diff := cmp.Diff([]any{"ai_investment"}, res.Structured["case_ids"]); diff != "" {
			t.Errorf("case_ids (-want +got):\n%s", diff)
		}
		if !strings.Contains(tools["list_precondition_functions"].Description, "Call it first") {
			t.Errorf("list_precondition_functions does not say to call it first")
		}
		// A workspace without gate cases says so instead of failing.
		other := callTool(t, e, e.Keys["checkcall-loads/agent"], "list_precondition_functions", ev{})
		if other.IsError || !strings.Contains(other.Text, "no gate cases") {
			t.Errorf("workspace without cases: %s", other.Raw)
		}
	})

	t.Run("5 errors carry recovery guidance", func(t *testing.T) {
		tests := []struct {
			name string
			args ev
			want []string
		}{
			{"unknown case", ev{"case": "ai_investments", "precondition_fn": "score_invest_governance", "evidence": ev{}}, []string{"ai_investments", "call list_precondition_functions", "valid cases: ai_investment"}},
			{"missing case", ev{"precondition_fn": "score_invest_governance", "evidence": ev{}}, []string{"The case field is required", "valid cases: ai_investment"}},
			{"unknown function", ev{"case": "ai_investment", "precondition_fn": "score_team", "evidence": ev{}}, []string{"score_team", "call list_precondition_functions", "score_invest_governance, score_landing_level"}},
			{"bypass_to_human commit", ev{"case": "ai_investment", "precondition_fn": "team_capability", "evidence": ev{}}, []string{"A person must decide", "do not perform this action"}},
			{"evidence field", ev{"case": "ai_investment", "precondition_fn": "score_invest_governance", "evidence": ev{"safety_certified": 1}}, []string{"safety_certified", "fix evidence.safety_certified", "list_precondition_functions"}},
		}
		for _, tt := range tests {
			res := callTool(t, e, key, "authorize", tt.args)
			if !res.IsError {
				t.Errorf("%s: not an isError result: %s", tt.name, res.Raw)
				continue
			}
			for _, w := range tt.want {
				if !strings.Contains(res.Text, w) {
					t.Errorf("%s: %q lacks %q", tt.name, res.Text, w)
				}
			}
		}
		bad := callTool(t, e, key, "list_precondition_functions", ev{"case": "nope"})
		if !bad.IsError || !strings.Contains(bad.Text, "valid cases: ai_investment") {
			t.Errorf("list with unknown case: %s", bad.Raw)
		}
		cur := callTool(t, e, key, "gate_history_get", ev{"cursor": "not-a-cursor"})
		data := schemaOf(cur.RPCError["data"])
		if cur.RPCError["code"] != float64(ladder.RPCInvalidParams) || data["code"] != "BAD_CURSOR" || !strings.Contains(data["hint"].(string), "next_cursor") {
			t.Errorf("bad cursor: %s", cur.Raw)
		}
		for _, args := range []ev{{"limit": 501}, {"limit": -1}, {"gate_state": "FAIL"}, {"since": "yesterday"}} {
			res := callTool(t, e, key, "gate_history_get", args)
			if !res.IsError || !strings.Contains(res.Text, "Hint:") {
				t.Errorf("gate_history_get %v: %s", args, res.Raw)
			}
		}
	})

	t.Run("6 history pages", func(t *testing.T) {
		in := schemaOf(tools["gate_history_get"].InputSchema)
		limit := prop(in, "limit")
		if limit["maximum"] != 500.0 || limit["default"] != 50.0 || prop(in, "cursor")["type"] != "string" {
			t.Errorf("limit %v, cursor %v", limit, prop(in, "cursor"))
		}
		for range 5 {
			callTool(t, e, key, "authorize", ev{"case": "ai_investment", "precondition_fn": "score_invest_governance", "evidence": ev{}})
		}
		var ids []string
		cursor := ""
		for pages := 0; ; pages++ {
			args := ev{"limit": 2, "case": "ai_investment", "precondition_fn": "score_invest_governance"}
			if cursor != "" {
				args["cursor"] = cursor
			}
			res := callTool(t, e, key, "gate_history_get", args)
			for _, d := range res.Structured["decisions"].([]any) {
				ids = append(ids, d.(map[string]any)["decision_id"].(string))
			}
			next, _ := res.Structured["next_cursor"].(string)
			if res.Structured["has_more"] != (next != "") {
				t.Fatalf("has_more %v with next_cursor %q", res.Structured["has_more"], next)
			}
			if next == "" {
				break
			}
			cursor = next
		}
		if len(ids) < 5 || len(ids) != len(slicesCompact(ids)) {
			t.Errorf("paged ids = %v", ids)
		}
	})

	t.Run("7 security is surfaced in the definitions", func(t *testing.T) {
		ro := func(name string) bool { return tools[name].Annotations.ReadOnlyHint }
		if !ro("list_precondition_functions") || !ro("gate_history_get") || ro("authorize") {
			t.Errorf("readOnlyHint: list %v, history %v, authorize %v", ro("list_precondition_functions"), ro("gate_history_get"), ro("authorize"))
		}
		a := tools["authorize"].Annotations
		if *a.DestructiveHint || a.IdempotentHint || *a.OpenWorldHint {
			t.Errorf("authorize annotations = %+v", a)
		}
		desc := tools["authorize"].Description
		for _, w := range []string{"audit log", "redacted", "Act only on PASS", "nothing is executed"} {
			if !strings.Contains(desc, w) {
				t.Errorf("authorize description lacks %q", w)
			}
		}
		outDesc, _ := schemaOf(tools["authorize"].OutputSchema)["description"].(string)
		for _, w := range []string{"never treats an action as authorized unless gate_state is PASS", "auto_repair_available is repair_attempts > 0"} {
			if !strings.Contains(outDesc, w) {
				t.Errorf("authorize output schema description lacks %q", w)
			}
		}
		if !strings.Contains(tools["gate_history_get"].Description, "never decides or writes") {
			t.Errorf("gate_history_get does not say it never writes")
		}
		// And what the definitions promise holds: secrets are redacted before
		// they reach the answer or the log.
		secret := "password=hunter2 key ldr_ab12cd_QWErty1234567890zzzzzzzz"
		res := callTool(t, e, key, "authorize", ev{"case": "ai_investment", "precondition_fn": "score_invest_governance",
			"evidence": ev{"analyst_note": secret, "safety_certified": true}})
		if res.IsError || strings.Contains(string(res.Raw), "hunter2") || strings.Contains(string(res.Raw), "QWErty") {
			t.Errorf("authorize answer leaks a secret: %s", res.Raw)
		}
		if n := res.Structured["notes"].(string); !strings.Contains(n, gate.Redacted) {
			t.Errorf("notes = %q", n)
		}
		var leaked bool
		if err := e.Store.WalkAudit(context.Background(), 0, func(r ladder.AuditRecord) error {
			leaked = leaked || bytes.Contains(r.Data, []byte("hunter2")) || bytes.Contains(r.Data, []byte("QWErty"))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if leaked {
			t.Error("the audit log holds the secret")
		}
		// History is scoped to the key's workspace.
		other := callTool(t, e, e.Keys["vantrow-bills/agent"], "gate_history_get", ev{"case": "ai_investment"})
		if ds := other.Structured["decisions"].([]any); len(ds) != 0 {
			t.Errorf("vantrow-bills sees %d ai_investment decisions", len(ds))
		}
		// A human key cannot reach the agent tools at all.
		h := e.Do("POST", "/mcp", e.Keys["iia-gate/human"], []byte(call(1, "authorize", ev{"case": "ai_investment", "precondition_fn": "score_invest_governance", "evidence": ev{}})))
		if !strings.Contains(string(h.Raw), "HUMAN_KEY_REFUSED") {
			t.Errorf("human key: %s", h.Raw)
		}
	})
}

func slicesCompact(ids []string) []string {
	s := slices.Clone(ids)
	slices.Sort(s)
	return slices.Compact(s)
}

// TestGateHistoryTenThousand pages gate_history_get through 10,000
// decisions (seeded through the store: 10,000 authorize calls would only
// test the same write path more slowly) without a gap or a repeat, and
// checks that paging writes nothing.
func TestGateHistoryTenThousand(t *testing.T) {
	if testing.Short() {
		t.Skip("seeds 10,000 decisions")
	}
	e := testenv.Start(t, "")
	const total = 10000
	at := e.Clock.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < total; i += 64 {
				d := ladder.GateDecisionRecord{ID: fmt.Sprintf("gd_seed%05d", i), Workspace: "iia-gate", KeyID: "seed", Case: "ai_investment",
					PreconditionFn: "score_invest_governance", ActionID: "invest_decision", GateState: "ESCALATE", ReasonCode: gate.ReasonQualityBelowRepairThreshold,
					R: 0.2, O: 0.4, Ro: 0.3, Q: 0.225, HumanReadable: "seeded", Evidence: json.RawMessage(`{}`), At: at.Add(time.Duration(i) * time.Millisecond)}
				entry, err := ladder.NewAuditEntry(d.Workspace, "seed", ladder.AuditGateDecision, d.ID, d.At, map[string]any{"seeded": true})
				if err == nil {
					_, err = e.Store.RecordGateDecision(context.Background(), d, entry)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Decisions of another workspace must not show up.
	other := ladder.GateDecisionRecord{ID: "gd_otherws", Workspace: "vantrow-bills", KeyID: "seed", Case: "release_payment", GateState: "PASS", ReasonCode: gate.ReasonPassAboveThreshold, At: at}
	entry, _ := ladder.NewAuditEntry(other.Workspace, "seed", ladder.AuditGateDecision, other.ID, other.At, nil)
	if _, err := e.Store.RecordGateDecision(context.Background(), other, entry); err != nil {
		t.Fatal(err)
	}
	auditBefore, err := e.Store.ListAudit(context.Background(), ladder.AuditQuery{Desc: true, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}

	key := e.Keys["iia-gate/agent"]
	seen := make(map[string]bool, total)
	cursor, pages := "", 0
	for {
		args := map[string]any{"limit": 500}
		if cursor != "" {
			args["cursor"] = cursor
		}
		res := callTool(t, e, key, "gate_history_get", args)
		if res.IsError || res.Structured == nil {
			t.Fatalf("page %d: %s", pages+1, res.Raw)
		}
		pages++
		for _, d := range res.Structured["decisions"].([]any) {
			id := d.(map[string]any)["decision_id"].(string)
			if seen[id] {
				t.Fatalf("page %d repeats %s", pages, id)
			}
			seen[id] = true
		}
		next, _ := res.Structured["next_cursor"].(string)
		if next == "" {
			break
		}
		cursor = next
	}
	if len(seen) != total {
		t.Errorf("paged through %d decisions, want %d (a gap)", len(seen), total)
	}
	if pages != total/500 {
		t.Errorf("%d pages of 500, want %d", pages, total/500)
	}
	for i := range total {
		if !seen[fmt.Sprintf("gd_seed%05d", i)] {
			t.Fatalf("gd_seed%05d missing", i)
		}
	}
	auditAfter, err := e.Store.ListAudit(context.Background(), ladder.AuditQuery{Desc: true, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if auditAfter[0].Seq != auditBefore[0].Seq {
		t.Errorf("paging wrote %d audit records", auditAfter[0].Seq-auditBefore[0].Seq)
	}
}

// failingGateStore is a store whose gate decisions cannot be written, as
// when the disk is full.
type failingGateStore struct{ ladder.Store }

func (failingGateStore) RecordGateDecision(context.Context, ladder.GateDecisionRecord, ladder.AuditEntry) (ladder.GateDecisionRecord, error) {
	return ladder.GateDecisionRecord{}, fmt.Errorf("record gate decision: %w", errors.Join(ladder.ErrUnavailable, errors.New("disk full")))
}

// TestGateAuditFirst: when the decision cannot be logged, authorize answers
// AUDIT_UNAVAILABLE and no verdict at all — not even for a commit a person
// must decide.
func TestGateAuditFirst(t *testing.T) {
	e := testenv.StartWith(t, "", testenv.Options{WrapStore: func(s ladder.Store) ladder.Store { return failingGateStore{s} }})
	key := e.Keys["iia-gate/agent"]
	for _, fn := range []string{"score_invest_governance", "team_capability"} {
		res := callTool(t, e, key, "authorize", map[string]any{"case": "ai_investment", "precondition_fn": fn, "evidence": govEvidence(allGovernance...)})
		if res.RPCError == nil || res.RPCError["message"] != "AUDIT_UNAVAILABLE" || res.RPCError["code"] != float64(ladder.RPCRefused) {
			t.Fatalf("%s: want a JSON-RPC AUDIT_UNAVAILABLE error, got %s", fn, res.Raw)
		}
		for _, w := range []string{"PASS", "gate_state", "decision_id", "BYPASS"} {
			if strings.Contains(string(res.Raw), w) {
				t.Errorf("%s: the refusal carries %q, a verdict: %s", fn, w, res.Raw)
			}
		}
	}
	r := e.Do("POST", "/v1/gate/authorize", key, map[string]any{"case": "ai_investment", "precondition_fn": "score_invest_governance", "evidence": govEvidence(allGovernance...)})
	if r.Status != 503 || r.ErrorCode() != "AUDIT_UNAVAILABLE" || strings.Contains(string(r.Raw), "gate_state") {
		t.Fatalf("REST: %d %s", r.Status, r.Raw)
	}
	h := callTool(t, e, key, "gate_history_get", map[string]any{})
	if ds := h.Structured["decisions"].([]any); len(ds) != 0 {
		t.Errorf("history holds %d decisions", len(ds))
	}
	recs, err := e.Store.ListAudit(context.Background(), ladder.AuditQuery{Kind: ladder.AuditGateDecision})
	if err != nil || len(recs) != 0 {
		t.Errorf("audit gate records: %d, %v", len(recs), err)
	}
}

var (
	keyIDRE  = regexp.MustCompile(`"key_id": "[a-z2-7]{13}"`)
	cursorRE = regexp.MustCompile(`"next_cursor": "[A-Za-z0-9_-]+"`)
)

// TestGateGoldenTranscript replays the seed 003 tool surface — discovery,
// decisions, refusals, history — and compares it with
// testdata/transcripts/gate/ (go test ./mcp -update rewrites it).
func TestGateGoldenTranscript(t *testing.T) {
	e := testenv.Start(t, "")
	type ev = map[string]any
	exs := []exchange{
		{Name: "list_precondition_functions without a case", Key: "iia-gate/agent", Request: call(1, "list_precondition_functions", ev{})},
		{Name: "authorize: PASS after one repair", Key: "iia-gate/agent", Request: call(2, "authorize", ev{"case": "ai_investment", "precondition_fn": "score_invest_governance",
			"evidence": govEvidence("safety_certified", "controllability_data_present", "privacy_compliance_verified", "compliance_before_operations")})},
		{Name: "authorize: ESCALATE", Key: "iia-gate/agent", Request: call(3, "authorize", ev{"case": "ai_investment", "precondition_fn": "score_landing_level", "evidence": ev{"production_deployed": true}})},
		{Name: "authorize: bypass_to_human", Key: "iia-gate/agent", Request: call(4, "authorize", ev{"case": "ai_investment", "precondition_fn": "team_capability", "evidence": ev{}})},
		{Name: "authorize: unknown function", Key: "iia-gate/agent", Request: call(5, "authorize", ev{"case": "ai_investment", "precondition_fn": "score_team", "evidence": ev{}})},
		{Name: "authorize: evidence of the wrong type", Key: "iia-gate/agent", Request: call(6, "authorize", ev{"case": "ai_investment", "precondition_fn": "score_invest_governance", "evidence": ev{"safety_certified": "yes"}})},
		{Name: "gate_history_get: first page", Key: "iia-gate/agent", Request: call(7, "gate_history_get", ev{"limit": 2})},
		{Name: "gate_history_get: filtered", Key: "iia-gate/agent", Request: call(8, "gate_history_get", ev{"gate_state": "PASS"})},
		{Name: "gate_history_get: bad cursor", Key: "iia-gate/agent", Request: call(9, "gate_history_get", ev{"cursor": "Zm9v"})},
	}
	var got []exchange
	for _, ex := range exs {
		r := e.Do("POST", "/mcp", e.Keys[ex.Key], []byte(ex.Request))
		ex.Status = r.Status
		b := normalize(r.Raw)
		b = keyIDRE.ReplaceAll(b, []byte(`"key_id": "KEY_ID"`))
		b = cursorRE.ReplaceAll(b, []byte(`"next_cursor": "CURSOR"`))
		ex.Response = b
		got = append(got, ex)
	}
	checkTranscript(t, "gate", got)
}

// TestAuthorizeContractOverMCP holds authorize to its own input schema and
// to REST's answer: absent evidence is an isError result naming evidence
// (not a scored ESCALATE), and a refusal that is a recorded verdict
// (BYPASS_TO_HUMAN) carries gate_state, reason_code, authorized and
// decision_id in structuredContent, as REST does in data.
func TestAuthorizeContractOverMCP(t *testing.T) {
	e := testenv.Start(t, "")
	key := e.Keys["iia-gate/agent"]
	type ev = map[string]any

	for name, args := range map[string]ev{
		"no evidence":   {"case": "ai_investment", "precondition_fn": "score_landing_level"},
		"null evidence": {"case": "ai_investment", "precondition_fn": "score_landing_level", "evidence": nil},
	} {
		t.Run(name, func(t *testing.T) {
			res := callTool(t, e, key, "authorize", args)
			if !res.IsError || !strings.Contains(res.Text, "INVALID_ARGUMENT") || !strings.Contains(res.Text, "evidence") || res.Structured != nil {
				t.Fatalf("authorize without evidence: %s", res.Raw)
			}
		})
	}
	h := callTool(t, e, key, "gate_history_get", ev{})
	if ds := h.Structured["decisions"].([]any); len(ds) != 0 {
		t.Errorf("authorize without evidence recorded decisions: %s", h.Raw)
	}
	// {} is evidence, scored as such.
	if res := callTool(t, e, key, "authorize", ev{"case": "ai_investment", "precondition_fn": "score_landing_level", "evidence": ev{}}); res.IsError || res.Structured["gate_state"] != "ESCALATE" {
		t.Errorf("authorize with {}: %s", res.Raw)
	}

	t.Run("bypass to human carries the verdict", func(t *testing.T) {
		res := callTool(t, e, key, "authorize", ev{"case": "ai_investment", "precondition_fn": "team_capability", "evidence": ev{}})
		rest := e.Do("POST", "/v1/gate/authorize", key, ev{"case": "ai_investment", "precondition_fn": "team_capability", "evidence": ev{}})
		data, _ := rest.Body["error"].(map[string]any)["data"].(map[string]any)
		if !res.IsError || res.Structured == nil {
			t.Fatalf("bypass over MCP: %s", res.Raw)
		}
		got := map[string]any{}
		want := map[string]any{}
		for _, k := range []string{"gate_state", "reason_code", "authorized"} {
			got[k], want[k] = res.Structured[k], data[k]
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("MCP structuredContent vs REST data (-want +got):\n%s", diff)
		}
		if id, _ := res.Structured["decision_id"].(string); !strings.HasPrefix(id, "gd_") || !strings.Contains(res.Text, id) {
			t.Errorf("decision_id %v (text %q)", res.Structured["decision_id"], res.Text)
		}
		if res.Structured["gate_state"] != "BYPASS_TO_HUMAN" || res.Structured["authorized"] != false {
			t.Errorf("verdict: %v", res.Structured)
		}
		checkContract(t, res.Structured)
	})
}

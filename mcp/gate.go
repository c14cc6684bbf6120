package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/gate"
)

// decideOnly is authorize's annotation set: it writes its decision to the
// audit log (so it is not read-only), changes nothing outside ladder (not
// destructive, closed world), and every call is a new recorded decision
// (not idempotent).
var decideOnly = sdk.ToolAnnotations{ReadOnlyHint: false, IdempotentHint: false, DestructiveHint: ptr(false), OpenWorldHint: ptr(false)}

// gateTools are the evidence gate's tools of seed 003 (DESIGN.md §5), in
// the fixed order of §3.1. Their input schemas name the workspace's case
// ids and functions, so the valid values are in the definition itself.
func (h *Handler) gateTools(workspace string) []toolDef {
	view, _ := h.svc.GateFunctions(workspace, "")
	// A workspace with no gate case has nothing to name in its schemas, and
	// lists the shared ones.
	var listIn, authorizeIn func(map[string]any)
	if len(view.CaseIDs) > 0 || len(view.Cases) > 0 {
		listIn = func(s map[string]any) { setEnum(s, "case", view.CaseIDs) }
		authorizeIn = func(s map[string]any) {
			setEnum(s, "case", view.CaseIDs)
			setEnum(s, "precondition_fn", functionNames(view.Cases))
			setEvidenceExample(s, view.Cases)
		}
	}
	return []toolDef{
		{
			name: "list_precondition_functions", title: "List precondition functions",
			description: "Lists this workspace's evidence gate cases and, per case, the precondition functions authorize accepts: the commit each guards, soft commit, auto-repair, doc, and the JSON Schema of the evidence to send. Call it first (no case: every case id), then authorize. Read-only; records nothing. Commits a person always decides are not listed.",
			in:          "list_precondition_functions.in", out: "list_precondition_functions.out", annotations: readOnly,
			inSchema: listIn,
			call:     h.listPreconditionFunctions,
		},
		{
			name: "authorize", title: "Authorize a commit on evidence",
			description: "Scores evidence for one irreversible commit with the 4D-CQ gate (relevance, coverage, ordering, robustness) and returns gate_state PASS, ESCALATE or BYPASS_TO_HUMAN with reason_code. Call list_precondition_functions first for the case, function and evidence fields. Act only on PASS. Side effect: each decision is written to the audit log before the answer (secrets redacted); nothing is executed.",
			in:          "authorize.in", out: "authorize.out", annotations: decideOnly,
			inSchema: authorizeIn,
			call:     h.authorize,
		},
		{
			name: "gate_history_get", title: "Gate decision history",
			description: "Lists this workspace's recorded gate decisions, newest first, to review why an action was passed or held; filter by case, precondition_fn, action_id (commit), gate_state and time. Pages with limit (default 50, max 500) and the opaque next_cursor. Read-only: never decides or writes; call authorize for a new decision. Evidence shown is redacted.",
			in:          "gate_history_get.in", out: "gate_history_get.out", annotations: readOnly,
			call: h.gateHistoryGet,
		},
	}
}

// setEnum lists the valid values of a string property, when there are any
// (an empty enum would accept nothing).
func setEnum(schema map[string]any, prop string, values []string) {
	if len(values) == 0 {
		return
	}
	p, _ := schema["properties"].(map[string]any)[prop].(map[string]any)
	if p == nil {
		return
	}
	p["enum"] = values
	p["examples"] = []any{values[0]}
}

func functionNames(cases []ladder.GateCaseInfo) []string {
	var out []string
	seen := map[string]bool{}
	for _, c := range cases {
		for _, f := range c.Functions {
			if !seen[f.PreconditionFn] {
				seen[f.PreconditionFn] = true
				out = append(out, f.PreconditionFn)
			}
		}
	}
	return out
}

// setEvidenceExample makes the evidence example one for this workspace's
// first function, built from its evidence schema, and the function example
// match it.
func setEvidenceExample(schema map[string]any, cases []ladder.GateCaseInfo) {
	if len(cases) == 0 || len(cases[0].Functions) == 0 {
		return
	}
	f := cases[0].Functions[0]
	props, _ := f.EvidenceSchema["properties"].(map[string]any)
	ex := map[string]any{}
	names := make([]string, 0, len(props))
	for name := range props {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p, _ := props[name].(map[string]any)
		switch p["type"] {
		case "boolean":
			ex[name] = true
		case "string":
			if len(ex) < 8 {
				ex[name] = "…"
			}
		case "number", "integer":
			ex[name] = 1
		}
	}
	ps := schema["properties"].(map[string]any)
	if ev, ok := ps["evidence"].(map[string]any); ok {
		ev["examples"] = []any{ex}
	}
	if fn, ok := ps["precondition_fn"].(map[string]any); ok {
		fn["examples"] = []any{f.PreconditionFn}
	}
	if c, ok := ps["case"].(map[string]any); ok {
		c["examples"] = []any{cases[0].ID}
	}
}

func (h *Handler) listPreconditionFunctions(ctx context.Context, p ladder.Principal, args json.RawMessage) (string, any, error) {
	var in struct {
		Case string `json:"case"`
	}
	if err := decodeArgs(args, &in); err != nil {
		return "", nil, err
	}
	v, err := h.svc.GateFunctions(p.Workspace, in.Case)
	if err != nil {
		return "", nil, err
	}
	return v.Sentence, v, nil
}

func (h *Handler) authorize(ctx context.Context, p ladder.Principal, args json.RawMessage) (string, any, error) {
	var in ladder.AuthorizeRequest
	if err := decodeArgs(args, &in); err != nil {
		return "", nil, err
	}
	res, err := h.svc.Authorize(ctx, p, in)
	if err != nil {
		return "", heldVerdict(err, p, in), err
	}
	text := fmt.Sprintf("%s (reason_code %s, decision_id %s.)", res.HumanReadable, res.ReasonCode, res.DecisionID)
	if res.GateState != gate.StatePass {
		text += " Not authorized: do not perform the action; only gate_state PASS authorizes it."
	}
	return text, res, nil
}

// heldVerdict is the structured content of a refusal that is a recorded
// verdict (BYPASS_TO_HUMAN): the fields REST sends in data, in the shape of
// authorize's output schema, so a client that reads only structuredContent
// sees gate_state, authorized false and the decision_id. Other refusals
// have none.
func heldVerdict(err error, p ladder.Principal, in ladder.AuthorizeRequest) any {
	e := ladder.AsError(err)
	state, _ := e.Data["gate_state"].(string)
	if state == "" {
		return nil
	}
	v := ladder.GateResult{GateState: state, SchemaVersion: gate.SchemaVersion, Route: state, Authorized: false,
		HumanReadable: e.Message, Case: in.Case, PreconditionFn: in.PreconditionFn, KeyID: p.KeyID}
	v.ActionID, _ = e.Data["action_id"].(string)
	v.At, _ = e.Data["at"].(time.Time)
	v.ReasonCode, _ = e.Data["reason_code"].(string)
	v.DecisionID, _ = e.Data["decision_id"].(string)
	return v
}

func (h *Handler) gateHistoryGet(ctx context.Context, p ladder.Principal, args json.RawMessage) (string, any, error) {
	var in ladder.GateHistoryRequest
	if err := decodeArgs(args, &in); err != nil {
		return "", nil, err
	}
	page, err := h.svc.GateHistory(ctx, p.Workspace, in)
	if err != nil {
		return "", nil, err
	}
	return page.Sentence, page, nil
}

package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/service"
)

// capabilityTools are the workspace's served capabilities, one tool each,
// named by the capability id (or its portable form), then approval_status.
func (h *Handler) capabilityTools(ctx context.Context, workspace string) []toolDef {
	w, ok := h.svc.Workspace(workspace)
	if !ok {
		return nil
	}
	var out []toolDef
	lanes := h.lanes(ctx, workspace)
	for _, c := range w.Capabilities {
		if !c.Served {
			continue
		}
		name := c.ID
		if h.opts.ToolNames == NamesPortable {
			name = portable(c.ID)
		}
		id := c.ID
		out = append(out, toolDef{
			name: name, alias: c.ID, title: c.Title, description: h.capabilityDescription(workspace, c, lanes),
			inDoc: h.capabilitySchema(workspace, c), out: "capability_call.out", annotations: capabilityAnnotations(c),
			call: func(ctx context.Context, p ladder.Principal, args json.RawMessage) (string, any, error) {
				wait, err := callWait(ctx)
				if err != nil {
					return "", nil, err
				}
				if wait > 0 {
					extendWrite(ctx, wait)
				}
				res, err := h.svc.CallCapabilityWait(ctx, p, id, args, wait)
				if err != nil {
					return "", nil, err
				}
				return callText(res), res, nil
			},
		})
	}
	if len(out) > 0 {
		out = append(out, toolDef{
			name: "approval_status", title: "Approval status",
			description: "Tells what became of an approval request this key made: pending, approved (and the result, or why it could not run), rejected with the person's reason, or expired — never a silent denial. Call it with the approval_id a capability call returned; pass wait (up to 60 s) to block until a person decides instead of polling. Read-only.",
			in:          "approval_status.in", out: "approval.out", annotations: readOnly,
			call: func(ctx context.Context, p ladder.Principal, args json.RawMessage) (string, any, error) {
				var in struct {
					ApprovalID string `json:"approval_id"`
					Wait       int    `json:"wait"`
				}
				if err := decodeArgs(args, &in); err != nil {
					return "", nil, err
				}
				wait := time.Duration(in.Wait) * time.Second
				if wait > 0 && wait <= service.MaxApprovalWait {
					extendWrite(ctx, wait)
				}
				a, err := h.svc.WaitApproval(ctx, p, in.ApprovalID, wait)
				if err != nil {
					return "", nil, err
				}
				text := fmt.Sprintf("Approval %s for %s is %s.", a.ID, a.Capability, a.Status)
				switch {
				case a.Status == ladder.ApprovalRejected:
					text += " Reason: " + a.DecisionReason
				case a.Status == ladder.ApprovalApproved && a.ExecError != "":
					text += " It was approved but did not run: " + a.ExecError
				case a.Status == ladder.ApprovalApproved:
					text += " It ran."
				case a.Status == ladder.ApprovalExpired:
					text += " Nobody decided in time; nothing ran."
				}
				return text, a, nil
			},
		})
	}
	return out
}

// callText is a capability call's text content: the sentence, then the
// upstream's result as JSON, since many clients give the model the text
// only and never show it structuredContent.
func callText(res ladder.CallResult) string {
	if len(res.Result) == 0 {
		return res.Message
	}
	// Room for the result as it came (compacting only shortens it), so the
	// text is built in one buffer.
	b := make([]byte, 0, len(res.Message)+len(" Result: ")+len(res.Result))
	b, err := ladder.AppendCompactJSON(append(append(b, res.Message...), " Result: "...), res.Result, false)
	if err != nil {
		return res.Message
	}
	return string(b)
}

// capabilityAnnotations say what a capability call may do: ladder records
// every call, and an upstream may change things outside ladder.
func capabilityAnnotations(c ladder.Capability) sdk.ToolAnnotations {
	external := c.Executor.Kind == ladder.ExecHTTP || c.Executor.Kind == ladder.ExecMCP
	if c.ReadOnly {
		return sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, DestructiveHint: ptr(false), OpenWorldHint: ptr(external)}
	}
	return sdk.ToolAnnotations{ReadOnlyHint: false, IdempotentHint: false, DestructiveHint: ptr(external), OpenWorldHint: ptr(external)}
}

// lanes returns the current lane of every step of the workspace, keyed
// "queue/step" and "step".
func (h *Handler) lanes(ctx context.Context, workspace string) map[string]ladder.Lane {
	out := map[string]ladder.Lane{}
	states, err := h.svc.StepStates(ctx, workspace)
	if err != nil {
		return out
	}
	for _, st := range states {
		out[st.Queue+"/"+st.Step] = st.Lane
		out[st.Step] = st.Lane
	}
	return out
}

// laneSignature summarizes the lanes capability descriptions mention, so a
// workspace's tools are rebuilt when one changes.
func (h *Handler) laneSignature(ctx context.Context, workspace string) string {
	w, ok := h.svc.Workspace(workspace)
	if !ok {
		return ""
	}
	lanes := h.lanes(ctx, workspace)
	var parts []string
	for _, c := range w.Capabilities {
		if c.Served && c.Step != "" {
			parts = append(parts, c.Step+"="+string(lanes[c.Step]))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// capabilityDescription is the tool's description: what it does (from the
// config), then whether a person must approve, which step governs it and
// its lane now, and what evidence it needs. It stays under 500 characters.
func (h *Handler) capabilityDescription(workspace string, c ladder.Capability, lanes map[string]ladder.Lane) string {
	var tail []string
	if c.HumanGate {
		tail = append(tail, "Human gate: a call creates an approval request and runs nothing; poll approval_status.")
	}
	if c.Step != "" {
		lane := lanes[c.Step]
		what := map[ladder.Lane]string{
			ladder.LaneAuto:      "runs at once",
			ladder.LanePropose:   "becomes a proposal a person approves",
			ladder.LaneShadow:    "is refused (STEP_NEEDS_PERSON) and kept for comparison",
			ladder.LaneHumanOnly: "is refused (STEP_NEEDS_PERSON)",
		}[lane]
		tail = append(tail, fmt.Sprintf("Governed by step %s, now %s: a call %s.", c.Step, lane, what))
	}
	if c.Gate != nil {
		tail = append(tail, fmt.Sprintf("Needs evidence for %s/%s (see list_precondition_functions); anything but PASS is GATE_HELD.", c.Gate.Case, c.Gate.Fn))
	}
	tail = append(tail, "Recorded in the audit log; idempotency_key makes retries safe.")
	suffix := " " + strings.Join(tail, " ")
	base := strings.Join(strings.Fields(c.Description), " ")
	if base == "" {
		base = c.Title + "."
	}
	if room := 500 - len(suffix); len(base) > room {
		cut := strings.LastIndex(base[:max(room-1, 0)], " ")
		if cut < 0 {
			cut = max(room-1, 0)
		}
		base = base[:cut] + "…"
	}
	d := base + suffix
	if len(d) < 150 {
		d += " Call tools/list for the other tools of this workspace."
	}
	return d
}

// capabilitySchema generates a capability tool's input schema: the
// declared payload, the scope fields, evidence when a gate is declared, and
// idempotency_key. An extra key merges into the payload (seed 004).
func (h *Handler) capabilitySchema(workspace string, c ladder.Capability) map[string]any {
	payload := map[string]any{"type": "object", "description": "The call's payload. Its fields may also be given at the top level; an extra argument key merges into the payload."}
	if props, ok := c.Payload["properties"]; ok {
		payload["properties"] = props
	}
	if req, ok := c.Payload["required"]; ok {
		payload["required"] = req
	}
	props := map[string]any{
		"payload":         payload,
		"idempotency_key": map[string]any{"type": "string", "description": "A key unique to this action (e.g. the bill id). A repeat with the same key and payload returns the first result and never runs again; the same key with another payload is refused (IDEMPOTENCY_KEY_REUSED).", "maxLength": 200},
	}
	required := []any{}
	w, _ := h.svc.Workspace(workspace)
	for _, f := range c.ScopeFields {
		p := map[string]any{"type": "string", "description": fmt.Sprintf("Scope: the %s this call is for. It must belong to this key's workspace, or the call is refused with WORKSPACE_REFUSED.", f)}
		if w != nil && len(w.Scopes[f]) > 0 {
			p["examples"] = w.Scopes[f]
		}
		props[f] = p
		required = append(required, f)
	}
	if c.Gate != nil {
		ev := map[string]any{"type": "object", "description": fmt.Sprintf("Evidence for the gate %s/%s; list_precondition_functions describes every field.", c.Gate.Case, c.Gate.Fn)}
		if view, err := h.svc.GateFunctions(workspace, c.Gate.Case); err == nil {
			for _, cs := range view.Cases {
				for _, fn := range cs.Functions {
					if fn.PreconditionFn == c.Gate.Fn {
						if p, ok := fn.EvidenceSchema["properties"]; ok {
							ev["properties"] = p
						}
					}
				}
			}
		}
		props["evidence"] = ev
		required = append(required, "evidence")
	}
	s := map[string]any{"type": "object", "properties": props, "additionalProperties": true}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

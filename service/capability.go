package service

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/gate"
	"github.com/ladderhq/ladder/internal/strictjson"
	"github.com/ladderhq/ladder/internal/tracing"
	"github.com/ladderhq/ladder/upstream"
)

// Runner executes capability calls; upstream.Pool is the implementation.
type Runner interface {
	Execute(ctx context.Context, x ladder.Executor, req upstream.Request) (upstream.Result, error)
}

// reserved argument names of a capability tool; any other key that is not
// a scope field merges into the payload (seed 004).
const (
	argPayload        = "payload"
	argEvidence       = "evidence"
	argIdempotencyKey = "idempotency_key"
)

// FindCapability returns a capability of the workspace by id or by its
// portable name (':' spelled '_'), served or not.
func (s *Service) FindCapability(workspace, name string) (ladder.Capability, bool) {
	w, ok := s.workspaces[workspace]
	if !ok {
		return ladder.Capability{}, false
	}
	for _, c := range w.Capabilities {
		if c.ID == name || strings.ReplaceAll(c.ID, ":", "_") == name {
			return c, true
		}
	}
	return ladder.Capability{}, false
}

// capabilityArgs are a call's arguments split into their parts.
type capabilityArgs struct {
	payload        map[string]any
	scope          map[string]string
	evidence       json.RawMessage
	idempotencyKey string
}

func argError(field, msg, hint string) *ladder.Error {
	return ladder.InvalidField(field, fmt.Sprintf("The argument %s %s.", field, msg), hint)
}

// splitArgs reads tools/call arguments (or a REST body): the payload, the
// scope fields, the evidence, the idempotency key; an extra key merges
// into the payload.
func splitArgs(c ladder.Capability, raw json.RawMessage) (capabilityArgs, error) {
	a := capabilityArgs{payload: map[string]any{}, scope: map[string]string{}}
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		raw = json.RawMessage("{}")
	}
	if err := strictjson.Check(raw); err != nil {
		return a, argError("arguments", err.Error(), "send one JSON object")
	}
	// The members as sent, without encoding/json's reflection and second
	// scan; an escaped key (whose name needs unescaping) goes through
	// encoding/json, which reads the same members.
	args := map[string]json.RawMessage{}
	if !ladder.JSONObjectMembers(raw, func(key []byte, escaped bool, v []byte) bool {
		args[string(key)] = v
		return !escaped
	}) {
		args = nil
		if err := json.Unmarshal(raw, &args); err != nil {
			return a, argError("arguments", "not a JSON object", "send the payload, the scope fields and the other arguments as one object")
		}
	}
	if p, ok := args[argPayload]; ok {
		if a.payload = decodeObject(p); a.payload == nil {
			return a, argError(argPayload, "is not a JSON object", "send payload as an object, e.g. {}")
		}
	}
	for k, v := range args {
		if r, ok := misspelled(c, k); ok {
			return a, argError(k, fmt.Sprintf("differs only in case from %q", r), fmt.Sprintf("send %s, spelled as documented", r))
		}
		switch {
		case k == argPayload:
		case k == argIdempotencyKey:
			if err := unmarshalString(v, &a.idempotencyKey); err != nil || len(a.idempotencyKey) > 200 {
				return a, argError(k, "must be a string of at most 200 characters", "send a key unique to this action, e.g. the bill id")
			}
		case k == argEvidence && c.Gate != nil:
			a.evidence = v
		case slices.Contains(c.ScopeFields, k):
			var sv string
			if err := unmarshalString(v, &sv); err != nil {
				return a, argError(k, "must be a string", "send the scope value as a string")
			}
			a.scope[k] = sv
		default:
			// Fold as the strict decoder does: bill_id inside payload and
			// Bill_id beside it are one field sent twice.
			for pk := range a.payload {
				if strictjson.FoldKey(pk) == strictjson.FoldKey(k) {
					return a, argError(k, fmt.Sprintf("is given both at the top level and inside payload (as %q)", pk), "send it once, spelled as documented")
				}
			}
			val, err := decodeValue(v)
			if err != nil {
				return a, argError(k, "is not valid JSON", "fix the value")
			}
			a.payload[k] = val
		}
	}
	for _, f := range c.ScopeFields {
		if a.scope[f] == "" {
			return a, argError(f, "is required", fmt.Sprintf("send the %s this call is for; the tool's input schema lists the scope fields", f))
		}
	}
	if _, ok := a.payload[argEvidence]; ok && c.Gate != nil {
		// Evidence has one place, the evidence argument the gate scores;
		// inside the payload it would reach the upstream unscored.
		return a, argError("payload.evidence", "is not a payload field: evidence goes in the evidence argument, beside the payload", fmt.Sprintf("send the evidence for %s/%s once, as the top-level evidence argument", c.Gate.Case, c.Gate.Fn))
	}
	if c.Gate != nil && len(a.evidence) == 0 {
		return a, argError(argEvidence, "is required", fmt.Sprintf("this capability is gated by %s/%s: call {{gate_functions}} with case %q to see the evidence to send", c.Gate.Case, c.Gate.Fn, c.Gate.Case))
	}
	return a, nil
}

// decodeValue reads one JSON value of a call's arguments as a json.Decoder
// with UseNumber does (numbers stay json.Number, so an amount keeps its
// digits), without a decoder for a scalar: each decoder costs a read
// buffer of its own, a cost every call paid for each argument.
func decodeValue(v []byte) (any, error) {
	if x, ok := ladder.JSONScalar(v); ok {
		return x, nil
	}
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	var x any
	err := dec.Decode(&x)
	return x, err
}

// decodeObject reads a JSON object as decodeValue would, member by member,
// or returns nil when raw is not one (null included). A key that holds an
// escape sends the whole object through the decoder, which unescapes it.
func decodeObject(raw []byte) map[string]any {
	m := map[string]any{}
	if ladder.JSONObjectMembers(raw, func(key []byte, escaped bool, v []byte) bool {
		if escaped {
			return false
		}
		x, err := decodeValue(v)
		m[string(key)] = x
		return err == nil
	}) {
		return m
	}
	x, err := decodeValue(raw)
	if m, ok := x.(map[string]any); ok && err == nil {
		return m
	}
	return nil
}

// unmarshalString is json.Unmarshal into a string, without encoding/json's
// reflection for a string JSONString reads.
func unmarshalString(v []byte, dst *string) error {
	if s, ok := ladder.JSONString(v); ok {
		*dst = s
		return nil
	}
	return json.Unmarshal(v, dst)
}

// misspelled reports whether an argument name differs only in case from a
// reserved argument or a scope field of c (Idempotency_Key, Program): such a
// key would otherwise merge into the payload as an ordinary field.
func misspelled(c ladder.Capability, k string) (string, bool) {
	fk := strictjson.FoldKey(k)
	reserved := [...]string{argPayload, argEvidence, argIdempotencyKey}
	for _, names := range [2][]string{reserved[:], c.ScopeFields} {
		for _, r := range names {
			if k != r && strictjson.FoldKey(r) == fk {
				return r, true
			}
		}
	}
	return "", false
}

// scopeInPayload refuses a payload that carries a scope name of the
// workspace (program, relationship), or workspace or scope, at its top
// level: scope travels only as scope, checked against the key's workspace,
// and a payload field of the same name would reach the upstream beside it.
func (s *Service) scopeInPayload(workspace string, payload map[string]any) error {
	names := []string{"workspace", "scope"}
	if w, ok := s.workspaces[workspace]; ok {
		names = append(names, sortedKeys(w.Scopes)...)
	}
	for k := range payload {
		for _, n := range names {
			if strictjson.FoldKey(k) == strictjson.FoldKey(n) {
				return argError("payload."+k, fmt.Sprintf("is a scope name (%s); scope travels only as scope, never inside the payload", n),
					fmt.Sprintf("remove %s from the payload; send the call's scope in its scope fields, which are checked against this key's workspace", k))
			}
		}
	}
	return nil
}

// schemaCache keeps resolved payload schemas per capability.
type schemaCache struct {
	mu sync.Mutex
	m  map[string]*jsonschema.Resolved
}

func (s *Service) payloadSchema(workspace string, c ladder.Capability) (*jsonschema.Resolved, error) {
	s.schemas.mu.Lock()
	defer s.schemas.mu.Unlock()
	key := workspace + "\x00" + c.ID
	if r, ok := s.schemas.m[key]; ok {
		return r, nil
	}
	if s.schemas.m == nil {
		s.schemas.m = map[string]*jsonschema.Resolved{}
	}
	var sch jsonschema.Schema
	src := c.Payload
	if src == nil {
		src = map[string]any{"type": "object"}
	}
	data, err := json.Marshal(src)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, &sch); err != nil {
		return nil, fmt.Errorf("payload schema of %s: %w", c.ID, err)
	}
	r, err := sch.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("payload schema of %s: %w", c.ID, err)
	}
	s.schemas.m[key] = r
	return r, nil
}

// ValidatePayload checks a payload against the capability's declared
// schema; a fault names the field.
func (s *Service) ValidatePayload(workspace string, c ladder.Capability, payload map[string]any) error {
	data, _ := json.Marshal(payload)
	return s.validatePayloadJSON(workspace, c, data)
}

// validatePayloadJSON is ValidatePayload of the payload's JSON (a call's
// canonical payload: one encoding of it serves both).
func (s *Service) validatePayloadJSON(workspace string, c ladder.Capability, data []byte) error {
	r, err := s.payloadSchema(workspace, c)
	if err != nil {
		return err
	}
	// Read back so numbers are float64, as the validator expects.
	var v any
	_ = json.Unmarshal(data, &v)
	if err := r.Validate(v); err != nil {
		field := "payload"
		props, _ := c.Payload["properties"].(map[string]any)
		msg := err.Error()
		// Name the field the validator names first, so the answer does not
		// depend on map order when several are at fault.
		first := len(msg)
		for name := range props {
			for _, spelled := range []string{"\"" + name + "\"", "/" + name} {
				if i := strings.Index(msg, spelled); i >= 0 && i < first {
					first, field = i, "payload."+name
				}
			}
		}
		return &ladder.Error{Code: ladder.CodeInvalidArgument, Message: fmt.Sprintf("The payload does not match the payload schema of %s at %s: %s.", c.ID, field, msg),
			Hint: "fix the field; {{payload_schema}} describes every payload field", Data: map[string]any{"field": field}}
	}
	return nil
}

// checkScope refuses a scope value that is not this workspace's, without
// telling whether it belongs to another workspace or to none.
func (s *Service) checkScope(workspace string, scope map[string]string) error {
	w := s.workspaces[workspace]
	for field, v := range scope {
		if !slices.Contains(w.Scopes[field], v) {
			return &ladder.Error{Code: ladder.CodeWorkspaceRefused, Message: fmt.Sprintf("The %s sent does not belong to this key's workspace, so nothing was done.", field),
				Hint: fmt.Sprintf("send a %s of this key's workspace, or use a key of the workspace the %s belongs to", field, field)}
		}
	}
	return nil
}

// itemFor names the work item of a step-tied call for its route: the
// payload field the capability declares (item: bill_id), so the route and
// its audit sample fall on the business item, whatever idempotency key the
// agent sends. A capability built without an item field (not from a config
// file, which requires one) routes by a hash of the payload and scope.
func itemFor(c ladder.Capability, a capabilityArgs) (string, error) {
	if c.Item == "" {
		data, _ := json.Marshal(map[string]any{"payload": a.payload, "scope": a.scope})
		sum := sha256.Sum256(data)
		return "call-" + hex.EncodeToString(sum[:8]), nil
	}
	field := "payload." + strings.ReplaceAll(strings.TrimPrefix(c.Item, "/"), "/", ".")
	path, err := ladder.ItemPath(c.Item)
	if err != nil {
		return "", fmt.Errorf("capability %s: %w", c.ID, err)
	}
	item, ok := ladder.ItemOf(a.payload, path)
	switch {
	case !ok:
		return "", argError(field, "is required and must be a non-empty string or an integer", fmt.Sprintf("send the id of the work item this %s call is for in %s", c.ID, field))
	case len(item) > 512:
		return "", argError(field, "is longer than 512 characters", "send the item's id, not its content")
	}
	return item, nil
}

// CallCapability carries out one capability call along the path of
// DESIGN.md §6: capability → validate → scope → human gate → step lane →
// evidence gate → audit write → execute once → record the result. The
// step's lane in force when the call commits decides it: when a lane change
// lands between the route and the commit, the call is decided again.
func (s *Service) CallCapability(ctx context.Context, p ladder.Principal, name string, raw json.RawMessage) (ladder.CallResult, error) {
	c, ok := s.FindCapability(p.Workspace, name)
	if !ok {
		return ladder.CallResult{}, &ladder.Error{Code: ladder.CodeUnknownCapability, Message: "There is no capability of that name in this workspace.", Hint: fmt.Sprintf("no capability %q in this workspace; {{capabilities}} lists what this key may call", name)}
	}
	if !c.Served {
		return ladder.CallResult{}, &ladder.Error{Code: ladder.CodeCapabilityNotServed, Message: "The capability is declared but not served yet, so nothing was done.", Hint: fmt.Sprintf("%s is declared but not served yet; it cannot be called until the operator serves it", c.ID)}
	}
	a, err := splitArgs(c, raw)
	if err != nil {
		return ladder.CallResult{}, err
	}
	if err := s.scopeInPayload(p.Workspace, a.payload); err != nil {
		return ladder.CallResult{}, err
	}
	payload, err := ladder.CanonicalJSON(a.payload)
	if err != nil {
		return ladder.CallResult{}, err
	}
	if err := s.validatePayloadJSON(p.Workspace, c, payload); err != nil {
		return ladder.CallResult{}, err
	}
	if err := s.checkScope(p.Workspace, a.scope); err != nil {
		return ladder.CallResult{}, err
	}
	if err := argSizes(c, payload, a.evidence); err != nil {
		return ladder.CallResult{}, err
	}
	var st ladder.Step
	if c.Step != "" {
		queue, step, _ := strings.Cut(c.Step, "/")
		if step == "" {
			queue, step = "", queue
		}
		if st, err = s.FindStep(p.Workspace, queue, step); err != nil {
			return ladder.CallResult{}, err
		}
	}
	for attempt := 1; ; attempt++ {
		res, err := s.callOnce(ctx, p, c, st, a, payload)
		if errors.Is(err, ladder.ErrLaneChanged) {
			if attempt < laneAttempts {
				continue
			}
			return ladder.CallResult{}, laneChanging(st)
		}
		return res, err
	}
}

// callOnce decides and carries out a call once; ErrLaneChanged means the
// step's lane changed before the call committed, and nothing was done.
func (s *Service) callOnce(ctx context.Context, p ladder.Principal, c ladder.Capability, st ladder.Step, a capabilityArgs, payload json.RawMessage) (ladder.CallResult, error) {
	this := request{payload: payload, scope: a.scope, evidence: evidenceHash(a.evidence)}
	ap := ladder.Approval{Workspace: p.Workspace, Capability: c.ID, Payload: payload, Scope: a.scope, Evidence: a.evidence, IdempotencyKey: a.idempotencyKey, RequestedBy: p.KeyID}
	res := ladder.CallResult{Capability: c.ID}

	// 0. A repeated idempotency key answers with what became of its first
	// call or approval, and never decides anew: a retry after a lane change
	// must not turn a call that ran into a proposal, nor a pending proposal
	// into a call that runs.
	if a.idempotencyKey != "" {
		if done, err := s.store.CallByKey(ctx, p.Workspace, c.ID, a.idempotencyKey); err == nil {
			if err := sameRequest(a.idempotencyKey, requestOfCall(done), this, "call_id", done.ID); err != nil {
				return ladder.CallResult{}, err
			}
			return s.replay(done, res)
		} else if !errors.Is(err, ladder.ErrNotFound) {
			return ladder.CallResult{}, storeErr("find call", err)
		}
		if first, err := s.store.ApprovalByKey(ctx, p.Workspace, c.ID, a.idempotencyKey); err == nil {
			if err := sameRequest(a.idempotencyKey, requestOfApproval(first), this, "approval_id", first.ID); err != nil {
				return ladder.CallResult{}, err
			}
			switch {
			case first.Kind == ladder.ApprovalEscalate:
				// Held by the gate: the same evidence is scored again below
				// and the hold answered with this approval.
			case first.Status == ladder.ApprovalShadow:
				return ladder.CallResult{}, needsPerson(first.Step, first.RouteID, ladder.LaneShadow, first.ID)
			default:
				res.RouteID, res.GateDecisionID = first.RouteID, first.GateDecisionID
				return s.approvalAnswer(first, res), nil
			}
		} else if !errors.Is(err, ladder.ErrNotFound) {
			return ladder.CallResult{}, storeErr("find approval", err)
		}
	}

	// 1. Who may act: a human gate and the step's lane (for the item the
	// payload names) decide whether this becomes an approval, runs alone,
	// or is a person's work.
	var (
		guard *ladder.LaneGuard
		// The call begun with its route (RouteCreated), and the call
		// this request asked to record.
		begunCall ladder.RouteCall
		begunReq  ladder.Call
	)
	proposal := c.HumanGate
	if c.HumanGate {
		ap.Kind, ap.Reason = ladder.ApprovalHumanGate, c.ID+" is a human gate: a person approves every call."
	} else if c.Step != "" {
		item, err := itemFor(c, a)
		if err != nil {
			return ladder.CallResult{}, err
		}
		// The payload is the agent's output for this item: the route keeps
		// it, so a sampled audit or a shadow comparison shows a person what
		// the agent did.
		// A call that may run alone (no evidence gate to score between the
		// route and the call) is recorded with its route in one
		// transaction: one durable write before it runs, not two.
		commit := s.recordRoute
		if c.Gate == nil {
			// The write is the begun record's span (beside the route's, as
			// on every call), which holds its group-commit wait.
			commit = func(rctx context.Context, r ladder.Route, re ladder.AuditEntry) (ladder.Route, error) {
				if r.Decision != ladder.DecisionActAlone {
					return s.recordRoute(rctx, r, re)
				}
				call := s.newCall(p, c, a, payload, this.evidence, r.ID, "", &ladder.LaneGuard{Key: ladder.StepKey{Workspace: p.Workspace, Queue: r.Queue, Step: r.Step}, LaneEpoch: r.LaneEpoch})
				call, ce, err := s.callEntry(p.KeyID, c, call)
				if err != nil {
					return ladder.Route{}, err
				}
				actx, sp := s.auditSpan(ctx, c, call)
				rc, err := s.store.RouteAndBeginCall(actx, r, re, call, ce)
				sp.End(err)
				if err != nil {
					return ladder.Route{}, err
				}
				if rc.RouteCreated {
					begunCall, begunReq = rc, call
				}
				return rc.Route, nil
			}
		}
		rt, err := s.routeItemWith(ctx, p, st, item, payload, commit)
		if err != nil {
			return ladder.CallResult{}, err
		}
		res.RouteID, res.Decision, res.Lane = rt.ID, string(rt.Decision), string(rt.Lane)
		ap.RouteID, ap.Queue, ap.Step, ap.Item = rt.ID, rt.Queue, rt.Step, rt.Item
		switch rt.Decision {
		case ladder.DecisionActAlone:
			if begunCall.RouteCreated {
				// Guarded and recorded with the route, in its transaction.
				return s.begun(ctx, p.KeyID, c, begunReq, begunCall.Call, begunCall.CallCreated, res)
			}
			guard = &ladder.LaneGuard{Key: ladder.StepKey{Workspace: p.Workspace, Queue: rt.Queue, Step: rt.Step}, LaneEpoch: rt.LaneEpoch}
		case ladder.DecisionPropose:
			proposal = true
			ap.Kind, ap.Reason = ladder.ApprovalProposal, rt.Reason
		default:
			var recorded string
			if rt.Lane == ladder.LaneShadow {
				// Shadow: keep the agent's proposal so a person's handling of
				// the item can be compared with it, up to the key's cap of
				// unreviewed ones for the step.
				ap.Kind, ap.Status, ap.Reason = ladder.ApprovalShadowRec, ladder.ApprovalShadow, rt.Reason
				rec, err := s.storeApproval(ctx, p, ap)
				if errors.Is(err, ladder.ErrTooManyShadow) || errors.Is(err, ladder.ErrRouteReviewed) {
					return ladder.CallResult{}, s.shadowNotRecorded(ctx, p, rt, err)
				}
				if err != nil {
					return ladder.CallResult{}, err
				}
				recorded = rec.ID
			}
			return ladder.CallResult{}, needsPerson(rt.Step, rt.ID, rt.Lane, recorded)
		}
	}

	// 2. The evidence gate, for the exact action, before anything that may
	// run is recorded: a proposal and a human-gate request carry the verdict
	// their evidence got, and evidence the gate refuses (or that fails its
	// schema) never becomes an approval a person could run.
	if c.Gate != nil {
		g, err := s.gateCall(ctx, p, c, a.payload, payload, a.evidence)
		if err != nil {
			return ladder.CallResult{}, err
		}
		res.GateDecisionID = g.DecisionID
		if g.GateState != gate.StatePass {
			return ladder.CallResult{}, s.held(ctx, p, ap, g, res)
		}
		ap.GateDecisionID, ap.GateState = g.DecisionID, g.GateState
	}
	if proposal {
		return s.requestApproval(ctx, p, ap, res)
	}

	// 3. Audit first, then execute exactly once. The guard makes the store
	// refuse the commit if the step's lane changed since the route.
	call := s.newCall(p, c, a, payload, this.evidence, res.RouteID, res.GateDecisionID, guard)
	return s.execute(ctx, p.KeyID, c, call, res)
}

// newCall is the running call a decided capability call records.
func (s *Service) newCall(p ladder.Principal, c ladder.Capability, a capabilityArgs, payload json.RawMessage, evidence, routeID, gateDecisionID string, guard *ladder.LaneGuard) ladder.Call {
	return ladder.Call{ID: ladder.NewID("cl"), Workspace: p.Workspace, Capability: c.ID, KeyID: p.KeyID, IdempotencyKey: a.idempotencyKey,
		Status: ladder.CallRunning, Payload: payload, Scope: a.scope, EvidenceSHA256: evidence,
		RouteID: routeID, GateDecisionID: gateDecisionID, Guard: guard}
}

// gateCall runs the evidence gate on a call's evidence for the exact action
// its payload describes: each bound evidence field must name what the
// payload acts on (gate.AuthorizeBound), and the recorded decision carries
// the payload's hash. Only a PASS lets the call commit.
func (s *Service) gateCall(ctx context.Context, p ladder.Principal, c ladder.Capability, payload map[string]any, canonical, evidence json.RawMessage) (g ladder.GateResult, err error) {
	ctx, sp := tracing.Start(ctx, s.tracer, tracing.SpanGate)
	defer func() {
		if sp.Recording() {
			sp.Set(tracing.Workspace.String(p.Workspace), tracing.Capability.String(c.ID), tracing.GateState.String(string(g.GateState)), tracing.GateDecisionID.String(g.DecisionID))
		}
		sp.End(err)
	}()
	bound := make(map[string]string, len(c.Gate.Bind))
	for field, at := range c.Gate.Bind {
		path, err := ladder.ItemPath(at)
		if err != nil {
			return ladder.GateResult{}, fmt.Errorf("capability %s: bind %s: %w", c.ID, field, err)
		}
		// Both sides of the comparison are spelled by gate.BoundValue.
		v, _ := ladder.ValueAt(payload, path)
		bound[field], _ = gate.BoundValue(v)
	}
	sum := sha256.Sum256(canonical)
	return s.authorize(ctx, p, ladder.AuthorizeRequest{Case: c.Gate.Case, PreconditionFn: c.Gate.Fn, Evidence: evidence}, false, bound, hex.EncodeToString(sum[:]))
}

// held answers a call the evidence gate did not pass: nothing runs. A
// verdict on the evidence itself leaves an escalation a person can see
// (and approve only once the evidence passes); evidence that names another
// action leaves none, since no verdict on it can ever authorize this one.
func (s *Service) held(ctx context.Context, p ladder.Principal, ap ladder.Approval, g ladder.GateResult, res ladder.CallResult) error {
	data := map[string]any{"gate_state": g.GateState, "reason_code": g.ReasonCode, "decision_id": g.DecisionID, "authorized": false, "Q": g.Q,
		"cq_scores": g.CQScores, "human_readable": g.HumanReadable, "route_id": res.RouteID}
	hint := "nothing ran; improve the evidence (list_precondition_functions shows what counts)"
	if g.ReasonCode == gate.ReasonEvidenceNotBound {
		return &ladder.Error{Code: ladder.CodeGateHeld, Message: "The evidence gate held the call, so nothing ran.", Data: data,
			Hint: "nothing ran; the evidence names another action than the payload: send evidence gathered for this very action"}
	}
	ap.Kind, ap.GateDecisionID, ap.GateState = ladder.ApprovalEscalate, g.DecisionID, g.GateState
	ap.Reason = fmt.Sprintf("The evidence gate held the call: %s (%s).", g.GateState, g.ReasonCode)
	rec, err := s.storeApproval(ctx, p, ap)
	if err != nil {
		return err
	}
	data["approval_id"] = rec.ID
	return &ladder.Error{Code: ladder.CodeGateHeld, Message: "The evidence gate held the call, so nothing ran.", Data: data,
		Hint: hint + ", or wait for a person to decide approval " + rec.ID + " (it runs only once its evidence passes)"}
}

// defaultMaxArgBytes bounds a payload or evidence of a capability whose
// limits were not set (one built in code; the config always sets them).
const defaultMaxArgBytes = 64 << 10

// argSizes refuses a payload or evidence over the capability's limit, in
// bytes of canonical JSON: every call, approval and shadow proposal stores
// them, so a limit per call is what bounds the store and every page of it.
func argSizes(c ladder.Capability, payload, evidence json.RawMessage) error {
	if n, max := len(payload), limitOr(c.MaxPayloadBytes); n > max {
		return argError(argPayload, fmt.Sprintf("is %d bytes; %s takes at most %d (max_payload_bytes)", n, c.ID, max),
			"send only the fields the payload schema lists; large documents belong in the upstream system, referenced by id")
	}
	if len(evidence) == 0 {
		return nil
	}
	canon, err := ladder.CanonicalJSON(evidence)
	if err != nil {
		canon = evidence
	}
	if n, max := len(canon), limitOr(c.MaxEvidenceBytes); n > max {
		return argError(argEvidence, fmt.Sprintf("is %d bytes; %s takes at most %d (max_evidence_bytes)", n, c.ID, max),
			"send the checks the evidence schema lists (list_precondition_functions), not the documents behind them")
	}
	return nil
}

func limitOr(n int) int {
	if n <= 0 {
		return defaultMaxArgBytes
	}
	return n
}

// needsPerson is the refusal of a call whose step a person handles (shadow
// or human_only); proposal names the agent's recorded proposal, if any.
func needsPerson(step, routeID string, lane ladder.Lane, proposal string) error {
	data := map[string]any{"route_id": routeID, "lane": lane}
	if proposal != "" {
		data["proposal_id"] = proposal
	}
	if lane == ladder.LaneShadow {
		data["proposal_recorded"] = proposal != ""
	}
	return &ladder.Error{Code: ladder.CodeStepNeedsPerson, Message: fmt.Sprintf("Step %s is in %s, so a person does this work and nothing ran.", step, lane),
		Hint: fmt.Sprintf("%s is in %s: a person does this work; do not act. Your proposal was recorded for comparison where the step is in shadow", step, lane),
		Data: data}
}

// storeApproval records an approval request (idempotent by key).
func (s *Service) storeApproval(ctx context.Context, p ladder.Principal, ap ladder.Approval) (ladder.Approval, error) {
	now := ladder.NormTime(s.now())
	ap.ID, ap.CreatedAt = ladder.NewID("ap"), now
	if ap.Status == "" {
		ap.Status = ladder.ApprovalPending
		ap.ExpiresAt = now.Add(s.approvalTTL)
		// The store holds the cap: it counts and inserts in one step.
		ap.MaxPending = max(s.maxPending, 0)
	}
	if ap.Status == ladder.ApprovalShadow {
		ap.MaxShadow = max(s.maxShadow, 0)
	}
	e, err := ladder.NewAuditEntry(p.Workspace, p.KeyID, ladder.AuditApproval, ap.ID, now, map[string]any{
		"event": "requested", "capability": ap.Capability, "kind": ap.Kind, "status": ap.Status, "payload": ap.Payload, "scope": ap.Scope,
		"route_id": ap.RouteID, "gate_decision_id": ap.GateDecisionID, "idempotency_key": ap.IdempotencyKey,
	})
	if err != nil {
		return ladder.Approval{}, err
	}
	if ap.Status == ladder.ApprovalPending {
		e.Event = ladder.ApprovalRequestedEvent(ap, s.stepLane(ctx, ap))
	}
	got, created, err := s.store.CreateApproval(ctx, ap, e)
	if errors.Is(err, ladder.ErrTooManyPending) {
		return ladder.Approval{}, s.tooManyPending(s.maxPending)
	}
	if errors.Is(err, ladder.ErrTooManyShadow) || errors.Is(err, ladder.ErrRouteReviewed) {
		return ladder.Approval{}, err // the caller answers STEP_NEEDS_PERSON
	}
	if err != nil {
		return ladder.Approval{}, storeErr("create approval", err)
	}
	if !created {
		if err := sameRequest(ap.IdempotencyKey, requestOfApproval(got), requestOfApproval(ap), "approval_id", got.ID); err != nil {
			return ladder.Approval{}, err
		}
	}
	return got, nil
}

// request is what an idempotency key names: the payload, the scope and
// the evidence (by hash) of one action.
type request struct {
	payload  json.RawMessage
	scope    map[string]string
	evidence string
}

func requestOfCall(c ladder.Call) request {
	return request{payload: c.Payload, scope: c.Scope, evidence: c.EvidenceSHA256}
}

func requestOfApproval(a ladder.Approval) request {
	return request{payload: a.Payload, scope: a.Scope, evidence: evidenceHash(a.Evidence)}
}

// evidenceHash is the SHA-256 (hex) of evidence's canonical JSON, "" for
// none: evidence that differs in spelling only hashes the same.
func evidenceHash(evidence json.RawMessage) string {
	if len(bytes.TrimSpace(evidence)) == 0 {
		return ""
	}
	canon, err := ladder.CanonicalJSON(evidence)
	if err != nil {
		canon = evidence
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:])
}

// sameRequest refuses a repeat of an idempotency key whose payload, scope
// or evidence differ from the first request's: answering with the first
// result would tell the agent that an action it did not ask for is the one
// that ran (or waits for a person), and evidence swapped under a key would
// reuse a verdict given to other evidence. Payloads are compared canonical
// (a stored record may spell '<' as \u003c).
func sameRequest(key string, first, this request, idField, id string) error {
	// Both sides: a call made from a stored approval carries the stored
	// spelling too.
	a, aerr := ladder.CanonicalJSON(first.payload)
	b, berr := ladder.CanonicalJSON(this.payload)
	what := ""
	switch {
	case aerr != nil || berr != nil || !bytes.Equal(a, b):
		what = "payload"
	case !maps.Equal(first.scope, this.scope):
		what = "scope"
	case first.evidence != this.evidence:
		what = "evidence"
	default:
		return nil
	}
	return &ladder.Error{Code: ladder.CodeIdempotencyKeyUsed,
		Message: fmt.Sprintf("The idempotency_key %q was used before with another %s.", key, what),
		Hint:    "nothing ran; send a new idempotency_key for a different action, or repeat the first " + what + " exactly to get the first answer",
		Data:    map[string]any{idField: id, "field": "idempotency_key"}}
}

func (s *Service) requestApproval(ctx context.Context, p ladder.Principal, ap ladder.Approval, res ladder.CallResult) (ladder.CallResult, error) {
	rec, err := s.storeApproval(ctx, p, ap)
	if err != nil {
		return ladder.CallResult{}, err
	}
	return s.approvalAnswer(rec, res), nil
}

// approvalAnswer is the call result that points the agent at an approval.
func (s *Service) approvalAnswer(rec ladder.Approval, res ladder.CallResult) ladder.CallResult {
	res.Status, res.ApprovalID, res.Proposal = ladder.CallResultApprovalRequested, rec.ID, rec.Payload
	exp := rec.ExpiresAt
	res.ExpiresAt = &exp
	res.Message = fmt.Sprintf("%s Nothing ran: approval %s is %s; call approval_status with this id to learn what a person decided.", rec.Reason, rec.ID, rec.Status)
	return res
}

// execute records the call (fail closed: no audit record, no execution),
// runs it once and records its result.
func (s *Service) execute(ctx context.Context, actor string, c ladder.Capability, call ladder.Call, res ladder.CallResult) (ladder.CallResult, error) {
	call, e, err := s.callEntry(actor, c, call)
	if err != nil {
		return ladder.CallResult{}, err
	}
	actx, sp := s.auditSpan(ctx, c, call)
	got, created, err := s.store.BeginCall(actx, call, e)
	sp.End(err)
	if errors.Is(err, ladder.ErrLaneChanged) {
		return ladder.CallResult{}, err
	}
	if err != nil {
		return ladder.CallResult{}, storeErr("begin call", err)
	}
	return s.begun(ctx, actor, c, call, got, created, res)
}

// callEntry stamps a call's start and makes its audit record (the call
// record, written before it runs).
func (s *Service) callEntry(actor string, c ladder.Capability, call ladder.Call) (ladder.Call, ladder.AuditEntry, error) {
	now := ladder.NormTime(s.now())
	call.StartedAt = now
	data, err := callAudit(c, call)
	if err != nil {
		return call, ladder.AuditEntry{}, fmt.Errorf("audit data: %w", err)
	}
	e, err := ladder.NewAuditEntry(call.Workspace, actor, ladder.AuditCall, call.ID, now, data)
	return call, e, err
}

// callAuditData is a call record's data, and callResultAuditData a
// call_result record's. Like routeAuditData, their fields are in the
// order of their keys, so they encode without the boxing a map costs;
// TestCallAuditData holds them to the maps they replaced.
type callAuditData struct {
	ApprovalID     string            `json:"approval_id"`
	Capability     string            `json:"capability"`
	Executor       string            `json:"executor"`
	GateDecisionID string            `json:"gate_decision_id"`
	IdempotencyKey string            `json:"idempotency_key"`
	Payload        json.RawMessage   `json:"payload"`
	RouteID        string            `json:"route_id"`
	Scope          map[string]string `json:"scope"`
}

type callResultAuditData struct {
	Capability     string            `json:"capability"`
	Error          string            `json:"error"`
	ErrorCode      ladder.Code       `json:"error_code"`
	Status         ladder.CallStatus `json:"status"`
	UpstreamStatus int               `json:"upstream_status"`
}

// callAudit is a call record's data, json.Marshal(callAuditData) written by
// hand: every proxied call writes it, and encoding/json's reflection was
// most of what building the record cost. A payload it cannot copy as it is
// (none, or not JSON) goes through encoding/json, whose error that is.
// TestCallAuditData holds both to encoding/json's bytes.
func callAudit(c ladder.Capability, call ladder.Call) (json.RawMessage, error) {
	d := callAuditData{ApprovalID: call.ApprovalID, Capability: c.ID, Executor: c.Executor.Kind, GateDecisionID: call.GateDecisionID,
		IdempotencyKey: call.IdempotencyKey, Payload: call.Payload, RouteID: call.RouteID, Scope: call.Scope}
	if len(d.Payload) == 0 {
		return json.Marshal(d)
	}
	b := make([]byte, 0, 192+len(d.ApprovalID)+len(d.Capability)+len(d.GateDecisionID)+len(d.IdempotencyKey)+len(d.Payload)+len(d.RouteID)+64*len(d.Scope))
	b = ladder.AppendJSONString(append(b, `{"approval_id":`...), d.ApprovalID)
	b = ladder.AppendJSONString(append(b, `,"capability":`...), d.Capability)
	b = ladder.AppendJSONString(append(b, `,"executor":`...), d.Executor)
	b = ladder.AppendJSONString(append(b, `,"gate_decision_id":`...), d.GateDecisionID)
	b = ladder.AppendJSONString(append(b, `,"idempotency_key":`...), d.IdempotencyKey)
	b, err := ladder.AppendCompactJSON(append(b, `,"payload":`...), d.Payload, true)
	if err != nil {
		return json.Marshal(d)
	}
	b = ladder.AppendJSONString(append(b, `,"route_id":`...), d.RouteID)
	b = ladder.AppendJSONStringMap(append(b, `,"scope":`...), d.Scope)
	return append(b, '}'), nil
}

// callResultAudit is a call_result record's data,
// json.Marshal(callResultAuditData) written by hand as callAudit is.
func callResultAudit(c ladder.Capability, call ladder.Call) json.RawMessage {
	b := make([]byte, 0, 96+len(c.ID)+len(call.Error)+len(call.ErrorCode)+len(call.Status))
	b = ladder.AppendJSONString(append(b, `{"capability":`...), c.ID)
	b = ladder.AppendJSONString(append(b, `,"error":`...), call.Error)
	b = ladder.AppendJSONString(append(b, `,"error_code":`...), string(call.ErrorCode))
	b = ladder.AppendJSONString(append(b, `,"status":`...), string(call.Status))
	b = strconv.AppendInt(append(b, `,"upstream_status":`...), int64(call.UpstreamStatus), 10)
	return append(b, '}')
}

// auditSpan starts the span of a call's begun record.
func (s *Service) auditSpan(ctx context.Context, c ladder.Capability, call ladder.Call) (context.Context, tracing.Span) {
	actx, sp := tracing.Start(ctx, s.tracer, tracing.SpanAuditWrite)
	if sp.Recording() {
		sp.Set(tracing.Workspace.String(call.Workspace), tracing.Capability.String(c.ID), tracing.CallID.String(call.ID), tracing.RouteID.String(call.RouteID))
	}
	return actx, sp
}

// begun carries on with a call once the store has answered its begun
// record: got is the stored call, created whether this request created it
// (else got is the first call of its idempotency key, which never runs
// again); call is what this request asked to record.
func (s *Service) begun(ctx context.Context, actor string, c ladder.Capability, call, got ladder.Call, created bool, res ladder.CallResult) (ladder.CallResult, error) {
	if !created {
		if err := sameRequest(call.IdempotencyKey, requestOfCall(got), requestOfCall(call), "call_id", got.ID); err != nil {
			return ladder.CallResult{}, err
		}
		return s.replay(got, res)
	}
	res.CallID, res.AuditSeq = got.ID, got.AuditSeq
	if s.runner == nil {
		return ladder.CallResult{}, errors.New("no executor configured")
	}
	// Once the call is recorded as begun it runs to its end and its result
	// is recorded, even if the caller goes away meanwhile: cancelling it
	// halfway would leave a call that may have run with no result, and the
	// executor bounds it with its own timeout.
	ctx = context.WithoutCancel(ctx)
	// In flight here: this process's sweep leaves it alone.
	s.calls.begin(got.ID)
	out, xerr := s.runner.Execute(ctx, c.Executor, upstream.Request{CallID: got.ID, Workspace: got.Workspace, Capability: c.ID, Payload: got.Payload, Scope: got.Scope, IdempotencyKey: got.IdempotencyKey})
	done := ladder.NormTime(s.now())
	got.FinishedAt, got.UpstreamStatus = &done, out.Status
	if xerr != nil {
		le := ladder.AsError(xerr)
		if le.Code == ladder.CodeInternal {
			le = &ladder.Error{Code: ladder.CodeUpstreamFailed, Message: "The upstream call failed.", Hint: "the failure was recorded; check the upstream", Err: xerr}
		}
		got.Status, got.ErrorCode = ladder.CallFailed, le.Code
		got.Error = le.Message
		if le.Err != nil {
			got.Error += ": " + le.Err.Error()
		}
		s.log.WarnContext(ctx, "upstream call failed", "call_id", got.ID, "capability", c.ID, "code", le.Code, "err", got.Error)
	} else {
		got.Status, got.Result = ladder.CallOK, out.Body
	}
	re, err := ladder.NewAuditEntry(got.Workspace, actor, ladder.AuditCallResult, got.ID, done, callResultAudit(c, got))
	if err != nil {
		s.calls.end(got.ID)
		return ladder.CallResult{}, err
	}
	// The call ran: its result is stored, retried, or held in memory until
	// the store takes it, and the caller gets the truthful answer either
	// way.
	s.recordResult(ctx, actor, got, re)
	if xerr != nil {
		le := ladder.AsError(xerr)
		if le.Code == ladder.CodeInternal {
			le.Code = ladder.CodeUpstreamFailed
		}
		data := map[string]any{"call_id": got.ID, "audit_seq": res.AuditSeq}
		for k, v := range le.Data {
			data[k] = v
		}
		return ladder.CallResult{}, &ladder.Error{Code: le.Code, Message: fmt.Sprintf("The call was recorded as failed (%s), so it did not take effect.", le.Code), Hint: le.Message + " " + le.Hint, Data: data, Err: le.Err}
	}
	res.Status, res.Result = ladder.CallResultExecuted, got.Result
	res.Message = fmt.Sprintf("%s ran (call %s).", c.ID, got.ID)
	return res, nil
}

// replay answers a repeated call with the first call's outcome; it never
// executes again.
func (s *Service) replay(first ladder.Call, res ladder.CallResult) (ladder.CallResult, error) {
	res.CallID, res.Replayed, res.RouteID, res.GateDecisionID = first.ID, true, first.RouteID, first.GateDecisionID
	if first.Status == ladder.CallRunning || first.Status == ladder.CallUnknown {
		// A result this process holds, not stored yet, is the answer the
		// stored result will give.
		if held, ok := s.calls.result(first.ID); ok {
			first = held
		}
	}
	switch first.Status {
	case ladder.CallUnknown:
		return ladder.CallResult{}, outcomeUnknown(first)
	case ladder.CallOK:
		res.Status, res.Result = ladder.CallResultExecuted, first.Result
		res.Message = fmt.Sprintf("%s ran earlier with this idempotency_key (call %s); this is its result, and nothing ran again.", first.Capability, first.ID)
		return res, nil
	case ladder.CallFailed:
		return ladder.CallResult{}, &ladder.Error{Code: first.ErrorCode, Message: fmt.Sprintf("The earlier call with this idempotency_key failed (%s).", first.ErrorCode),
			Hint: "the earlier call with this idempotency_key failed: " + first.Error + "; use a new idempotency_key to try again",
			Data: map[string]any{"call_id": first.ID, "replayed": true}}
	}
	return ladder.CallResult{}, &ladder.Error{Code: ladder.CodeConflict, Message: "A call with this idempotency_key is still running.",
		Hint: "a call with this idempotency_key is still running; wait, then call again with the same key to get its result",
		Data: map[string]any{"call_id": first.ID}}
}

// Capabilities lists the capabilities the workspace serves, with the lane
// of the step each is tied to as it stands now.
func (s *Service) Capabilities(ctx context.Context, workspace string) (ladder.CapabilitiesView, error) {
	w, ok := s.Workspace(workspace)
	if !ok {
		return ladder.CapabilitiesView{}, ladder.NotFound(ladder.CodeNotFound, fmt.Sprintf("No workspace %q.", workspace), "use a key of the workspace")
	}
	states, err := s.StepStates(ctx, workspace)
	if err != nil {
		return ladder.CapabilitiesView{}, err
	}
	lanes := map[string]ladder.Lane{}
	for _, st := range states {
		lanes[st.Queue+"/"+st.Step], lanes[st.Step] = st.Lane, st.Lane
	}
	out := ladder.CapabilitiesView{Workspace: workspace, Capabilities: []ladder.CapabilityView{}}
	for _, c := range w.Capabilities {
		if !c.Served {
			continue
		}
		out.Capabilities = append(out.Capabilities, ladder.CapabilityView{
			ID: c.ID, Title: c.Title, Description: c.Description, HumanGate: c.HumanGate, ReadOnly: c.ReadOnly,
			Step: c.Step, Lane: lanes[c.Step], Gate: c.Gate, ScopeFields: c.ScopeFields, Payload: c.Payload,
		})
	}
	// By id, as tools/list names them.
	slices.SortFunc(out.Capabilities, func(a, b ladder.CapabilityView) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

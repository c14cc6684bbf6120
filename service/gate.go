package service

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/gate"
)

// History page sizes (DESIGN.md §3.2).
const (
	DefaultGateHistoryLimit = 50
	MaxGateHistoryLimit     = 500
)

// gateOf returns the workspace's gate, or nil when it declares no cases.
func (s *Service) gateOf(workspace string) *gate.Gate {
	return s.gates[workspace]
}

// caseIDs lists the workspace's case ids in declaration order.
func caseIDs(g *gate.Gate) []string {
	if g == nil {
		return []string{}
	}
	cs := g.Cases()
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.ID
	}
	return out
}

// GateFunctions lists the precondition functions of one case, or of every
// case of the workspace when caseID is empty.
func (s *Service) GateFunctions(workspace, caseID string) (ladder.GateFunctionsView, error) {
	g := s.gateOf(workspace)
	v := ladder.GateFunctionsView{Workspace: workspace, CaseIDs: caseIDs(g), Cases: []ladder.GateCaseInfo{}}
	if caseID == "" {
		if g != nil {
			v.Cases = g.Cases()
		}
		switch len(v.CaseIDs) {
		case 0:
			v.Sentence = "This workspace has no gate cases, so authorize has nothing to decide here."
		default:
			v.Sentence = fmt.Sprintf("Gate cases: %s. Call authorize with a case, one of its precondition_fn names and evidence shaped as its evidence_schema.", strings.Join(v.CaseIDs, ", "))
		}
		return v, nil
	}
	if g == nil {
		return v, unknownCase(caseID, v.CaseIDs)
	}
	for _, c := range g.Cases() {
		if c.ID == caseID {
			v.Cases = []ladder.GateCaseInfo{c}
			names := make([]string, len(c.Functions))
			for i, f := range c.Functions {
				names[i] = f.PreconditionFn
			}
			v.Sentence = fmt.Sprintf("Case %s: precondition functions %s. Call authorize with one of them and evidence shaped as its evidence_schema.", c.ID, strings.Join(names, ", "))
			return v, nil
		}
	}
	return v, unknownCase(caseID, v.CaseIDs)
}

func unknownCase(caseID string, valid []string) *ladder.Error {
	msg := fmt.Sprintf("There is no gate case %q in this workspace.", caseID)
	if caseID == "" {
		msg = "The case field is required."
	}
	hint := "call list_precondition_functions without a case to see every case of this workspace and its functions"
	if len(valid) == 0 {
		hint += "; this workspace declares no gate cases"
	} else {
		hint += "; valid cases: " + strings.Join(valid, ", ")
	}
	return &ladder.Error{Code: ladder.CodeUnknownCase, Message: msg, Hint: hint, Data: map[string]any{"field": "case", "valid": valid}}
}

// GateResultOf renders a stored decision as the authorize contract.
func GateResultOf(d ladder.GateDecisionRecord) ladder.GateResult {
	return ladder.GateResult{
		GateState: d.GateState, SchemaVersion: gate.SchemaVersion,
		CQScores:   ladder.GateScores{Relevance: d.R, Coverage: d.C, Ordering: d.O, Robustness: d.Ro},
		ReasonCode: d.ReasonCode, AutoRepairAvailable: d.RepairAttempts > 0,
		HumanReadable: d.HumanReadable, DecisionID: d.ID,
		Case: d.Case, PreconditionFn: d.PreconditionFn, ActionID: d.ActionID, Notes: d.Notes, Evidence: d.Evidence,
		KeyID: d.KeyID, At: d.At,
		Route: d.GateState, Authorized: d.GateState == gate.StatePass,
		R: d.R, C: d.C, O: d.O, Ro: d.Ro, Q: d.Q, VerifiableExt: d.VerifiableExt, RepairAttempts: d.RepairAttempts,
	}
}

// Authorize runs the evidence gate for one commit and records the decision.
//
// The decision and its audit record are written in one durable write
// before anything is returned; if that write fails the answer is
// AUDIT_UNAVAILABLE, never an unlogged verdict. Secrets in the evidence,
// the notes and the explanation are redacted before they are stored or
// returned.
//
// Refusals: UNKNOWN_CASE and UNKNOWN_FUNCTION (the hint lists the valid
// names), INVALID_ARGUMENT naming evidence when none was sent,
// EVIDENCE_INVALID naming the field, and BYPASS_TO_HUMAN for a
// commit a person always makes — that refusal is recorded too, and carries
// its decision_id.
func (s *Service) Authorize(ctx context.Context, p ladder.Principal, req ladder.AuthorizeRequest) (ladder.GateResult, error) {
	return s.authorize(ctx, p, req, true, nil, "")
}

// authorize is Authorize for an action: bound holds the evidence fields
// that must name what the action acts on (gate.AuthorizeBound), and
// payloadHash, recorded with the decision, the action's payload. With
// needEvidence, absent evidence is refused rather than scored.
func (s *Service) authorize(ctx context.Context, p ladder.Principal, req ladder.AuthorizeRequest, needEvidence bool, bound map[string]string, payloadHash string) (ladder.GateResult, error) {
	g := s.gateOf(p.Workspace)
	valid := caseIDs(g)
	if req.Case == "" || g == nil {
		return ladder.GateResult{}, unknownCase(req.Case, valid)
	}
	ev, err := decodeEvidence(req.Evidence)
	if err != nil {
		return ladder.GateResult{}, err
	}
	d, err := g.AuthorizeBound(req.Case, req.PreconditionFn, ev, bound)
	var le *gate.LookupError
	var ee *gate.EvidenceError
	switch {
	case needEvidence && absent(req.Evidence) && (err == nil || errors.As(err, &ee)):
		// Absent evidence is a caller's mistake, not empty evidence (which
		// {} sends): scoring it would record an ESCALATE nobody asked for.
		// Checked after the lookup, so a bad case or function is named first.
		return ladder.GateResult{}, ladder.InvalidField("evidence", "The evidence field is missing; authorize scores the evidence sent for the commit.",
			"send evidence as an object whose fields are the evidence_schema properties list_precondition_functions shows ({} sends no evidence)")
	case err == nil:
	case errors.As(err, &le) && errors.Is(err, gate.ErrBypassToHuman):
		// The refusal is a decision too: record it under the name asked.
		d.PreconditionFn = req.PreconditionFn
		rec, werr := s.recordGate(ctx, p, d, payloadHash)
		if werr != nil {
			return ladder.GateResult{}, werr
		}
		return ladder.GateResult{}, &ladder.Error{Code: ladder.CodeBypassToHuman,
			Message: fmt.Sprintf("A person must decide commit %s of case %s; evidence alone never authorizes it (gate_state BYPASS_TO_HUMAN, reason_code %s, decision_id %s).", le.Name, le.Case, rec.ReasonCode, rec.ID),
			Hint:    "do not perform this action; ask a person to make this commit. To see what evidence can authorize, call list_precondition_functions",
			Data: map[string]any{"field": "precondition_fn", "gate_state": rec.GateState, "reason_code": rec.ReasonCode, "decision_id": rec.ID, "authorized": false,
				"action_id": rec.ActionID, "at": rec.At}}
	case errors.As(err, &le) && errors.Is(err, gate.ErrUnknownCase):
		return ladder.GateResult{}, unknownCase(req.Case, valid)
	case errors.As(err, &le):
		msg := fmt.Sprintf("There is no precondition function %q in case %s.", req.PreconditionFn, req.Case)
		if req.PreconditionFn == "" {
			msg = "The precondition_fn field is required."
		}
		return ladder.GateResult{}, &ladder.Error{Code: ladder.CodeUnknownFunction, Message: msg,
			Hint: fmt.Sprintf("call list_precondition_functions with case %q to see its functions and the evidence each expects; valid precondition_fn values: %s", req.Case, strings.Join(le.Valid, ", ")),
			Data: map[string]any{"field": "precondition_fn", "valid": le.Valid}}
	default:
		if errors.As(err, &ee) {
			field := "evidence"
			if ee.Field != "" {
				field = "evidence." + ee.Field
			}
			return ladder.GateResult{}, &ladder.Error{Code: ladder.CodeEvidenceInvalid, Message: "The evidence does not match the function's schema: " + gate.Redact(ee.Error()) + ".",
				Hint: fmt.Sprintf("fix %s and call again; list_precondition_functions with case %q shows the evidence schema of %s", field, req.Case, req.PreconditionFn),
				Data: map[string]any{"field": field}}
		}
		return ladder.GateResult{}, fmt.Errorf("authorize: %w", err)
	}
	rec, err := s.recordGate(ctx, p, d, payloadHash)
	if err != nil {
		return ladder.GateResult{}, err
	}
	return GateResultOf(rec), nil
}

// absent reports whether no evidence was sent (no field, or null).
func absent(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// decodeEvidence reads the evidence object; anything but an object (or
// nothing) is EVIDENCE_INVALID.
func decodeEvidence(raw json.RawMessage) (map[string]any, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return map[string]any{}, nil
	}
	var ev map[string]any
	if raw[0] != '{' || json.Unmarshal(raw, &ev) != nil {
		return nil, &ladder.Error{Code: ladder.CodeEvidenceInvalid, Message: "The evidence must be a JSON object.",
			Hint: "send evidence as an object whose fields are the evidence_schema properties list_precondition_functions shows, e.g. {\"filing_license_verified\": true}",
			Data: map[string]any{"field": "evidence"}}
	}
	return ev, nil
}

// recordGate stores a decision with its audit record in one durable write.
func (s *Service) recordGate(ctx context.Context, p ladder.Principal, d gate.Decision, payloadHash string) (ladder.GateDecisionRecord, error) {
	evidence, err := ladder.CanonicalJSON(RedactEvidence(d.Evidence))
	if err != nil {
		return ladder.GateDecisionRecord{}, fmt.Errorf("gate evidence: %w", err)
	}
	rec := ladder.GateDecisionRecord{
		ID: ladder.NewID("gd"), Workspace: p.Workspace, KeyID: p.KeyID,
		Case: d.Case, PreconditionFn: d.PreconditionFn, ActionID: d.CommitID,
		GateState: d.GateState, ReasonCode: d.ReasonCode,
		R: d.Scores.Relevance, C: d.Scores.Coverage, O: d.Scores.Ordering, Ro: d.Scores.Robustness, Q: d.Q,
		RepairAttempts: d.RepairAttempts, VerifiableExt: d.VerifiableExt,
		HumanReadable: gate.Redact(d.HumanReadable), Notes: gate.Redact(d.Notes),
		Evidence: evidence, At: ladder.NormTime(s.now()), PayloadSHA256: payloadHash,
	}
	data := map[string]any{
		"case": rec.Case, "precondition_fn": rec.PreconditionFn, "action_id": rec.ActionID,
		"gate_state": rec.GateState, "reason_code": rec.ReasonCode,
		"R": rec.R, "C": rec.C, "O": rec.O, "Ro": rec.Ro, "Q": rec.Q,
		"repair_attempts": rec.RepairAttempts, "verifiable_ext": rec.VerifiableExt,
		"human_readable": rec.HumanReadable, "notes": rec.Notes, "evidence": rec.Evidence,
	}
	if rec.PayloadSHA256 != "" {
		data["payload_sha256"] = rec.PayloadSHA256
	}
	entry, err := ladder.NewAuditEntry(p.Workspace, p.KeyID, ladder.AuditGateDecision, rec.ID, rec.At, data)
	if err != nil {
		return ladder.GateDecisionRecord{}, err
	}
	if rec.GateState != gate.StatePass {
		entry.Event = ladder.GateHeldEvent(rec)
	}
	got, err := s.store.RecordGateDecision(ctx, rec, entry)
	if err != nil {
		// Nothing was recorded, so no verdict may be returned.
		return ladder.GateDecisionRecord{}, gateStoreErr(err)
	}
	return got, nil
}

// gateStoreErr is storeErr for the gate: any failure to record a decision
// is AUDIT_UNAVAILABLE, whatever the store's error.
func gateStoreErr(err error) error {
	e := storeErr("record gate decision", err)
	var le *ladder.Error
	if errors.As(e, &le) && le.Code == ladder.CodeAuditUnavailable {
		return le
	}
	return &ladder.Error{Code: ladder.CodeAuditUnavailable, Message: "The gate decision could not be written to the audit log, so no verdict is given.", Hint: "treat the action as not authorized and retry shortly", Err: err}
}

// secretFields are evidence keys whose string values are secrets whatever
// they look like.
var secretFields = []string{"password", "passwd", "passphrase", "secret", "token", "api_key", "apikey", "private_key", "access_key", "credential"}

func isSecretField(name string) bool {
	n := strings.ToLower(name)
	for _, f := range secretFields {
		if strings.Contains(n, f) {
			return true
		}
	}
	return false
}

// RedactEvidence returns a copy of v with secrets masked: every string goes
// through gate.Redact, and the string value of a field whose name says it
// holds a secret (password, token, api_key, …) is replaced outright.
func RedactEvidence(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, sub := range x {
			if str, ok := sub.(string); ok && str != "" && isSecretField(k) {
				out[k] = gate.Redacted
				continue
			}
			out[k] = RedactEvidence(sub)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, sub := range x {
			out[i] = RedactEvidence(sub)
		}
		return out
	case string:
		return gate.Redact(x)
	}
	return v
}

// GateHistory lists the workspace's recorded gate decisions, newest first,
// filtered and paged. It never writes.
func (s *Service) GateHistory(ctx context.Context, workspace string, req ladder.GateHistoryRequest) (ladder.GateHistoryPage, error) {
	limit := req.Limit
	switch {
	case limit == 0:
		limit = DefaultGateHistoryLimit
	case limit < 1 || limit > MaxGateHistoryLimit:
		return ladder.GateHistoryPage{}, &ladder.Error{Code: ladder.CodeInvalidArgument, Message: fmt.Sprintf("The limit %d is out of range 1–%d.", req.Limit, MaxGateHistoryLimit),
			Hint: fmt.Sprintf("send a limit from 1 to %d (default %d) and page on with next_cursor", MaxGateHistoryLimit, DefaultGateHistoryLimit), Data: map[string]any{"field": "limit"}}
	}
	switch req.GateState {
	case "", gate.StatePass, gate.StateEscalate, gate.StateBypassToHuman:
	default:
		return ladder.GateHistoryPage{}, &ladder.Error{Code: ladder.CodeInvalidArgument, Message: fmt.Sprintf("The gate_state %q is not allowed; allowed values: PASS, ESCALATE, BYPASS_TO_HUMAN.", req.GateState),
			Hint: "send one of PASS, ESCALATE, BYPASS_TO_HUMAN, or leave gate_state out", Data: map[string]any{"field": "gate_state", "allowed": []string{gate.StatePass, gate.StateEscalate, gate.StateBypassToHuman}}}
	}
	q := ladder.GateHistoryQuery{Workspace: workspace, Case: req.Case, PreconditionFn: req.PreconditionFn, ActionID: req.ActionID, GateState: req.GateState}
	for _, tf := range []struct {
		name string
		in   string
		out  *time.Time
	}{{"since", req.Since, &q.Since}, {"until", req.Until, &q.Until}} {
		if tf.in == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, tf.in)
		if err != nil {
			return ladder.GateHistoryPage{}, &ladder.Error{Code: ladder.CodeInvalidArgument, Message: fmt.Sprintf("The %s %q is not an RFC 3339 time.", tf.name, tf.in),
				Hint: fmt.Sprintf("send %s like 2026-09-01T00:00:00Z", tf.name), Data: map[string]any{"field": tf.name}}
		}
		// Stored times are whole microseconds; rounding a bound up keeps
		// "at ≥ since" and "at < until" exact for them.
		if tr := t.Truncate(time.Microsecond); !tr.Equal(t) {
			t = tr.Add(time.Microsecond)
		}
		*tf.out = t
	}
	if req.Cursor != "" {
		seq, err := gateCursor.decode(req.Cursor)
		if err != nil {
			return ladder.GateHistoryPage{}, err
		}
		q.BeforeSeq = seq
	}
	page := ladder.GateHistoryPage{Workspace: workspace, Decisions: []ladder.GateResult{}}
	// A page holds at most limit decisions and ends early once their
	// evidence reaches PageBytes.
	b := pageBudget{limit: limit}
read:
	for {
		q.Limit = b.chunk()
		recs, err := s.store.GateHistory(ctx, q)
		if err != nil {
			return ladder.GateHistoryPage{}, storeErr("gate history", err)
		}
		for _, r := range recs {
			if b.full() {
				page.HasMore = true
				page.NextCursor = gateCursor.encode(q.BeforeSeq)
				break read
			}
			n := gateBytes(r)
			b.saw(n)
			b.add(n)
			page.Decisions = append(page.Decisions, GateResultOf(r))
			q.BeforeSeq = r.Seq
		}
		if len(recs) < q.Limit {
			break
		}
	}
	n := len(page.Decisions)
	switch {
	case n == 0:
		page.Sentence = "No gate decisions match."
	case page.HasMore:
		page.Sentence = fmt.Sprintf("%s, newest first; more remain: call gate_history_get again with cursor %s", decisions(n), page.NextCursor)
	default:
		page.Sentence = fmt.Sprintf("%s, newest first; this is the last page.", decisions(n))
	}
	return page, nil
}

func decisions(n int) string {
	if n == 1 {
		return "1 gate decision"
	}
	return fmt.Sprintf("%d gate decisions", n)
}

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

// withStepLanes fills StepLane of each step-tied proposal, reading each
// step's state once. A step whose state cannot be read is left out: the
// lane is information for the approver, not a condition.
func (s *Service) withStepLanes(ctx context.Context, workspace string, vs []ladder.ApprovalView) {
	lanes := map[string]ladder.Lane{}
	for i := range vs {
		a := vs[i].Approval
		if a.Kind != ladder.ApprovalProposal || a.Step == "" {
			continue
		}
		k := a.Queue + "/" + a.Step
		lane, ok := lanes[k]
		if !ok {
			if st, err := s.store.GetStepState(ctx, ladder.StepKey{Workspace: workspace, Queue: a.Queue, Step: a.Step}); err == nil {
				lane = st.Lane
			}
			lanes[k] = lane
		}
		vs[i].StepLane = lane
	}
}

func (s *Service) view(a ladder.Approval) ladder.ApprovalView {
	// The stored evidence stays as the agent sent it (approving re-runs the
	// gate on it); what is shown has its secrets masked (DESIGN.md §8).
	if len(a.Evidence) > 0 {
		var v any
		if json.Unmarshal(a.Evidence, &v) == nil {
			if red, err := ladder.CanonicalJSON(RedactEvidence(v)); err == nil {
				a.Evidence = red
			}
		}
	}
	return ladder.ApprovalView{Approval: a, Status: a.Status}
}

// ListApprovals pages a workspace's approvals, newest first. status filters
// by the status a reader sees ("pending" leaves out expired ones). A page
// holds at most limit approvals and ends early once their payloads,
// evidence and results reach PageBytes; next_cursor pages on.
func (s *Service) ListApprovals(ctx context.Context, p ladder.Principal, status, cursor string, limit int) (ladder.ApprovalPage, error) {
	switch {
	case limit == 0:
		limit = 50
	case limit < 0 || limit > 500:
		return ladder.ApprovalPage{}, argError("limit", fmt.Sprintf("%d is out of range", limit), "use 1 to 500 (default 50)")
	}
	st := ladder.ApprovalStatus(status)
	switch st {
	case "", ladder.ApprovalPending, ladder.ApprovalApproved, ladder.ApprovalRejected, ladder.ApprovalExpired, ladder.ApprovalExecuting, ladder.ApprovalShadow:
	default:
		return ladder.ApprovalPage{}, argError("status", fmt.Sprintf("%q is not allowed; allowed values: pending, approved, rejected, expired, executing, shadow", status), "leave status out for every approval")
	}
	q := ladder.ApprovalQuery{Workspace: p.Workspace}
	if cursor != "" {
		seq, err := approvalCursor.decode(cursor)
		if err != nil {
			return ladder.ApprovalPage{}, err
		}
		q.BeforeSeq = seq
	}
	// The store's expired also matches pending approvals past their
	// deadline; its pending returns them expired, which are left out below.
	q.Status = st
	page := ladder.ApprovalPage{Approvals: []ladder.ApprovalView{}}
	b := pageBudget{limit: limit}
	var last int64 // the seq of the last approval on the page
	for {
		q.Limit = b.chunk()
		rows, err := s.store.ListApprovals(ctx, q)
		if err != nil {
			return ladder.ApprovalPage{}, storeErr("list approvals", err)
		}
		for _, a := range rows {
			if b.full() {
				page.NextCursor = approvalCursor.encode(last)
				s.withStepLanes(ctx, p.Workspace, page.Approvals)
				return page, nil
			}
			n := approvalBytes(a)
			b.saw(n)
			if st == ladder.ApprovalExpired && a.Status != ladder.ApprovalExpired || st == ladder.ApprovalPending && a.Status != ladder.ApprovalPending {
				continue
			}
			page.Approvals = append(page.Approvals, s.view(a))
			b.add(n)
			last = a.Seq
		}
		if len(rows) < q.Limit {
			s.withStepLanes(ctx, p.Workspace, page.Approvals)
			return page, nil
		}
		q.BeforeSeq = rows[len(rows)-1].Seq
	}
}

// approvalNotFound is the answer for an approval that is not this workspace's (or
// not this agent's): the same either way, so nothing leaks.
func approvalNotFound(id string) error {
	return ladder.NotFound(ladder.CodeApprovalNotFound, fmt.Sprintf("No approval %q for this key.", id),
		"use the approval_id a capability call returned")
}

// ApprovalStatus tells the agent that asked what became of its request.
func (s *Service) ApprovalStatus(ctx context.Context, p ladder.Principal, id string) (ladder.ApprovalView, error) {
	a, err := s.store.GetApproval(ctx, p.Workspace, id)
	if errors.Is(err, ladder.ErrNotFound) || (err == nil && p.Kind == ladder.KeyAgent && a.RequestedBy != p.KeyID) {
		return ladder.ApprovalView{}, approvalNotFound(id)
	}
	if err != nil {
		return ladder.ApprovalView{}, storeErr("get approval", err)
	}
	vs := []ladder.ApprovalView{s.view(a)}
	s.withStepLanes(ctx, p.Workspace, vs)
	return vs[0], nil
}

// pendingFor loads an approval a person may decide now.
func (s *Service) pendingFor(ctx context.Context, p ladder.Principal, id string) (ladder.Approval, error) {
	a, err := s.store.GetApproval(ctx, p.Workspace, id)
	if errors.Is(err, ladder.ErrNotFound) {
		return a, approvalNotFound(id)
	}
	if err != nil {
		return a, storeErr("get approval", err)
	}
	// The store's verdict, not this replica's clock: a read past the
	// deadline stored the expiry before it answered.
	switch a.Status {
	case ladder.ApprovalPending:
		return a, nil
	case ladder.ApprovalExpired:
		return a, approvalExpired(id, a.ExpiresAt)
	}
	return a, &ladder.Error{Code: ladder.CodeApprovalClosed, Message: fmt.Sprintf("Approval %s was decided already: it is %s.", id, a.Status),
		Hint: "reload the inbox; someone else decided it", Data: map[string]any{"status": a.Status, "decided_by": a.DecidedBy}}
}

// approvalExpired is the refusal of a decision on an expired approval.
func approvalExpired(id string, at time.Time) error {
	return &ladder.Error{Code: ladder.CodeApprovalExpired, Message: fmt.Sprintf("Approval %s expired at %s before anyone decided.", id, at.Format(time.RFC3339)),
		Hint: "nothing ran; the agent sees expired and may ask again"}
}

// ExpireDue stores the expiry of every pending approval past its time and
// returns how many it found so. serve runs it periodically; listing
// pending approvals is what stores their expiry (see ladder.ApprovalStore).
func (s *Service) ExpireDue(ctx context.Context) (int, error) {
	n := 0
	var oldest time.Time // the oldest approval still pending
	defer func() {
		var ns int64
		if !oldest.IsZero() {
			ns = oldest.UnixNano()
		}
		s.oldestPending.Store(ns)
	}()
	for _, ws := range s.order {
		// Read in chunks: each row is a whole record, payload and all.
		q := ladder.ApprovalQuery{Workspace: ws, Status: ladder.ApprovalPending, Limit: pageChunk}
		for {
			rows, err := s.store.ListApprovals(ctx, q)
			if err != nil {
				return n, err
			}
			for _, a := range rows {
				if a.Status == ladder.ApprovalExpired {
					n++
				}
				if a.Status == ladder.ApprovalPending && (oldest.IsZero() || a.CreatedAt.Before(oldest)) {
					oldest = a.CreatedAt
				}
			}
			if len(rows) < q.Limit {
				break
			}
			q.BeforeSeq = rows[len(rows)-1].Seq
		}
	}
	return n, nil
}

// Reject closes an approval without running anything. A step-tied
// proposal's rejection is also a review (disagree).
func (s *Service) Reject(ctx context.Context, p ladder.Principal, id string, req ladder.DecideRequest) (ladder.ApprovalView, error) {
	req.Reason = gate.Redact(req.Reason) // DESIGN.md §8: secrets in notes never reach the log or a response
	if strings.TrimSpace(req.Reason) == "" {
		return ladder.ApprovalView{}, argError("reason", "is required", "say why the request is rejected; the agent and the audit log see it")
	}
	a, err := s.pendingFor(ctx, p, id)
	if err != nil {
		return ladder.ApprovalView{}, err
	}
	now := ladder.NormTime(s.now())
	b := a
	b.Status, b.DecidedBy, b.DecidedAt, b.DecisionReason = ladder.ApprovalRejected, p.KeyID, &now, req.Reason
	e, err := ladder.NewAuditEntry(a.Workspace, p.KeyID, ladder.AuditApproval, a.ID, now, map[string]any{"event": "rejected", "reason": req.Reason})
	if err != nil {
		return ladder.ApprovalView{}, err
	}
	e.Event = ladder.ApprovalDecidedEvent(b, "rejected", now)
	got, err := s.updateApproval(ctx, b, ladder.ApprovalPending, []ladder.AuditEntry{e})
	if err != nil {
		return ladder.ApprovalView{}, s.decideErr(id, err)
	}
	s.reviewDecision(ctx, p, got, ladder.VerdictDisagree, nil, req.Reason)
	return s.view(got), nil
}

func (s *Service) decideErr(id string, err error) error {
	if errors.Is(err, ladder.ErrExpired) {
		// The deadline passed, by the store's clock, before the decision
		// committed: the expiry committed instead.
		return &ladder.Error{Code: ladder.CodeApprovalExpired, Message: fmt.Sprintf("Approval %s expired before the decision was recorded.", id),
			Hint: "nothing ran; the agent sees expired and may ask again"}
	}
	if errors.Is(err, ladder.ErrConflict) {
		return &ladder.Error{Code: ladder.CodeApprovalClosed, Message: fmt.Sprintf("Approval %s was decided by someone else a moment ago.", id),
			Hint: "reload the inbox; it ran (or closed) once, as decided first"}
	}
	return storeErr("decide approval", err)
}

// Approve approves a request, as proposed or with an edited payload, and
// executes the call exactly once: of many people approving at once, one
// wins the compare-and-set from pending and runs it; the others get
// APPROVAL_CLOSED. A step-tied proposal's approval is also a review
// (unchanged = agree, edited = disagree).
func (s *Service) Approve(ctx context.Context, p ladder.Principal, id string, req ladder.DecideRequest) (ladder.ApprovalView, error) {
	req.Reason = gate.Redact(req.Reason) // DESIGN.md §8: secrets in notes never reach the log or a response
	a, err := s.pendingFor(ctx, p, id)
	if err != nil {
		return ladder.ApprovalView{}, err
	}
	c, ok := s.FindCapability(p.Workspace, a.Capability)
	if !ok {
		return ladder.ApprovalView{}, &ladder.Error{Code: ladder.CodeUnknownCapability, Message: fmt.Sprintf("Capability %s is no longer in the config.", a.Capability), Hint: "reject the request"}
	}
	edited := false
	if len(bytes.TrimSpace(req.Payload)) > 0 {
		// An edited amount keeps its digits, as a call's does.
		pl := decodeObject(req.Payload)
		if pl == nil {
			return ladder.ApprovalView{}, argError("payload", "is not a JSON object", "send the edited payload as an object")
		}
		if err := s.scopeInPayload(p.Workspace, pl); err != nil {
			return ladder.ApprovalView{}, err
		}
		canon, err := ladder.CanonicalJSON(pl)
		if err != nil {
			return ladder.ApprovalView{}, err
		}
		if err := s.validatePayloadJSON(p.Workspace, c, canon); err != nil {
			return ladder.ApprovalView{}, editRefused(err)
		}
		if err := argSizes(c, canon, nil); err != nil {
			return ladder.ApprovalView{}, err
		}
		if !bytes.Equal(canon, a.Payload) {
			a.EditedPayload, edited = canon, true
		}
	}
	now := ladder.NormTime(s.now())
	b := a
	b.Status, b.DecidedBy, b.DecidedAt, b.DecisionReason = ladder.ApprovalExecuting, p.KeyID, &now, req.Reason
	// The call's id is given out with the decision, so an approval left
	// executing by a process that died names the call to settle it from.
	b.CallID = ladder.NewID("cl")
	e, err := ladder.NewAuditEntry(a.Workspace, p.KeyID, ladder.AuditApproval, a.ID, now, map[string]any{"event": "approved", "edited": edited, "edited_payload": b.EditedPayload, "reason": req.Reason, "call_id": b.CallID})
	if err != nil {
		return ladder.ApprovalView{}, err
	}
	e.Event = ladder.ApprovalDecidedEvent(b, decision(edited), now)
	b, err = s.updateApproval(ctx, b, ladder.ApprovalPending, []ladder.AuditEntry{e})
	if err != nil {
		return ladder.ApprovalView{}, s.decideErr(id, err)
	}
	verdict := ladder.VerdictAgree
	var correction json.RawMessage
	if edited {
		verdict, correction = ladder.VerdictDisagree, b.EditedPayload
	}
	s.reviewDecision(ctx, p, b, verdict, correction, req.Reason)
	return s.runApproved(ctx, p, c, b, "approval:"+a.ID)
}

// Retry runs an approved call again whose execution failed (an upstream
// down when the person approved).
func (s *Service) Retry(ctx context.Context, p ladder.Principal, id string) (ladder.ApprovalView, error) {
	a, err := s.store.GetApproval(ctx, p.Workspace, id)
	if errors.Is(err, ladder.ErrNotFound) {
		return ladder.ApprovalView{}, approvalNotFound(id)
	}
	if err != nil {
		return ladder.ApprovalView{}, storeErr("get approval", err)
	}
	if a.Status != ladder.ApprovalApproved || a.ExecError == "" {
		return ladder.ApprovalView{}, &ladder.Error{Code: ladder.CodeApprovalClosed, Message: fmt.Sprintf("Approval %s is %s and has no failed execution to retry.", id, a.Status), Hint: "only an approved call whose execution failed can be retried"}
	}
	if outcomeUnknownOf(a) {
		// It may have run: running it again is not a retry.
		return ladder.ApprovalView{}, &ladder.Error{Code: ladder.CodeOutcomeUnknown, Message: fmt.Sprintf("Approval %s's call %s has an unknown outcome, so it is not retried.", id, a.CallID),
			Hint: "it may or may not have run upstream: check the upstream system for call " + a.CallID + "; if it did not run, the agent may request it again",
			Data: map[string]any{"approval_id": a.ID, "call_id": a.CallID}}
	}
	c, ok := s.FindCapability(p.Workspace, a.Capability)
	if !ok {
		return ladder.ApprovalView{}, &ladder.Error{Code: ladder.CodeUnknownCapability, Message: fmt.Sprintf("Capability %s is no longer in the config.", a.Capability), Hint: "nothing to retry"}
	}
	now := ladder.NormTime(s.now())
	b := a
	b.Status, b.CallID = ladder.ApprovalExecuting, ladder.NewID("cl")
	e, err := ladder.NewAuditEntry(a.Workspace, p.KeyID, ladder.AuditApproval, a.ID, now, map[string]any{"event": "retry", "previous_error": a.ExecError, "previous_call_id": a.CallID, "call_id": b.CallID})
	if err != nil {
		return ladder.ApprovalView{}, err
	}
	if b, err = s.updateApproval(ctx, b, ladder.ApprovalApproved, []ladder.AuditEntry{e}); err != nil {
		return ladder.ApprovalView{}, s.decideErr(id, err)
	}
	// Each retry is a new execution with its own idempotency key.
	return s.runApproved(ctx, p, c, b, fmt.Sprintf("approval:%s:retry:%d", a.ID, now.UnixNano()))
}

// runApproved executes an approval held in executing and stores the
// outcome: approved with a result, or approved with the error that stopped
// it (approved, not executed), which a person can retry.
func (s *Service) runApproved(ctx context.Context, p ladder.Principal, c ladder.Capability, a ladder.Approval, idemKey string) (ladder.ApprovalView, error) {
	payload := a.Payload
	if len(a.EditedPayload) > 0 {
		payload = a.EditedPayload
	}
	callID := a.CallID
	if callID == "" {
		callID = ladder.NewID("cl")
	}
	call := ladder.Call{ID: callID, Workspace: a.Workspace, Capability: c.ID, KeyID: p.KeyID,
		IdempotencyKey: idemKey, Status: ladder.CallRunning, Payload: payload, Scope: a.Scope, EvidenceSHA256: evidenceHash(a.Evidence),
		RouteID: a.RouteID, GateDecisionID: a.GateDecisionID, ApprovalID: a.ID}
	// The gate decides at commit too: the evidence bound to the approval is
	// scored again for the payload that will run (an edited payload as
	// edited), and only a PASS recorded now lets it run.
	var (
		res  ladder.CallResult
		xerr error
	)
	if c.Gate != nil {
		var g ladder.GateResult
		if g, xerr = s.gateApprovedPayload(ctx, p, c, payload, a.Evidence); xerr == nil {
			call.GateDecisionID = g.DecisionID
		}
	}
	if xerr == nil {
		res, xerr = s.execute(ctx, p.KeyID, c, call, ladder.CallResult{Capability: c.ID, RouteID: a.RouteID, GateDecisionID: call.GateDecisionID})
	}
	now := ladder.NormTime(s.now())
	b := a
	b.Status, b.CallID = ladder.ApprovalApproved, res.CallID
	if xerr != nil {
		le := ladder.AsError(xerr)
		if le.Code == ladder.CodeAuditUnavailable {
			// Nothing ran: put it back so a person can approve again.
			b.Status, b.DecidedBy, b.DecidedAt = ladder.ApprovalPending, "", nil
		}
		b.ExecError = fmt.Sprintf("%s: %s", le.Code, ladder.RenderText(le.Hint, ladder.SurfaceREST))
		if id, ok := le.Data["call_id"].(string); ok {
			b.CallID = id
		}
	} else {
		b.ExecError, b.Result, b.ExecutedAt = "", res.Result, &now
	}
	e, err := ladder.NewAuditEntry(a.Workspace, p.KeyID, ladder.AuditApproval, a.ID, now, map[string]any{"event": "executed", "status": b.Status, "exec_error": b.ExecError, "call_id": b.CallID})
	if err != nil {
		return ladder.ApprovalView{}, err
	}
	e.Event = executionFailed(b, now)
	got, err := s.storeApprovalOutcome(ctx, b, e)
	if err != nil {
		s.log.ErrorContext(ctx, "record approval outcome", "approval_id", a.ID, "err", err)
		if xerr == nil || ladder.AsError(xerr).Code != ladder.CodeAuditUnavailable {
			// The call ran (or failed upstream): answer what happened. The
			// approval stays executing until RecoverCalls settles it from
			// the call's stored outcome.
			got, err = b, nil
		} else {
			return ladder.ApprovalView{}, storeErr("record approval outcome", err)
		}
	}
	if xerr != nil {
		le := ladder.AsError(xerr)
		hint := "the approval stays approved and not executed; fix the upstream, then retry it ({{approval_retry " + a.ID + "}})"
		data := map[string]any{"approval_id": a.ID, "status": got.Status}
		if le.Code == ladder.CodeGateHeld {
			hint = "the approval stays approved and not executed: its evidence did not pass the gate for this payload; reject it, or retry it ({{approval_retry " + a.ID + "}}) once the evidence passes"
			for _, k := range []string{"gate_state", "reason_code", "decision_id"} {
				data[k] = le.Data[k]
			}
		}
		return s.view(got), &ladder.Error{Code: le.Code, Message: fmt.Sprintf("Approved, but the call did not run: %s.", b.ExecError), Hint: hint, Data: data}
	}
	return s.view(got), nil
}

// gateApprovedPayload scores the evidence bound to an approval for the
// payload about to run; anything but a PASS is GATE_HELD.
func (s *Service) gateApprovedPayload(ctx context.Context, p ladder.Principal, c ladder.Capability, payload, evidence json.RawMessage) (ladder.GateResult, error) {
	var pl map[string]any
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	if err := dec.Decode(&pl); err != nil {
		return ladder.GateResult{}, fmt.Errorf("stored payload: %w", err)
	}
	g, err := s.gateCall(ctx, p, c, pl, payload, evidence)
	if err != nil {
		return ladder.GateResult{}, err
	}
	if g.GateState != gate.StatePass {
		return g, &ladder.Error{Code: ladder.CodeGateHeld, Message: "The evidence bound to this approval did not pass the gate, so the call did not run.",
			Hint: fmt.Sprintf("the evidence bound to this approval got %s (%s) for the payload that would run", g.GateState, g.ReasonCode),
			Data: map[string]any{"gate_state": g.GateState, "reason_code": g.ReasonCode, "decision_id": g.DecisionID, "human_readable": g.HumanReadable}}
	}
	return g, nil
}

// reviewDecision records a person's decision on a step-tied proposal as a
// review of its route, so the ladder learns from it. A route reviewed
// already keeps its first review.
func (s *Service) reviewDecision(ctx context.Context, p ladder.Principal, a ladder.Approval, v ladder.Verdict, correction json.RawMessage, note string) {
	if a.RouteID == "" || a.Kind != ladder.ApprovalProposal {
		return
	}
	st, err := s.FindStep(a.Workspace, a.Queue, a.Step)
	if err != nil {
		return
	}
	rv := ladder.Review{ID: ladder.NewID("rv"), RouteID: a.RouteID, Workspace: a.Workspace, Queue: a.Queue, Step: a.Step, Item: a.Item,
		Kind: ladder.ReviewApproval, Verdict: v, Correction: correction, Note: note, Reviewer: p.KeyID, At: ladder.NormTime(s.now())}
	if v == ladder.VerdictDisagree {
		rv.Severity = 3
	}
	if _, err := s.recordReview(ctx, st, rv, p.KeyID); err != nil && ladder.ErrorCode(err) != ladder.CodeAlreadyReviewed {
		s.log.WarnContext(ctx, "record approval review", "approval_id", a.ID, "err", err)
	}
}

// editRefused is the refusal of an edited payload that fails the
// capability's schema: the field at fault, as for a call, and that an edit
// replaces the whole payload, since a person who sends only the changed
// field (a patch) is refused for every field left out.
func editRefused(err error) error {
	le := ladder.AsError(err)
	if le.Code != ladder.CodeInvalidArgument {
		return err
	}
	field, _ := le.Data["field"].(string)
	if field == "" {
		field = "payload"
	}
	return &ladder.Error{Code: ladder.CodeInvalidArgument,
		Message: fmt.Sprintf("The edited payload is refused at %s, and nothing ran: an edit replaces the whole payload, so it must carry every field of the proposal, changed or not (%s).", field, strings.TrimSuffix(le.Message, ".")),
		Hint:    "send the proposed payload (approvals list shows it) with your changes made in it, not only the changed fields",
		Data:    map[string]any{"field": field}, Err: le.Err}
}

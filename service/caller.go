package service

import (
	"context"
	"encoding/json"

	"github.com/ladderhq/ladder"
)

// Caller is the service bound to one caller: it implements the root
// package's service interfaces (ladder.LadderService, ApprovalService,
// GateService, CapabilityService) in process, as *client.Client does over
// REST, so code written against those interfaces runs against either.
//
// Each method calls the Service method of the same concern with the bound
// Principal. A Caller goes around the front door: it checks no key kind and
// admits without limits, because whoever made it already holds the
// Principal (a test, the demo, a command of this binary).
type Caller struct {
	svc     *Service
	p       ladder.Principal
	baseURL string
}

var (
	_ ladder.LadderService     = (*Caller)(nil)
	_ ladder.ApprovalService   = (*Caller)(nil)
	_ ladder.GateService       = (*Caller)(nil)
	_ ladder.CapabilityService = (*Caller)(nil)
)

// As returns the service bound to p. baseURL is this server's public URL,
// for the evidence links of Steps; it may be empty.
func (s *Service) As(p ladder.Principal, baseURL string) *Caller {
	return &Caller{svc: s, p: p, baseURL: baseURL}
}

// Principal returns the caller the service is bound to.
func (c *Caller) Principal() ladder.Principal { return c.p }

// Steps lists the workspace's steps with their lanes and why.
func (c *Caller) Steps(ctx context.Context, queue string) (ladder.StepsView, error) {
	return c.svc.StepsRunAlone(ctx, c.p.Workspace, queue, c.baseURL)
}

// Evidence returns a step's evidence pack.
func (c *Caller) Evidence(ctx context.Context, queue, step string) (ladder.EvidencePack, error) {
	return c.svc.Evidence(ctx, c.p.Workspace, queue, step)
}

// Route decides one item at one step and records the route.
func (c *Caller) Route(ctx context.Context, req ladder.RouteRequest) (ladder.Route, error) {
	return c.svc.Route(ctx, c.p, req)
}

// Review records a person's verdict on a route.
func (c *Caller) Review(ctx context.Context, routeID string, req ladder.ReviewRequest) (ladder.ReviewResult, error) {
	return c.svc.Review(ctx, c.p, routeID, req)
}

// Outcome records an item's downstream result.
func (c *Caller) Outcome(ctx context.Context, req ladder.OutcomeRequest) (ladder.Outcome, error) {
	return c.svc.RecordOutcome(ctx, c.p, req)
}

// Pin pins (or, with pin false, unpins) a step.
func (c *Caller) Pin(ctx context.Context, queue, step string, req ladder.PinRequest, pin bool) (ladder.StepState, error) {
	return c.svc.Pin(ctx, c.p, queue, step, req, pin)
}

// Approvals pages the workspace's approvals, newest first.
func (c *Caller) Approvals(ctx context.Context, status, cursor string, limit int) (ladder.ApprovalPage, error) {
	return c.svc.ListApprovals(ctx, c.p, status, cursor, limit)
}

// ApprovalStatus tells what became of one approval.
func (c *Caller) ApprovalStatus(ctx context.Context, id string) (ladder.ApprovalView, error) {
	return c.svc.ApprovalStatus(ctx, c.p, id)
}

// Approve approves a pending approval, optionally with an edited payload.
func (c *Caller) Approve(ctx context.Context, id string, payload json.RawMessage, reason string) (ladder.ApprovalView, error) {
	return c.svc.Approve(ctx, c.p, id, ladder.DecideRequest{Payload: payload, Reason: reason})
}

// Reject rejects a pending approval with a reason.
func (c *Caller) Reject(ctx context.Context, id, reason string) (ladder.ApprovalView, error) {
	return c.svc.Reject(ctx, c.p, id, ladder.DecideRequest{Reason: reason})
}

// Retry runs an approved call again whose execution failed.
func (c *Caller) Retry(ctx context.Context, id string) (ladder.ApprovalView, error) {
	return c.svc.Retry(ctx, c.p, id)
}

// GateFunctions lists the gate cases and their precondition functions.
func (c *Caller) GateFunctions(_ context.Context, caseID string) (ladder.GateFunctionsView, error) {
	return c.svc.GateFunctions(c.p.Workspace, caseID)
}

// Authorize asks the evidence gate for a decision.
func (c *Caller) Authorize(ctx context.Context, req ladder.AuthorizeRequest) (ladder.GateResult, error) {
	return c.svc.Authorize(ctx, c.p, req)
}

// GateHistory reads one page of recorded gate decisions, newest first.
func (c *Caller) GateHistory(ctx context.Context, req ladder.GateHistoryRequest) (ladder.GateHistoryPage, error) {
	return c.svc.GateHistory(ctx, c.p.Workspace, req)
}

// CallCapability calls a capability with the arguments its MCP tool takes.
func (c *Caller) CallCapability(ctx context.Context, id string, args map[string]any) (ladder.CallResult, error) {
	if args == nil {
		args = map[string]any{}
	}
	raw, err := json.Marshal(args)
	if err != nil {
		return ladder.CallResult{}, ladder.Errorf(ladder.CodeInvalidJSON, "send arguments that encode as JSON", "The arguments do not encode as JSON: %v.", err)
	}
	return c.svc.CallCapability(ctx, c.p, id, raw)
}

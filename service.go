package ladder

import (
	"context"
	"encoding/json"
)

// The service interfaces say what a caller bound to one key may ask of a
// ladder server, one interface per concern. They take no Principal: the
// binding is the implementation's. Two kinds implement them alike, the way
// the Store interfaces have a backend per database:
//
//   - *client.Client, over REST, bound to the key it sends;
//   - *service.Caller, in process, bound to the Principal it was made for
//     by service.Service.As.
//
// The request, answer and view types they take and return (RouteRequest,
// StepsView, EvidencePack, GateResult, …) are this package's too, so a
// client depends on the domain alone, never on the service, the gate's CEL
// engine or a store. Their JSON names are the wire contract of REST and
// MCP alike.

// StepReader reads the lanes of a workspace's steps and why. It is the part
// of LadderService the MCP client (*client.MCP) offers too, and all the
// gateway asks of a workspace.
type StepReader interface {
	// Steps lists the workspace's steps (of one queue, when queue is not
	// empty) with their lanes and why: which_steps_run_alone.
	Steps(ctx context.Context, queue string) (StepsView, error)
	// Evidence returns a step's evidence pack; queue may be empty when the
	// step id or name is unique in the workspace.
	Evidence(ctx context.Context, queue, step string) (EvidencePack, error)
}

// LadderService reads the lanes of a workspace's steps and feeds them:
// routing items, recording reviews and outcomes, and pinning a step by a
// person's hand.
type LadderService interface {
	StepReader
	// Route decides one item at one step and records the route.
	Route(ctx context.Context, req RouteRequest) (Route, error)
	// Review records a person's verdict on a route (human key).
	Review(ctx context.Context, routeID string, req ReviewRequest) (ReviewResult, error)
	// Outcome records an item's downstream result.
	Outcome(ctx context.Context, req OutcomeRequest) (Outcome, error)
	// Pin pins a step to a lane, or with pin false unpins it (human key).
	Pin(ctx context.Context, queue, step string, req PinRequest, pin bool) (StepState, error)
}

// ApprovalService lists and decides the approvals capability calls wait on.
type ApprovalService interface {
	// Approvals pages the workspace's approvals, newest first; status ""
	// lists every status (human key).
	Approvals(ctx context.Context, status, cursor string, limit int) (ApprovalPage, error)
	// ApprovalStatus tells what became of one approval; an agent key sees
	// only its own requests.
	ApprovalStatus(ctx context.Context, id string) (ApprovalView, error)
	// Approve approves a pending approval, with payload (when not empty)
	// replacing the proposal, and runs the call (human key).
	Approve(ctx context.Context, id string, payload json.RawMessage, reason string) (ApprovalView, error)
	// Reject rejects a pending approval with a reason (human key).
	Reject(ctx context.Context, id, reason string) (ApprovalView, error)
	// Retry runs an approved call again whose execution failed (human key).
	Retry(ctx context.Context, id string) (ApprovalView, error)
}

// GateService asks the evidence gate (DESIGN.md §5).
type GateService interface {
	// GateFunctions lists the gate cases and their precondition functions;
	// caseID "" lists every case.
	GateFunctions(ctx context.Context, caseID string) (GateFunctionsView, error)
	// Authorize asks for a decision; only GateState PASS authorizes.
	Authorize(ctx context.Context, req AuthorizeRequest) (GateResult, error)
	// GateHistory reads one page of recorded decisions, newest first.
	GateHistory(ctx context.Context, req GateHistoryRequest) (GateHistoryPage, error)
}

// CapabilityService calls a workspace's capabilities (agent key).
type CapabilityService interface {
	// CallCapability calls capability id with the arguments its MCP tool
	// takes: the payload, the scope fields, evidence and idempotency_key.
	CallCapability(ctx context.Context, id string, args map[string]any) (CallResult, error)
}

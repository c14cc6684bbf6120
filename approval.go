package ladder

import (
	"context"
	"encoding/json"
	"time"
)

// ApprovalStatus is where an approval request stands.
type ApprovalStatus string

// The approval statuses.
const (
	ApprovalPending  ApprovalStatus = "pending"  // waiting for a person
	ApprovalApproved ApprovalStatus = "approved" // a person approved; executed (or failed: see ExecError)
	ApprovalRejected ApprovalStatus = "rejected" // a person rejected; nothing ran
	ApprovalExpired  ApprovalStatus = "expired"  // nobody decided in time; nothing ran
	// ApprovalExecuting is held while the approved call runs, so a second
	// approver cannot run it again.
	ApprovalExecuting ApprovalStatus = "executing"
	// ApprovalShadow records an agent's proposal for a step in shadow, for
	// comparison with what the person does; it is never executed.
	ApprovalShadow ApprovalStatus = "shadow"
)

// Approval kinds: what created the request.
const (
	ApprovalHumanGate = "human_gate" // the capability always needs a person
	ApprovalProposal  = "proposal"   // the step's lane is propose
	ApprovalEscalate  = "gate_escalate"
	ApprovalShadowRec = "shadow_proposal"
)

// Approval is a request for a person: approving executes the call exactly
// once.
type Approval struct {
	ID             string            `json:"approval_id"`
	Workspace      string            `json:"workspace"`
	Capability     string            `json:"capability"`
	Kind           string            `json:"kind"`
	Status         ApprovalStatus    `json:"status"`
	Payload        json.RawMessage   `json:"payload"`
	Scope          map[string]string `json:"scope,omitempty"`
	Evidence       json.RawMessage   `json:"evidence,omitempty"`
	IdempotencyKey string            `json:"idempotency_key,omitempty"`
	RouteID        string            `json:"route_id,omitempty"`
	Queue          string            `json:"queue,omitempty"`
	Step           string            `json:"step,omitempty"`
	Item           string            `json:"item,omitempty"`
	GateDecisionID string            `json:"gate_decision_id,omitempty"`
	GateState      string            `json:"gate_state,omitempty"`
	Reason         string            `json:"reason,omitempty"` // why it was requested
	RequestedBy    string            `json:"requested_by"`
	CreatedAt      time.Time         `json:"created_at"`
	ExpiresAt      time.Time         `json:"expires_at"`

	DecidedBy      string          `json:"decided_by,omitempty"`
	DecidedAt      *time.Time      `json:"decided_at,omitempty"`
	DecisionReason string          `json:"decision_reason,omitempty"`
	EditedPayload  json.RawMessage `json:"edited_payload,omitempty"`
	CallID         string          `json:"call_id,omitempty"`
	Result         json.RawMessage `json:"result,omitempty"`
	ExecError      string          `json:"exec_error,omitempty"`
	ExecutedAt     *time.Time      `json:"executed_at,omitempty"`
	// Seq orders approvals for paging; the store assigns it.
	Seq int64 `json:"-"`
}

// EffectiveStatus is the status a reader sees at now: a pending approval
// past its expiry is expired even before a sweep stores that.
func (a Approval) EffectiveStatus(now time.Time) ApprovalStatus {
	if a.Status == ApprovalPending && !a.ExpiresAt.IsZero() && !now.Before(a.ExpiresAt) {
		return ApprovalExpired
	}
	return a.Status
}

// ApprovalQuery selects approvals of one workspace, newest first.
type ApprovalQuery struct {
	Workspace   string
	Status      ApprovalStatus // "" for every status
	RequestedBy string         // "" for every key
	BeforeSeq   int64          // 0 for the newest
	Limit       int            // 0 means 50
}

// CallStatus is where a capability call stands.
type CallStatus string

// The call statuses.
const (
	CallRunning CallStatus = "running"
	CallOK      CallStatus = "ok"
	CallFailed  CallStatus = "failed"
)

// Call is one execution of a capability, recorded before it runs (fail
// closed) and finished with its result.
type Call struct {
	ID             string            `json:"call_id"`
	Workspace      string            `json:"workspace"`
	Capability     string            `json:"capability"`
	KeyID          string            `json:"key_id"`
	IdempotencyKey string            `json:"idempotency_key,omitempty"`
	Status         CallStatus        `json:"status"`
	Payload        json.RawMessage   `json:"payload"`
	Scope          map[string]string `json:"scope,omitempty"`
	RouteID        string            `json:"route_id,omitempty"`
	GateDecisionID string            `json:"gate_decision_id,omitempty"`
	ApprovalID     string            `json:"approval_id,omitempty"`
	AuditSeq       int64             `json:"audit_seq,omitempty"`
	Result         json.RawMessage   `json:"result,omitempty"`
	Error          string            `json:"error,omitempty"`
	ErrorCode      Code              `json:"error_code,omitempty"`
	UpstreamStatus int               `json:"upstream_status,omitempty"`
	StartedAt      time.Time         `json:"started_at"`
	FinishedAt     *time.Time        `json:"finished_at,omitempty"`
	// Guard, when set, makes BeginCall store the call only while the step's
	// lane epoch is still the one its route was decided in (else
	// ErrLaneChanged): a call the agent runs alone commits under the lane in
	// force at that moment, never under a lane it was routed in before.
	Guard *LaneGuard `json:"-"`
}

// LaneGuard is the lane epoch a write was decided in.
type LaneGuard struct {
	Key       StepKey
	LaneEpoch int
}

// ApprovalStore keeps approval requests.
type ApprovalStore interface {
	// CreateApproval stores a (a.ID new) and appends audit. When
	// a.IdempotencyKey is set and an approval of the same workspace,
	// capability and key exists, it returns that one and false.
	CreateApproval(ctx context.Context, a Approval, audit AuditEntry) (Approval, bool, error)
	// GetApproval returns an approval of the workspace, or ErrNotFound (also
	// for another workspace's id).
	GetApproval(ctx context.Context, workspace, id string) (Approval, error)
	// ApprovalByKey returns the approval of the workspace and capability
	// requested with an idempotency key, or ErrNotFound.
	ApprovalByKey(ctx context.Context, workspace, capability, key string) (Approval, error)
	// ListApprovals returns approvals matching q, newest first.
	ListApprovals(ctx context.Context, q ApprovalQuery) ([]Approval, error)
	// UpdateApproval stores a over the approval whose status is still from
	// (compare-and-set), with its audit entries; another status is
	// ErrConflict. This is what makes approving execute exactly once.
	UpdateApproval(ctx context.Context, a Approval, from ApprovalStatus, audit []AuditEntry) (Approval, error)
}

// CallStore keeps capability calls.
type CallStore interface {
	// BeginCall records a call as running, with its audit entry, before it
	// executes. When c.IdempotencyKey is set and a call of the same
	// workspace, capability and key exists, it returns that call and false:
	// the caller must not execute again. When c.Guard is set and the step's
	// lane epoch is no longer c.Guard.LaneEpoch, it stores nothing and
	// returns ErrLaneChanged.
	BeginCall(ctx context.Context, c Call, audit AuditEntry) (Call, bool, error)
	// FinishCall stores a running call's outcome, with its audit entry.
	FinishCall(ctx context.Context, c Call, audit AuditEntry) (Call, error)
	// GetCall returns a call of the workspace, or ErrNotFound.
	GetCall(ctx context.Context, workspace, id string) (Call, error)
	// CallByKey returns the call of the workspace and capability made with
	// an idempotency key, or ErrNotFound.
	CallByKey(ctx context.Context, workspace, capability, key string) (Call, error)
}

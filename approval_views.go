package ladder

import (
	"encoding/json"
	"time"
)

// ApprovalView is an approval as an API answer: its stored fields and its
// status as the store decided it (the store's clock decides expiry, and a
// read past the deadline stores it first; see ApprovalStore).
type ApprovalView struct {
	Approval
	Status ApprovalStatus `json:"status"`
	// StepLane is, for a proposal of a step-tied call, the step's lane now.
	// A proposal is made in propose; when the step has moved since (pinned
	// to human_only, say), the approver sees it here. The rule: approving
	// still runs the call once, as the person decides; the new lane governs
	// only what the agent does next.
	StepLane Lane `json:"step_lane,omitempty"`
}

// ApprovalPage is one page of approvals, newest first.
type ApprovalPage struct {
	Approvals  []ApprovalView `json:"approvals"`
	NextCursor string         `json:"next_cursor,omitempty"`
}

// CallRecovery counts what one pass of the service's call recovery (the
// sweep serve runs at start and every minute) did.
type CallRecovery struct {
	// MarkedUnknown counts calls found running past their executor's
	// timeout plus the margin, with no result stored, now marked unknown.
	MarkedUnknown int
	// ApprovalsSettled counts approvals found executing whose call has an
	// outcome (or never began), now stored with it.
	ApprovalsSettled int
}

// CallResult is the answer to a capability call: it ran (status
// "executed", with the upstream's result), or it became an approval request
// (status "approval_requested"), or it was replayed from an earlier call
// with the same idempotency key.
type CallResult struct {
	Status         string          `json:"status"`
	Capability     string          `json:"capability"`
	Message        string          `json:"message"`
	Result         json.RawMessage `json:"result,omitempty"`
	CallID         string          `json:"call_id,omitempty"`
	ApprovalID     string          `json:"approval_id,omitempty"`
	ExpiresAt      *time.Time      `json:"expires_at,omitempty"`
	RouteID        string          `json:"route_id,omitempty"`
	Decision       string          `json:"decision,omitempty"`
	Lane           string          `json:"lane,omitempty"`
	GateDecisionID string          `json:"gate_decision_id,omitempty"`
	AuditSeq       int64           `json:"audit_seq,omitempty"`
	Replayed       bool            `json:"replayed,omitempty"`
	Proposal       json.RawMessage `json:"proposal,omitempty"`
}

// The statuses of a CallResult.
const (
	CallResultExecuted          = "executed"
	CallResultApprovalRequested = "approval_requested"
	// The outcomes a call that waited for its approval (wait) may end
	// with besides executed: a person rejected it, nobody decided before
	// it expired, or a person approved it and it failed to run.
	CallResultRejected        = "rejected"
	CallResultExpired         = "expired"
	CallResultExecutionFailed = "execution_failed"
)

// Inbox item kinds.
const (
	InboxApproval = "approval" // a pending approval: a person decides it
	InboxShadow   = "shadow"   // a shadow proposal not reviewed yet
	InboxAudit    = "audit"    // a sampled audit not reviewed yet
)

// StepLanes are, for a step-tied proposal, the lane the step was in when
// the agent proposed and the lane it is in now. A lane that changed since
// (say, pinned to human_only) does not change the decision a person makes:
// approving still runs the call once, as the person decided. The lane
// governs what the agent may do alone from now on.
type StepLanes struct {
	Proposed Lane
	Now      Lane
}

// Changed reports whether the step's lane moved since the proposal.
func (l StepLanes) Changed() bool { return l.Proposed != "" && l.Now != "" && l.Proposed != l.Now }

// InboxItem is one thing that waits for a person.
type InboxItem struct {
	Kind string
	At   time.Time
	// Approval is the pending approval or the shadow proposal.
	Approval *ApprovalView
	// Route is the sampled route of an audit.
	Route *Route
	// Lanes are a step-tied approval's lanes then and now.
	Lanes StepLanes
}

// InboxPage is one page of the inbox, newest first.
type InboxPage struct {
	Items []InboxItem
	// NextCursor, when set, fetches the next (older) page.
	NextCursor string
}

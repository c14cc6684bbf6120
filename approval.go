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
	// MaxPending, when positive on a pending approval given to
	// CreateApproval, is the most pending, unexpired approvals its
	// requesting key may have: the store counts and inserts in one
	// serialized step (ErrTooManyPending when the key is at the cap). It is
	// not stored.
	MaxPending int `json:"-"`
	// MaxShadow, when positive on a shadow record of a step (Step and
	// RouteID set) given to CreateApproval, is the most unreviewed shadow
	// records its requesting key may have for that step: one whose route
	// has no review yet. The store counts and inserts in one serialized
	// step (ErrTooManyShadow at the cap). It is not stored.
	MaxShadow int `json:"-"`
}

// EffectiveStatus is the status a reader would derive at now by its own
// clock: a pending approval past its expiry is expired. Only a guess: the
// store decides expiry by its clock (see ApprovalStore), and what it
// returns is the status to show and act on.
func (a Approval) EffectiveStatus(now time.Time) ApprovalStatus {
	if a.Status == ApprovalPending && !a.ExpiresAt.IsZero() && !now.Before(a.ExpiresAt) {
		return ApprovalExpired
	}
	return a.Status
}

// Restamp is what a store does to a pending approval it inserts: CreatedAt
// becomes now, the store's clock, and the deadline moves with it, so the
// approval waits as long as the caller asked whatever the caller's clock
// says. A zero CreatedAt leaves ExpiresAt as given.
func (a *Approval) Restamp(now time.Time) {
	if a.Status != ApprovalPending {
		return
	}
	if !a.CreatedAt.IsZero() && !a.ExpiresAt.IsZero() {
		a.ExpiresAt = NormTime(now.Add(a.ExpiresAt.Sub(a.CreatedAt)))
	}
	a.CreatedAt = NormTime(now)
}

// ExpiryAudit is the audit entry of an approval's expiry, recorded by the
// store that stores it.
func ExpiryAudit(a Approval, at time.Time) (AuditEntry, error) {
	return NewAuditEntry(a.Workspace, "system", AuditApproval, a.ID, NormTime(at), map[string]any{"event": "expired", "expires_at": a.ExpiresAt})
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
	// CallUnknown marks a call left running past its executor's timeout
	// plus a margin with no result stored: the process running it stopped
	// (or lost its store) after the call began, so it may or may not have
	// run upstream. A result that arrives later replaces the mark.
	CallUnknown CallStatus = "unknown"
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
	// EvidenceSHA256 is the hash of the evidence the call was made with, so
	// a repeat of its idempotency key with other evidence is refused.
	EvidenceSHA256 string          `json:"evidence_sha256,omitempty"`
	ApprovalID     string          `json:"approval_id,omitempty"`
	AuditSeq       int64           `json:"audit_seq,omitempty"`
	Result         json.RawMessage `json:"result,omitempty"`
	Error          string          `json:"error,omitempty"`
	ErrorCode      Code            `json:"error_code,omitempty"`
	UpstreamStatus int             `json:"upstream_status,omitempty"`
	StartedAt      time.Time       `json:"started_at"`
	FinishedAt     *time.Time      `json:"finished_at,omitempty"`
	// Guard, when set, makes BeginCall store the call only while the step's
	// lane epoch is still the one its route was decided in (else
	// ErrLaneChanged): a call the agent runs alone commits under the lane in
	// force at that moment, never under a lane it was routed in before.
	Guard *LaneGuard `json:"-"`
	// Seq orders calls for StaleCalls' paging; the store assigns it.
	Seq int64 `json:"-"`
	// RunningFor is, on a call StaleCalls returns, how long it has been
	// running by the store's clock. It is not stored.
	RunningFor time.Duration `json:"-"`
}

// RouteCall is what RouteAndBeginCall stored or found: the route and
// whether it was created now, and the call and whether it was created now
// (a call found under its idempotency key is not, and must not run again).
type RouteCall struct {
	Route        Route
	RouteCreated bool
	Call         Call
	CallCreated  bool
}

// LaneGuard is the lane epoch a write was decided in.
type LaneGuard struct {
	Key       StepKey
	LaneEpoch int
}

// ApprovalStore keeps approval requests.
//
// Expiry is decided by the store's clock (the database's, on a store that
// several replicas share), never a reader's: a pending approval is past
// its deadline when its ExpiresAt is at or before the store's time. A read
// that finds one first stores it as expired, with an ExpiryAudit record,
// and returns what is then stored; so a reader sees expired only once
// expiry is committed, a decision that committed first is what every later
// reader sees, and expired is final.
type ApprovalStore interface {
	// CreateApproval stores a (a.ID new) and appends audit. When
	// a.IdempotencyKey is set and an approval of the same workspace,
	// capability and key exists, it returns that one and false (even when
	// the key is at its cap). A pending approval's deadline is kept as the
	// lifetime the caller gave (ExpiresAt − CreatedAt) counted from the
	// store's clock, which also stamps CreatedAt. When a.MaxPending is
	// positive and a.RequestedBy already has that many pending, unexpired
	// approvals, it stores nothing and returns ErrTooManyPending; the count
	// and the insert are one step, across replicas too. Likewise, when
	// a.MaxShadow is positive on a shadow record and a.RequestedBy already
	// has that many shadow records of a's step whose routes no review
	// names, it stores nothing and returns ErrTooManyShadow; a review of a
	// route (RecordReview, ImportHistory) frees its records' places. A
	// capped shadow record whose route is reviewed already is not stored
	// either (ErrRouteReviewed): it would never count.
	CreateApproval(ctx context.Context, a Approval, audit AuditEntry) (Approval, bool, error)
	// GetApproval returns an approval of the workspace, or ErrNotFound (also
	// for another workspace's id).
	GetApproval(ctx context.Context, workspace, id string) (Approval, error)
	// ApprovalByKey returns the approval of the workspace and capability
	// requested with an idempotency key, or ErrNotFound.
	ApprovalByKey(ctx context.Context, workspace, capability, key string) (Approval, error)
	// ListApprovals returns approvals matching q, newest first. A Status of
	// expired also matches pending approvals past their deadline; one of
	// pending matches them too, and they come back expired. A caller that
	// filters by status checks what came back.
	ListApprovals(ctx context.Context, q ApprovalQuery) ([]Approval, error)
	// UpdateApproval stores a over the approval whose status is still from
	// (compare-and-set), with its audit entries; another status is
	// ErrConflict. This is what makes approving execute exactly once. From
	// pending, the store's clock must also be before the deadline (for a
	// decision) or at or past it (for a.Status expired): a decision that
	// comes too late stores the expiry instead and returns ErrExpired, as
	// does any decision on an approval already expired.
	UpdateApproval(ctx context.Context, a Approval, from ApprovalStatus, audit []AuditEntry) (Approval, error)
}

// CallStore keeps capability calls.
type CallStore interface {
	// BeginCall records a call as running, with its audit entry, before it
	// executes. When c.IdempotencyKey is set and a call of the same
	// workspace, capability and key exists, it returns that call and false:
	// the caller must not execute again. When c.Guard is set and the step's
	// lane epoch is no longer c.Guard.LaneEpoch, it stores nothing and
	// returns ErrLaneChanged. A c.ID stored already (under no key, or
	// another) is an error and stores nothing, so a call id claimed once can
	// never begin again. The store stamps the start with its own clock, which
	// StaleCalls measures from.
	BeginCall(ctx context.Context, c Call, audit AuditEntry) (Call, bool, error)
	// RouteAndBeginCall is RecordRoute(r, routeAudit) followed by
	// BeginCall(c, callAudit) in one transaction, so a call the agent runs
	// alone waits for one durable write before it executes, not two. c's
	// guard is checked in the same transaction as the route's lane epoch
	// (the caller sets it to r's). The call is begun only when the route
	// is created now (c.RouteID is r.ID): when the item's route of the
	// epoch exists already, only that route is returned (Call zero,
	// CallCreated false) and the caller begins the call itself under it.
	// Each part keeps its own rules and its audit entry, route first; any
	// error (ErrLaneChanged among them) stores nothing.
	RouteAndBeginCall(ctx context.Context, r Route, routeAudit AuditEntry, c Call, callAudit AuditEntry) (RouteCall, error)
	// FinishCall stores a running call's outcome, with its audit entry; a
	// call that is no longer running is ErrConflict.
	FinishCall(ctx context.Context, c Call, audit AuditEntry) (Call, error)
	// UpdateCall stores c over the call whose status is still from
	// (compare-and-set), with its audit entry; another status is
	// ErrConflict and an unknown id ErrNotFound. It marks a call running
	// too long unknown (from running), and replaces that mark with the
	// result that arrives after it (from unknown).
	UpdateCall(ctx context.Context, c Call, from CallStatus, audit AuditEntry) (Call, error)
	// StaleCalls returns, oldest first, up to limit calls that are running
	// and began at least minAge ago by the store's clock (the database's,
	// on a store several replicas share), with Seq greater than afterSeq,
	// each with Seq and RunningFor set.
	StaleCalls(ctx context.Context, minAge time.Duration, afterSeq int64, limit int) ([]Call, error)
	// GetCall returns a call of the workspace, or ErrNotFound.
	GetCall(ctx context.Context, workspace, id string) (Call, error)
	// CallByKey returns the call of the workspace and capability made with
	// an idempotency key, or ErrNotFound.
	CallByKey(ctx context.Context, workspace, capability, key string) (Call, error)
}

package ladder

import (
	"encoding/json"
	"time"
)

// RouteRequest asks for a decision for one item at one step.
type RouteRequest struct {
	Queue    string          `json:"queue,omitempty"`
	Step     string          `json:"step"`
	Item     string          `json:"item"`
	Features json.RawMessage `json:"features,omitempty"`
}

// ReviewRequest is a person's verdict on a routed item.
type ReviewRequest struct {
	Verdict       string          `json:"verdict"`
	Correction    json.RawMessage `json:"correction,omitempty"`
	Severity      int             `json:"severity,omitempty"`
	OperatorError *bool           `json:"operator_error,omitempty"`
	Note          string          `json:"note,omitempty"`
	Adjudication  bool            `json:"adjudication,omitempty"`
}

// OutcomeRequest reports the downstream result of an item.
type OutcomeRequest struct {
	Queue     string `json:"queue,omitempty"`
	Step      string `json:"step"`
	Item      string `json:"item"`
	HandledBy string `json:"handled_by"`
	OK        *bool  `json:"ok"`
}

// PinRequest pins a step to a lane (or unpins it).
type PinRequest struct {
	Lane   string `json:"lane,omitempty"`
	Reason string `json:"reason"`
}

// DecideRequest is a person's decision on an approval.
type DecideRequest struct {
	// Payload, when set on approve, replaces the proposal (edit, then
	// approve); it is validated against the capability's schema.
	Payload json.RawMessage `json:"payload,omitempty"`
	Reason  string          `json:"reason,omitempty"`
}

// AuthorizeRequest asks the evidence gate whether a commit may go ahead.
type AuthorizeRequest struct {
	Case           string          `json:"case"`
	PreconditionFn string          `json:"precondition_fn"`
	Evidence       json.RawMessage `json:"evidence,omitempty"`
}

// GateHistoryRequest filters and pages gate_history_get.
type GateHistoryRequest struct {
	Case           string `json:"case,omitempty"`
	PreconditionFn string `json:"precondition_fn,omitempty"`
	ActionID       string `json:"action_id,omitempty"`
	GateState      string `json:"gate_state,omitempty"`
	Since          string `json:"since,omitempty"` // RFC 3339, inclusive
	Until          string `json:"until,omitempty"` // RFC 3339, exclusive
	Limit          int    `json:"limit,omitempty"`
	Cursor         string `json:"cursor,omitempty"`
}

// KeyRequest asks for a new key.
type KeyRequest struct {
	Workspace string  `json:"workspace"`
	Kind      KeyKind `json:"kind"`
	Name      string  `json:"name,omitempty"`
	// ExpiresIn, when non-zero, makes the key expire that long after creation.
	ExpiresIn time.Duration `json:"-"`
}

// AuditListRequest filters and pages the audit trail (GET /v1/audit, the
// console's audit page, ladder audit list) and, without Cursor and Limit,
// an export (GET /v1/audit/export).
type AuditListRequest struct {
	Kind  string `json:"kind,omitempty"`  // a record kind, e.g. "review" (AuditReview)
	Actor string `json:"actor,omitempty"` // a key id, or "system"
	// Step is a step id ("post_tms"), in any queue, or "queue/step"
	// ("bills/post_tms"), as the records' data names them.
	Step   string `json:"step,omitempty"`
	Since  string `json:"since,omitempty"` // RFC 3339 or YYYY-MM-DD (that day's start, UTC), inclusive
	Until  string `json:"until,omitempty"` // RFC 3339, exclusive; or YYYY-MM-DD, that whole day included
	Cursor string `json:"cursor,omitempty"`
	Limit  int    `json:"limit,omitempty"` // 1–500; 0 means 50
}

// ImportRequest is an import of past records (see ImportRow): the file's
// bytes, its format (jsonl or csv) and the workspace its rows belong to.
type ImportRequest struct {
	Workspace string
	Format    string
	Data      []byte
}

package ladder

import (
	"context"
	"encoding/json"
	"time"
)

// GateDecisionRecord is one recorded decision of the evidence gate (an
// authorize call): what was asked, the verdict and its scores, and the
// evidence it was made on, with secrets already redacted. The gate package
// computes decisions; this is how they are kept and listed by
// gate_history_get.
type GateDecisionRecord struct {
	// ID is the decision_id returned to the caller ("gd_…").
	ID string `json:"decision_id"`
	// Seq orders the decisions of a store; the store assigns it, and
	// history pages by it. It never leaves the server except inside an
	// opaque cursor.
	Seq       int64  `json:"-"`
	Workspace string `json:"workspace"`
	// KeyID is the key that asked.
	KeyID string `json:"key_id"`
	// Case, PreconditionFn and ActionID (the commit id) say what was decided.
	Case           string `json:"case"`
	PreconditionFn string `json:"precondition_fn"`
	ActionID       string `json:"action_id"`
	// GateState is PASS, ESCALATE or BYPASS_TO_HUMAN; ReasonCode says why.
	GateState  string `json:"gate_state"`
	ReasonCode string `json:"reason_code"`
	// The scores of the last scoring and their weighted sum Q.
	R  float64 `json:"R"`
	C  float64 `json:"C"`
	O  float64 `json:"O"`
	Ro float64 `json:"Ro"`
	Q  float64 `json:"Q"`
	// RepairAttempts counts auto-repair rounds; VerifiableExt is the
	// function's verdict on whether the gap can be closed from outside.
	RepairAttempts int  `json:"repair_attempts"`
	VerifiableExt  bool `json:"verifiable_ext"`
	// HumanReadable and Notes explain the decision (secrets redacted).
	HumanReadable string `json:"human_readable"`
	Notes         string `json:"notes,omitempty"`
	// Evidence is the evidence the decision was made on, as canonical JSON
	// with secrets redacted.
	Evidence json.RawMessage `json:"evidence,omitempty"`
	At       time.Time       `json:"at"`
	// PayloadSHA256 is the SHA-256 (hex) of the canonical payload of the
	// capability call this decision authorizes or holds; empty for a bare
	// authorize. A call commits only on a PASS for its exact payload.
	PayloadSHA256 string `json:"payload_sha256,omitempty"`
}

// GateHistoryQuery selects recorded gate decisions of one workspace, newest
// first. Empty fields do not filter.
type GateHistoryQuery struct {
	Workspace      string // required: history is always scoped to one workspace
	Case           string
	PreconditionFn string
	ActionID       string
	GateState      string
	// Since and Until bound the decision time: Since ≤ at < Until. Zero
	// times do not bound.
	Since, Until time.Time
	// BeforeSeq, when non-zero, returns decisions with Seq < BeforeSeq: the
	// next page after a page whose last decision had that Seq.
	BeforeSeq int64
	// Limit caps the answer; 0 means 50.
	Limit int
}

// GateStore keeps the evidence gate's decisions.
type GateStore interface {
	// RecordGateDecision stores d (d.ID must be new) and appends audit in
	// the same transaction, so a decision is never kept without its audit
	// record nor the other way round. It returns d with Seq (and At, when
	// it was zero) filled.
	RecordGateDecision(ctx context.Context, d GateDecisionRecord, audit AuditEntry) (GateDecisionRecord, error)
	// GateHistory returns the decisions matching q, newest (highest Seq)
	// first. It never writes.
	GateHistory(ctx context.Context, q GateHistoryQuery) ([]GateDecisionRecord, error)
}

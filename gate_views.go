package ladder

import (
	"encoding/json"
	"time"
)

// GateScores are the four 4D-CQ dimensions of one scoring.
type GateScores struct {
	Relevance  float64 `json:"relevance"`  // R
	Coverage   float64 `json:"coverage"`   // C
	Ordering   float64 `json:"ordering"`   // O
	Robustness float64 `json:"robustness"` // Ro
}

// GateFunctionInfo describes one authorizable precondition function, as
// list_precondition_functions shows it.
type GateFunctionInfo struct {
	PreconditionFn string `json:"precondition_fn"` // the name authorize takes
	CommitID       string `json:"commit_id"`       // the commit it guards
	CommitName     string `json:"commit_name"`
	SoftCommit     bool   `json:"soft_commit"`
	HasAutoRepair  bool   `json:"has_auto_repair"` // a repair is declared
	Doc            string `json:"doc"`
	// EvidenceSchema is the declared JSON Schema; it is shared and must not
	// be modified.
	EvidenceSchema map[string]any `json:"evidence_schema"`
}

// GateCaseInfo describes one case and its authorizable functions.
type GateCaseInfo struct {
	ID          string             `json:"id"` // the case argument of authorize
	Name        string             `json:"name"`
	Description string             `json:"description"`
	Functions   []GateFunctionInfo `json:"functions"` // bypass_to_human commits left out
}

// GateFunctionsView is the list_precondition_functions answer: the case ids
// of the key's workspace and, for the case asked for (or every case), the
// functions authorize takes with the evidence schema of each.
type GateFunctionsView struct {
	Workspace string `json:"workspace"`
	// CaseIDs lists every gate case of the workspace, so a caller that
	// named none can pick one.
	CaseIDs []string       `json:"case_ids"`
	Cases   []GateCaseInfo `json:"cases"`
	// Sentence is the text content's first sentence.
	Sentence string `json:"-"`
}

// GateResult is an authorize answer (DESIGN.md §5) and one row of gate
// history: the contract fields, then the legacy fields kept for callers of
// the original tool. Only GateState PASS authorizes the action.
type GateResult struct {
	GateState           string     `json:"gate_state"`
	SchemaVersion       string     `json:"schema_version"`
	CQScores            GateScores `json:"cq_scores"`
	ReasonCode          string     `json:"reason_code"`
	AutoRepairAvailable bool       `json:"auto_repair_available"`
	HumanReadable       string     `json:"human_readable"`
	DecisionID          string     `json:"decision_id"`

	Case           string          `json:"case"`
	PreconditionFn string          `json:"precondition_fn"`
	ActionID       string          `json:"action_id"`
	Notes          string          `json:"notes,omitempty"`
	Evidence       json.RawMessage `json:"evidence,omitempty"`
	KeyID          string          `json:"key_id"`
	At             time.Time       `json:"at"`

	// Legacy fields.
	Route          string  `json:"route"`
	Authorized     bool    `json:"authorized"`
	R              float64 `json:"R"`
	C              float64 `json:"C"`
	O              float64 `json:"O"`
	Ro             float64 `json:"Ro"`
	Q              float64 `json:"Q"`
	VerifiableExt  bool    `json:"verifiable_ext"`
	RepairAttempts int     `json:"repair_attempts"`
}

// GateHistoryPage is one page of gate history, newest first.
type GateHistoryPage struct {
	Workspace string       `json:"workspace"`
	Decisions []GateResult `json:"decisions"`
	// NextCursor continues after this page; empty on the last page.
	NextCursor string `json:"next_cursor,omitempty"`
	HasMore    bool   `json:"has_more"`
	// Sentence is the text content's first sentence.
	Sentence string `json:"-"`
}

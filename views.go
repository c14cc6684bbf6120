package ladder

import "time"

// ReviewResult is what recording a review did.
type ReviewResult struct {
	Review     Review      `json:"review"`
	Lane       Lane        `json:"lane"`
	LaneChange *LaneChange `json:"lane_change,omitempty"`
}

// StepSummary is one row of which_steps_run_alone (seed 000).
type StepSummary struct {
	Queue              string   `json:"queue"`
	Step               string   `json:"step"`
	Name               string   `json:"name"`
	Lane               Lane     `json:"lane"`
	RunsAlone          bool     `json:"runs_alone"`
	MoneyMoving        bool     `json:"money_moving"`
	Why                string   `json:"why"`
	Last4WeeksAccuracy *float64 `json:"last_4_weeks_accuracy"`
	AuditRate          float64  `json:"audit_rate"`
	Evidence           string   `json:"evidence"`
}

// StepsView is the which_steps_run_alone answer.
type StepsView struct {
	Workspace string        `json:"workspace"`
	Steps     []StepSummary `json:"steps"`
	// Sentence is the one-sentence summary the text content starts with.
	Sentence string `json:"-"`
}

// OutcomeView is the outcome test in an evidence pack.
type OutcomeView struct {
	State  NIState      `json:"state"`
	Agent  OutcomeGroup `json:"agent"`
	Person OutcomeGroup `json:"person"`
	Margin float64      `json:"margin"`
	PValue *float64     `json:"p_value"`
}

// NextMoveView is the next possible move and how far the step is from it.
type NextMoveView struct {
	To    Lane                   `json:"to,omitempty"`
	Rule  string                 `json:"rule"`
	Needs map[string]Requirement `json:"needs"`
}

// EvidencePack is the step_evidence answer (DESIGN.md §4); its field names
// are the contract.
type EvidencePack struct {
	Workspace           string        `json:"workspace"`
	Queue               string        `json:"queue"`
	Step                string        `json:"step"`
	Name                string        `json:"name"`
	Lane                Lane          `json:"lane"`
	Pinned              bool          `json:"pinned"`
	MoneyMoving         bool          `json:"money_moving"`
	Class               RiskClass     `json:"class"`
	Why                 string        `json:"why"`
	EvidenceToWeek      int           `json:"evidence_to_week"`
	AuditRate           float64       `json:"audit_rate"`
	Figures             Figures       `json:"figures"`
	LaneChanges         []LaneChange  `json:"lane_changes"`
	OutcomeTest         OutcomeView   `json:"outcome_test"`
	NextMove            *NextMoveView `json:"next_move"`
	RecentDisagreements []Review      `json:"recent_disagreements"`
	RecentAudits        []Review      `json:"recent_audits"`
	Thresholds          Thresholds    `json:"thresholds"`
	// Sentence is the text content's first sentence(s) (seed 000).
	Sentence string `json:"-"`
}

// BacktestMove is one lane change, actual or simulated, in a backtest.
type BacktestMove struct {
	Week    int                `json:"week"`
	ISOWeek string             `json:"iso_week"`
	At      time.Time          `json:"at"`
	From    Lane               `json:"from"`
	To      Lane               `json:"to"`
	Rule    string             `json:"rule"`
	Numbers map[string]float64 `json:"numbers,omitempty"`
}

// BacktestStep is one step's replay: the lane changes that happened and
// the ones the given rules would have made, week by week.
type BacktestStep struct {
	Workspace string         `json:"workspace"`
	Queue     string         `json:"queue"`
	Step      string         `json:"step"`
	Name      string         `json:"name"`
	StartLane Lane           `json:"start_lane"`
	Actual    []BacktestMove `json:"actual"`
	Simulated []BacktestMove `json:"simulated"`
	EndActual Lane           `json:"end_actual"`
	EndSim    Lane           `json:"end_simulated"`
}

// Tool-definition changes, as ToolDefinitionChange.Change says them.
const (
	DefinitionChanged = "changed"
	DefinitionAdded   = "added"
	DefinitionRemoved = "removed"
)

// ToolDefinitionChange is a capability whose definition differs from the
// one the previous start recorded for its workspace.
type ToolDefinitionChange struct {
	Workspace  string `json:"workspace"`
	Capability string `json:"capability"`
	Change     string `json:"change"`             // changed, added or removed
	OldHash    string `json:"old_hash,omitempty"` // "" when added
	NewHash    string `json:"new_hash,omitempty"` // "" when removed
}

// AuditPage is one page of a workspace's audit trail, newest first. Each
// record is exactly as stored, so its hash can be recomputed.
type AuditPage struct {
	Workspace string        `json:"workspace"`
	Records   []AuditRecord `json:"records"`
	// NextCursor continues after this page; empty on the last page.
	NextCursor string `json:"next_cursor,omitempty"`
	HasMore    bool   `json:"has_more"`
}

// AuditVerifyResult is the state of the audit log's hash chain. Records of
// every workspace form one chain, so the walk covers them all, but the
// result holds only counts and sequence numbers, never a record's content.
type AuditVerifyResult struct {
	// Intact is true when every record verified.
	Intact bool `json:"intact"`
	// Verified is how many records, from seq 1, verified in order.
	Verified int64 `json:"verified"`
	// LastHash is the hash of the last verified record ("" for none).
	LastHash string `json:"last_hash"`
	// FirstBadSeq is the sequence number where the chain breaks (the
	// record after the last good one); null when Intact.
	FirstBadSeq *int64 `json:"first_bad_seq"`
	// Reason says how the chain breaks there; empty when Intact.
	Reason string `json:"reason,omitempty"`
	// Logs is the transparency log of the caller's workspace (of every
	// workspace for an admin key of all), re-checked: its records hash to
	// its leaves and its stored tree hashes to its latest signed
	// checkpoint's root. Intact is false when one is not.
	Logs []AuditLogVerdict `json:"logs"`
}

// AuditLogVerdict is what verifying one workspace's transparency log
// found.
type AuditLogVerdict struct {
	Workspace string `json:"workspace"`
	// Leaves is how many leaves the log has; CheckpointSize how many the
	// latest signed checkpoint covers (0 with none).
	Leaves         int64 `json:"leaves"`
	CheckpointSize int64 `json:"checkpoint_size"`
	Intact         bool  `json:"intact"`
	// BadSeq is the record where the log breaks, when one is to blame.
	BadSeq *int64 `json:"bad_seq,omitempty"`
	// Reason says what breaks and where; empty when Intact.
	Reason string `json:"reason,omitempty"`
}

// ImportResult is what an import of past records did.
type ImportResult struct {
	Workspace string `json:"workspace"`
	Rows      int    `json:"rows"`
	// SHA256 is the file's hash, as its audit record keeps it.
	SHA256 string              `json:"sha256"`
	Steps  []ImportStepSummary `json:"steps"`
}

// ImportStepSummary is what an import did to one step.
type ImportStepSummary struct {
	Queue    string `json:"queue"`
	Step     string `json:"step"`
	Reviews  int    `json:"reviews"`
	Audits   int    `json:"audits"`
	Outcomes int    `json:"outcomes"`
	// LaneChanges are the moves the rules made while the rows were
	// replayed, oldest first.
	LaneChanges []LaneChange `json:"lane_changes"`
	Lane        Lane         `json:"lane"`
}

// CapabilityView is one capability as GET /v1/capabilities lists it: what
// an agent key of the workspace may call, and what decides each call. It
// is what tools/list says on MCP, without the executor's address.
type CapabilityView struct {
	ID          string          `json:"id"`
	Title       string          `json:"title"`
	Description string          `json:"description"`
	HumanGate   bool            `json:"human_gate"`
	ReadOnly    bool            `json:"read_only"`
	Step        string          `json:"step,omitempty"`
	Lane        Lane            `json:"lane,omitempty"`
	Gate        *CapabilityGate `json:"gate,omitempty"`
	ScopeFields []string        `json:"scope_fields,omitempty"`
	Payload     map[string]any  `json:"payload_schema,omitempty"`
}

// CapabilitiesView is the answer of GET /v1/capabilities.
type CapabilitiesView struct {
	Workspace    string           `json:"workspace"`
	Capabilities []CapabilityView `json:"capabilities"`
}

// Package gate is the 4D-CQ evidence gate: it decides whether submitted
// evidence is good enough for an agent to perform an irreversible action (a
// commit) on its own.
//
// A gate case declares commits; each commit names a precondition function
// that scores the evidence on four dimensions — relevance (R), coverage (C),
// ordering (O) and robustness (Ro) — with CEL expressions written in config,
// not code. [Compile] checks and compiles every expression once; [Gate.Authorize]
// then validates the evidence against the function's JSON Schema, scores it,
// runs the bounded auto-repair loop and returns a [Decision] whose GateState
// is PASS, ESCALATE or BYPASS_TO_HUMAN. An agent never treats an action as
// authorized unless GateState is PASS.
//
// The package is pure and in memory: no I/O, no clock, no storage. Recording
// decisions, serving them over MCP or REST and loading cases from YAML are the
// jobs of other packages. A *Gate is safe for concurrent use.
package gate

import "github.com/ladderhq/ladder"

// The gate states a Decision can carry. AUTO_REPAIR is internal to the
// routing loop and never returned.
const (
	StatePass          = "PASS"
	StateEscalate      = "ESCALATE"
	StateBypassToHuman = "BYPASS_TO_HUMAN"
)

// SchemaVersion is the version of the Decision contract; callers check it
// before relying on the field set.
const SchemaVersion = "1"

// The reason codes a Decision can carry (DESIGN.md §5).
const (
	// ReasonPassAboveThreshold: Q reached τ_pass (possibly after repair).
	ReasonPassAboveThreshold = "PASS_ABOVE_THRESHOLD"
	// ReasonQualityBelowRepairThreshold: Q stayed below τ_repair, or repair
	// made things worse; the evidence is too weak to repair.
	ReasonQualityBelowRepairThreshold = "QUALITY_BELOW_REPAIR_THRESHOLD"
	// ReasonGapNotExternallyVerifiable: Q is repairable, but the function says
	// the gap cannot be closed by outside verification.
	ReasonGapNotExternallyVerifiable = "GAP_NOT_EXTERNALLY_VERIFIABLE"
	// ReasonAutoRepairDryRoundsExhausted: repair ran but k_dry rounds in a
	// row brought nothing new.
	ReasonAutoRepairDryRoundsExhausted = "AUTO_REPAIR_DRY_ROUNDS_EXHAUSTED"
	// ReasonAutoRepairUnavailableNoRepairFn: Q is repairable but the
	// function declares no repair.
	ReasonAutoRepairUnavailableNoRepairFn = "AUTO_REPAIR_UNAVAILABLE_NO_REPAIR_FN"
	// ReasonSoftCommitPromiseSupported: a soft commit's promise is backed by
	// feasibility evidence; the commit passes.
	ReasonSoftCommitPromiseSupported = "SOFT_COMMIT_PROMISE_SUPPORTED"
	// ReasonSoftCommitPromiseUnsupported: a soft commit contains a promise
	// without feasibility evidence; a person must decide.
	ReasonSoftCommitPromiseUnsupported = "SOFT_COMMIT_PROMISE_UNSUPPORTED"
	// ReasonBypassHumanJudgmentRequired: the commit is bypass_to_human and
	// is never authorized by evidence alone.
	ReasonBypassHumanJudgmentRequired = "BYPASS_HUMAN_JUDGMENT_REQUIRED"
	// ReasonOrderingPreconditionUnmet: the result is not PASS and the
	// ordering score is exactly 0 — the action's prerequisite step was not
	// done at all, which no amount of other evidence can make up for.
	ReasonOrderingPreconditionUnmet = "ORDERING_PRECONDITION_UNMET"
	// ReasonEvaluatorFault: an expression failed, or yielded a value of the
	// wrong type or out of range; the gate fails closed to a person.
	ReasonEvaluatorFault = "EVALUATOR_FAULT"
	// ReasonDimensionBelowFloor: Q passed, but one dimension is below its
	// declared floor (min), so a failed red line was not averaged away.
	ReasonDimensionBelowFloor = "DIMENSION_BELOW_FLOOR"
	// ReasonEvidenceNotBound: the evidence of a capability call does not
	// name what its payload acts on (a bound field differs or is absent),
	// so it is not scored: evidence authorizes only the action it
	// describes.
	ReasonEvidenceNotBound = "EVIDENCE_NOT_BOUND_TO_PAYLOAD"
)

// ReasonCodes lists every reason code, for documentation and exhaustive tests.
var ReasonCodes = []string{
	ReasonPassAboveThreshold,
	ReasonQualityBelowRepairThreshold,
	ReasonGapNotExternallyVerifiable,
	ReasonAutoRepairDryRoundsExhausted,
	ReasonAutoRepairUnavailableNoRepairFn,
	ReasonSoftCommitPromiseSupported,
	ReasonSoftCommitPromiseUnsupported,
	ReasonBypassHumanJudgmentRequired,
	ReasonOrderingPreconditionUnmet,
	ReasonEvaluatorFault,
	ReasonDimensionBelowFloor,
	ReasonEvidenceNotBound,
}

// Defaults from the 4D-CQ paper, used when a Case leaves a field unset.
const (
	DefaultWeight    = 0.25
	DefaultTauPass   = 0.85
	DefaultTauRepair = 0.50
	DefaultKDry      = 3
)

// Case is a named set of commits, each guarded by a precondition function.
// The config package fills it from YAML; nil pointers take the defaults.
type Case struct {
	// ID names the case in authorize calls (e.g. "ai_investment").
	ID string `yaml:"id" json:"id"`
	// Name is a plain-language title.
	Name string `yaml:"name" json:"name"`
	// Description says what the case governs.
	Description string `yaml:"description" json:"description"`
	// Weights weigh R, C, O and Ro in Q; nil means 0.25 each.
	Weights *Weights `yaml:"weights,omitempty" json:"weights,omitempty"`
	// TauPass is the Q at or above which evidence passes; nil means 0.85.
	TauPass *float64 `yaml:"tau_pass,omitempty" json:"tau_pass,omitempty"`
	// TauRepair is the Q at or above which auto-repair is tried; nil means 0.50.
	TauRepair *float64 `yaml:"tau_repair,omitempty" json:"tau_repair,omitempty"`
	// KDry is how many repair rounds in a row may bring nothing new before
	// the gate gives up; nil means 3.
	KDry *int `yaml:"k_dry,omitempty" json:"k_dry,omitempty"`
	// Commits are the irreversible actions the case governs.
	Commits []Commit `yaml:"commits" json:"commits"`
}

// Weights weigh the four dimensions in Q. They must be non-negative and sum
// to 1 so that Q stays in [0,1] like the thresholds it is compared with. The
// keys are the dimension names as the 4D-CQ paper writes them, the same keys
// Function.Min uses.
type Weights struct {
	R  float64 `yaml:"R" json:"R"`   // relevance
	C  float64 `yaml:"C" json:"C"`   // coverage
	O  float64 `yaml:"O" json:"O"`   // ordering
	Ro float64 `yaml:"Ro" json:"Ro"` // robustness
}

// Commit is one irreversible action of a case.
type Commit struct {
	// ID names the commit (the action_id of gate history).
	ID string `yaml:"id" json:"id"`
	// Name is a plain-language name.
	Name string `yaml:"name" json:"name"`
	// SoftCommit marks a commit that may contain a promise; it passes only
	// if it contains no promise or the promise has feasibility evidence.
	SoftCommit bool `yaml:"soft_commit,omitempty" json:"soft_commit,omitempty"`
	// BypassToHuman marks a commit a person always makes; it has no
	// function, is not listed and authorize refuses it.
	BypassToHuman bool `yaml:"bypass_to_human,omitempty" json:"bypass_to_human,omitempty"`
	// Fn is the precondition function; nil exactly when BypassToHuman.
	Fn *Function `yaml:"precondition_fn,omitempty" json:"precondition_fn,omitempty"`
}

// Function is a precondition function: an evidence schema and the CEL
// expressions that score evidence of that shape. Every expression sees one
// variable, evidence, a map(string, dyn).
type Function struct {
	// Name is what authorize calls take as precondition_fn.
	Name string `yaml:"name" json:"name"`
	// Doc tells callers what the function checks and what to send.
	Doc string `yaml:"doc" json:"doc"`
	// Evidence is a JSON Schema object; every property must have a type and
	// a description, because list_precondition_functions shows it to callers
	// as the only guide to what to send. An absent property with a declared
	// "default" gets that value before scoring; an absent boolean property
	// without one gets false, so expressions need not guard every flag with
	// has().
	Evidence map[string]any `yaml:"evidence" json:"evidence"`
	// R, C, O and Ro each yield a number in [0,1]; anything else at run time
	// is an evaluator fault.
	R  string `yaml:"R" json:"R"`   // relevance
	C  string `yaml:"C" json:"C"`   // coverage
	O  string `yaml:"O" json:"O"`   // ordering; exactly 0 means the ordering precondition is unmet
	Ro string `yaml:"Ro" json:"Ro"` // robustness
	// VerifiableExt yields a bool: can the gap be closed by outside
	// verification? Empty means "true".
	VerifiableExt string `yaml:"verifiable_ext,omitempty" json:"verifiable_ext,omitempty"`
	// Notes yields a string shown with the decision (secrets redacted).
	Notes string `yaml:"notes,omitempty" json:"notes,omitempty"`
	// Repair maps evidence fields to CEL expressions giving their new value;
	// all are evaluated against the evidence before the round.
	Repair map[string]string `yaml:"repair,omitempty" json:"repair,omitempty"`
	// Min holds per-dimension floors keyed R, C, O, Ro.
	Min map[string]float64 `yaml:"min,omitempty" json:"min,omitempty"`
	// Promise yields a bool for soft commits: does the evidence contain a
	// promise? Empty means "false".
	Promise string `yaml:"promise,omitempty" json:"promise,omitempty"`
	// Feasibility yields a bool for soft commits: is the promise backed by
	// feasibility evidence? Empty means "false".
	Feasibility string `yaml:"feasibility,omitempty" json:"feasibility,omitempty"`
}

// Decision is the gate's answer for one authorize call.
type Decision struct {
	// GateState is PASS, ESCALATE or BYPASS_TO_HUMAN; only PASS authorizes.
	GateState string `json:"gate_state"`
	// SchemaVersion is always SchemaVersion ("1").
	SchemaVersion string `json:"schema_version"`
	// Case, PreconditionFn and CommitID say what was decided, so a recorded
	// decision can be filtered without the request beside it.
	Case           string `json:"case"`
	PreconditionFn string `json:"precondition_fn"`
	CommitID       string `json:"commit_id"`
	// Scores and Q are those of the last scoring.
	Scores ladder.GateScores `json:"cq_scores"`
	Q      float64           `json:"Q"`
	// ReasonCode is one of ReasonCodes.
	ReasonCode string `json:"reason_code"`
	// AutoRepairAvailable reports whether repair ran (RepairAttempts > 0).
	AutoRepairAvailable bool `json:"auto_repair_available"`
	// RepairAttempts counts repair rounds, dry ones included.
	RepairAttempts int `json:"repair_attempts"`
	// VerifiableExt is the function's verifiable_ext of the last scoring.
	VerifiableExt bool `json:"verifiable_ext"`
	// HumanReadable explains the decision in one or two sentences, with
	// secrets redacted.
	HumanReadable string `json:"human_readable"`
	// Notes is the function's notes on the final evidence, secrets redacted.
	Notes string `json:"notes,omitempty"`
	// Evidence is the evidence the decision was made on: the caller's, with
	// schema defaults filled in and repairs applied. Callers redact it before
	// logging it.
	Evidence map[string]any `json:"evidence"`
}

// Authorized reports whether the decision authorizes the action; it is the
// legacy "authorized" field.
func (d Decision) Authorized() bool { return d.GateState == StatePass }

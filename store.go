package ladder

import (
	"context"
	"time"
)

// Store is everything ladder keeps. It has two implementations, sqlite
// (embedded default) and postgres (several replicas on one database), and
// one conformance suite, storetest, that runs against both.
//
// Every write that acknowledges a caller is durable when the method returns
// (group commit batches concurrent writes into one transaction), and every
// such write carries its audit entries, appended in the same transaction: a
// write whose audit record cannot be written does not happen at all.
type Store interface {
	KeyStore
	AuditStore
	TlogStore
	LadderStore
	GateStore
	ApprovalStore
	CallStore
	SessionStore
	EventStore
	// Ping reports whether the store can be read and durably written now:
	// it reads, then makes a small durable write of its own through the
	// same path as every other write (an empty or read-only transaction
	// would succeed on a full disk or a read-only database). The write
	// leaves nothing a caller can see (no audit record). Anything that
	// stops writes is an error wrapping ErrUnavailable.
	Ping(ctx context.Context) error
	// Close flushes pending writes and releases the database.
	Close() error
}

// KeyStore keeps keys. Only the hash of a key's secret is stored.
type KeyStore interface {
	// CreateKey stores k (k.ID must be new) and appends audit.
	CreateKey(ctx context.Context, k Key, audit AuditEntry) error
	// GetKey returns the key with that id, or ErrNotFound.
	GetKey(ctx context.Context, id string) (Key, error)
	// ListKeys returns the keys of a workspace ("" for all), oldest first.
	ListKeys(ctx context.Context, workspace string) ([]Key, error)
	// RevokeKey marks the key revoked at the given time, revokes its
	// console sessions (SessionStore) at the same time, and appends audit,
	// all in one transaction. Revoking a revoked key is not an error; an
	// unknown id is ErrNotFound.
	RevokeKey(ctx context.Context, id string, at time.Time, audit AuditEntry) error
	// CountKeys returns how many keys exist, revoked ones included.
	CountKeys(ctx context.Context) (int, error)
}

// AuditQuery selects audit records. Every filter left zero matches every
// record; the filters that are set must all match.
type AuditQuery struct {
	Workspace string // "" for every workspace
	Kind      string // "" for every kind
	Actor     string // "" for every actor; else the record's actor exactly
	// Queue and Step match the queue and step a record's data names (see
	// AuditStepOf); "" matches any. Step alone matches that step id in
	// any queue.
	Queue     string
	Step      string
	Since     time.Time // zero: no bound; else records with at >= Since
	Until     time.Time // zero: no bound; else records with at < Until
	AfterSeq  int64     // records with seq > AfterSeq
	Limit     int       // at most this many; 0 means 50
	Desc      bool      // newest first (then BeforeSeq applies instead of AfterSeq)
	BeforeSeq int64     // with Desc: records with seq < BeforeSeq; 0 means no bound
}

// AuditStore is the append-only, hash-chained audit log.
type AuditStore interface {
	// AppendAudit appends entries in order, sealing each into the chain, and
	// returns the stored records.
	AppendAudit(ctx context.Context, entries ...AuditEntry) ([]AuditRecord, error)
	// ListAudit returns records matching q, in seq order (or reverse with Desc).
	ListAudit(ctx context.Context, q AuditQuery) ([]AuditRecord, error)
	// WalkAudit calls fn for every record with seq > afterSeq, in order,
	// stopping at the first error fn returns.
	WalkAudit(ctx context.Context, afterSeq int64, fn func(AuditRecord) error) error
}

// StepKey names one step of one workspace.
type StepKey struct {
	Workspace string `json:"workspace"`
	Queue     string `json:"queue"`
	Step      string `json:"step"`
}

// ReviewDecider is called by RecordReview inside the transaction that stores
// the review, with the step's state and its weekly aggregates after the
// review was counted. It returns the step's new state (lane, epoch, audit
// rate) and any lane change with the audit entries describing it. Running
// the rules inside the transaction is what keeps concurrent reviews (or
// several replicas) from losing or doubling a lane change.
type ReviewDecider func(state StepState, weeks []WeekAgg) (StepState, *LaneChange, []AuditEntry, error)

// ReviewWrite is a review to record.
type ReviewWrite struct {
	Review Review
	// Week is the ISO week ("2026-W35") the review counts in, and WeekStart
	// the Monday 00:00 UTC that starts it.
	Week      string
	WeekStart time.Time
	Audit     AuditEntry
	Decide    ReviewDecider
}

// LaneWrite moves a step to a lane by a person's hand (pin, unpin) or by a
// rule outside a review.
type LaneWrite struct {
	Key    StepKey
	Change LaneChange
	Pinned bool
	Reason string
	Audit  []AuditEntry
	// IfVersion, when non-zero, makes the write fail with ErrConflict if the
	// step state changed since it was read.
	IfVersion int64
}

// ReviewQuery selects reviews of one step.
type ReviewQuery struct {
	Key          StepKey
	Disagreement bool       // only disagreements
	Kind         ReviewKind // "" for every kind
	Limit        int
}

// OutcomeCounts are the outcome test's inputs for one step.
type OutcomeCounts struct {
	AgentN, AgentFailures   int
	PersonN, PersonFailures int
}

// LadderStore keeps routes, reviews, weekly aggregates, lane state and
// outcomes.
type LadderStore interface {
	// EnsureSteps inserts the state of every step that has none yet (a new
	// database, or a step added to the config). Existing states are kept.
	EnsureSteps(ctx context.Context, states []StepState) error
	// GetStepState returns one step's state, or ErrNotFound.
	GetStepState(ctx context.Context, k StepKey) (StepState, error)
	// ListStepStates returns the states of a workspace's steps.
	ListStepStates(ctx context.Context, workspace string) ([]StepState, error)
	// RecordRoute stores r unless a route for the same workspace, queue,
	// step, item and lane epoch exists; either way it returns the stored
	// route and whether it was created now. The audit entry is appended only
	// when the route is created. When the step's lane epoch is no longer
	// r.LaneEpoch (its lane changed since r was decided), it stores nothing
	// and returns ErrLaneChanged; when the epoch is the same but the step's
	// audit rate is no longer r.StateAuditRate, it stores nothing and
	// returns ErrAuditRateChanged (a route of the item stored already in
	// the epoch is still returned): either way the caller decides again.
	RecordRoute(ctx context.Context, r Route, audit AuditEntry) (Route, bool, error)
	// GetRoute returns a route of the workspace by id, or ErrNotFound (also
	// when the route belongs to another workspace).
	GetRoute(ctx context.Context, workspace, id string) (Route, error)
	// RecordReview stores a review, adds it to its week's aggregate, runs
	// the decider and stores its result, all in one transaction. A second
	// review of the same route that is not an adjudication is ErrConflict.
	RecordReview(ctx context.Context, w ReviewWrite) (StepState, *LaneChange, error)
	// SetLane applies a lane write.
	SetLane(ctx context.Context, w LaneWrite) (StepState, error)
	// WeekAggs returns a step's weekly aggregates, oldest week first, one
	// row per week and epoch.
	WeekAggs(ctx context.Context, k StepKey) ([]WeekAgg, error)
	// LaneChanges returns a step's lane changes, oldest first.
	LaneChanges(ctx context.Context, k StepKey) ([]LaneChange, error)
	// Reviews returns a step's reviews matching q, newest first.
	Reviews(ctx context.Context, q ReviewQuery) ([]Review, error)
	// RecordOutcome stores an outcome and appends audit.
	RecordOutcome(ctx context.Context, o Outcome, audit AuditEntry) error
	// OutcomeCounts returns the outcome test's counts for a step.
	OutcomeCounts(ctx context.Context, k StepKey) (OutcomeCounts, error)
	// Outcomes returns a step's outcomes, oldest first (a backtest
	// replays them with the reviews).
	Outcomes(ctx context.Context, k StepKey) ([]Outcome, error)
	// ImportRecords runs fn in one write transaction: everything fn
	// writes through tx commits together, or, when fn returns an error,
	// nothing does. An import of past records drives RecordReviewTx
	// through it row by row, as live reviews would have.
	ImportRecords(ctx context.Context, fn func(tx ImportTx) error) error
}

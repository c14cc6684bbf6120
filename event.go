package ladder

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Event types: what an event reports (DESIGN.md §8a).
const (
	EventApprovalRequested       = "approval.requested"
	EventApprovalDecided         = "approval.decided"
	EventApprovalExpired         = "approval.expired"
	EventApprovalExecutionFailed = "approval.execution_failed"
	EventLaneChanged             = "lane.changed"
	EventGateHeld                = "gate.held"
	EventAuditUnavailable        = "audit.unavailable"
)

// EventTypes lists every event type, in the order the docs give them.
func EventTypes() []string {
	return []string{
		EventApprovalRequested, EventApprovalDecided, EventApprovalExpired, EventApprovalExecutionFailed,
		EventLaneChanged, EventGateHeld, EventAuditUnavailable,
	}
}

// Event is a change worth telling people about, written in the same
// transaction as the change (the outbox) and delivered after commit. Its
// JSON is the Standard Webhooks payload: type, timestamp and data. An event
// carries ids, names and figures only: never a key, a payload or evidence,
// so nothing redacted elsewhere can leak through it.
type Event struct {
	// ID is stable across every delivery of the event (the webhook-id), so
	// a receiver drops repeats.
	ID        string    `json:"id"`
	Type      string    `json:"type"`
	Workspace string    `json:"workspace"`
	At        time.Time `json:"timestamp"`
	Data      EventData `json:"data"`
}

// EventData is what an event is about. Fields that do not apply are empty.
type EventData struct {
	// Text is one short sentence a person reads in a chat message.
	Text string `json:"text"`
	// Link is the console page of the subject: a path (/console/…) as
	// stored; the dispatcher makes it absolute with the server's public
	// URL.
	Link string `json:"link"`

	ApprovalID     string `json:"approval_id,omitempty"`
	ApprovalKind   string `json:"approval_kind,omitempty"`
	Capability     string `json:"capability,omitempty"`
	Decision       string `json:"decision,omitempty"` // approved, edited, rejected
	DecidedBy      string `json:"decided_by,omitempty"`
	CallID         string `json:"call_id,omitempty"`
	RouteID        string `json:"route_id,omitempty"`
	GateDecisionID string `json:"gate_decision_id,omitempty"`
	GateState      string `json:"gate_state,omitempty"`
	GateCase       string `json:"gate_case,omitempty"`
	ReasonCode     string `json:"reason_code,omitempty"`
	LaneChangeID   string `json:"lane_change_id,omitempty"`
	Queue          string `json:"queue,omitempty"`
	Step           string `json:"step,omitempty"`
	Item           string `json:"item,omitempty"`
	Lane           Lane   `json:"lane,omitempty"`
	FromLane       Lane   `json:"from_lane,omitempty"`
	Rule           string `json:"rule,omitempty"`
	// Figures are the numbers behind a lane change or a proposal's step
	// (accuracy, Wilson bounds, n).
	Figures map[string]float64 `json:"figures,omitempty"`
	// ErrorCode is the refusal name of a failed execution.
	ErrorCode string `json:"error_code,omitempty"`
}

// NewEvent returns an event of type typ with a new id.
func NewEvent(typ, workspace string, at time.Time, d EventData) *Event {
	return &Event{ID: NewID("evt"), Type: typ, Workspace: workspace, At: NormTime(at), Data: d}
}

// ApprovalLink is the console page of an approval.
func ApprovalLink(id string) string { return "/console/approvals/" + id }

// StepLink is the console page of a step.
func StepLink(queue, step string) string { return "/console/steps/" + queue + "/" + step }

// approvalData is what every approval event says of its approval.
func approvalData(a Approval) EventData {
	d := EventData{
		Link: ApprovalLink(a.ID), ApprovalID: a.ID, ApprovalKind: a.Kind, Capability: a.Capability,
		RouteID: a.RouteID, GateDecisionID: a.GateDecisionID, Queue: a.Queue, Step: a.Step, Item: a.Item,
	}
	if a.Kind == ApprovalProposal {
		d.Lane = LanePropose // a proposal is made in propose
	}
	return d
}

// ApprovalRequestedEvent reports a new pending approval. lane, when known,
// is the lane of the approval's step now.
func ApprovalRequestedEvent(a Approval, lane Lane) *Event {
	d := approvalData(a)
	if lane != "" {
		d.Lane = lane
	}
	what := a.Capability
	if a.Step != "" {
		what = fmt.Sprintf("%s for %s %s", a.Capability, a.Step, a.Item)
	}
	d.Text = fmt.Sprintf("Approval needed: %s (%s).", strings.TrimSpace(what), a.Kind)
	return NewEvent(EventApprovalRequested, a.Workspace, a.CreatedAt, d)
}

// ApprovalDecidedEvent reports a person's decision: approved, edited
// (approved with a changed payload) or rejected.
func ApprovalDecidedEvent(a Approval, decision string, at time.Time) *Event {
	d := approvalData(a)
	d.Decision, d.DecidedBy, d.CallID = decision, a.DecidedBy, a.CallID
	d.Text = fmt.Sprintf("Approval %s of %s was %s by %s.", a.ID, a.Capability, decision, a.DecidedBy)
	return NewEvent(EventApprovalDecided, a.Workspace, at, d)
}

// ApprovalExpiredEvent reports an approval nobody decided in time.
func ApprovalExpiredEvent(a Approval, at time.Time) *Event {
	d := approvalData(a)
	d.Text = fmt.Sprintf("Approval %s of %s expired undecided; nothing ran.", a.ID, a.Capability)
	return NewEvent(EventApprovalExpired, a.Workspace, at, d)
}

// ApprovalExecutionFailedEvent reports an approved call that failed when
// it ran. code is the refusal name of the failure.
func ApprovalExecutionFailedEvent(a Approval, code string, at time.Time) *Event {
	d := approvalData(a)
	d.DecidedBy, d.CallID, d.ErrorCode = a.DecidedBy, a.CallID, code
	d.Text = fmt.Sprintf("Approved call %s of %s failed: %s.", a.CallID, a.Capability, code)
	return NewEvent(EventApprovalExecutionFailed, a.Workspace, at, d)
}

// LaneChangedEvent reports a step's lane change (or pin, or unpin).
func LaneChangedEvent(c LaneChange) *Event {
	d := EventData{
		Link: StepLink(c.Queue, c.Step), LaneChangeID: c.ID, Queue: c.Queue, Step: c.Step,
		Lane: c.To, FromLane: c.From, Rule: c.Rule, Figures: c.Numbers,
	}
	d.Text = fmt.Sprintf("%s moved from %s to %s (%s).", c.Step, c.From, c.To, c.Rule)
	if c.From == c.To {
		d.Text = fmt.Sprintf("%s stays in %s (%s).", c.Step, c.To, c.Rule)
	}
	return NewEvent(EventLaneChanged, c.Workspace, c.At, d)
}

// GateHeldEvent reports an evidence gate verdict other than PASS.
func GateHeldEvent(r GateDecisionRecord) *Event {
	d := EventData{
		Link: "/console/gate", GateDecisionID: r.ID, GateState: r.GateState, GateCase: r.Case, ReasonCode: r.ReasonCode,
		Figures: map[string]float64{"R": r.R, "C": r.C, "O": r.O, "Ro": r.Ro, "Q": r.Q},
	}
	d.Text = fmt.Sprintf("The evidence gate held %s of %s: %s (%s).", r.ActionID, r.Case, r.GateState, r.ReasonCode)
	return NewEvent(EventGateHeld, r.Workspace, r.At, d)
}

// AuditUnavailableEvent reports that durable writes failed from since to
// at, and every call that needed one was refused with AUDIT_UNAVAILABLE.
// It is written when writes work again: the outbox lives in the same
// database, so nothing could be written while they failed.
func AuditUnavailableEvent(workspace string, since, at time.Time) *Event {
	d := EventData{Link: "/console/audit"}
	d.Text = fmt.Sprintf("Audit writes failed for %s (from %s); calls were refused with AUDIT_UNAVAILABLE until they worked again.",
		at.Sub(since).Round(time.Second), since.UTC().Format(time.RFC3339))
	return NewEvent(EventAuditUnavailable, workspace, at, d)
}

// DeliveryStatus is where one event's delivery to one endpoint stands.
type DeliveryStatus string

// The delivery statuses.
const (
	DeliveryPending   DeliveryStatus = "pending"   // not yet delivered; retried at NextAt
	DeliveryDelivered DeliveryStatus = "delivered" // the endpoint answered 2xx
	DeliveryDead      DeliveryStatus = "dead"      // every try failed: dead-lettered
)

// Delivery is one event's delivery to one endpoint.
type Delivery struct {
	ID        string         `json:"delivery_id"`
	EventID   string         `json:"event_id"`
	EventType string         `json:"event_type"`
	Workspace string         `json:"workspace"`
	Endpoint  string         `json:"endpoint"`
	Status    DeliveryStatus `json:"status"`
	Attempts  int            `json:"attempts"`
	NextAt    time.Time      `json:"next_at"`
	LastError string         `json:"last_error,omitempty"`
	// LastStatus is the endpoint's last HTTP status (0: none came).
	LastStatus  int        `json:"last_status,omitempty"`
	CreatedAt   time.Time  `json:"created_at"`
	DeliveredAt *time.Time `json:"delivered_at,omitempty"`
	// Event is the event delivered; ClaimDeliveries fills it.
	Event *Event `json:"-"`
	// Seq orders deliveries for paging; the store assigns it.
	Seq int64 `json:"-"`
}

// DeliveryResult is the outcome of one try of a delivery.
type DeliveryResult struct {
	ID string
	// Delivered: the endpoint answered 2xx.
	Delivered bool
	// Dead: the try failed and it was the last one.
	Dead bool
	// RetryIn is how long after now, by the store's clock, to try again
	// (a failure that is not the last).
	RetryIn    time.Duration
	Error      string
	StatusCode int
}

// DeliveryQuery selects deliveries of one workspace, newest first.
type DeliveryQuery struct {
	Workspace string
	Status    DeliveryStatus // "" for every status
	Endpoint  string         // "" for every endpoint
	EventID   string         // "" for every event
	BeforeSeq int64          // 0 for the newest
	Limit     int            // 0 means 50
}

// DeliveryStats are the figures of the delivery metrics.
type DeliveryStats struct {
	// Counts by status.
	Pending, Delivered, Dead int
	// Retrying counts pending deliveries tried at least once.
	Retrying int
	// OldestPending is the age of the oldest pending delivery's event, or
	// of the oldest event not yet fanned out (0 when none).
	OldestPending time.Duration
}

// EventStore keeps the outbox: events written with the changes they report
// (an AuditEntry's Event, stored by the store in the entry's transaction)
// and their deliveries. Every method is safe across replicas: each
// delivery is claimed by one replica at a time, under a lease.
type EventStore interface {
	// FanOut turns up to limit events not yet fanned out, oldest first,
	// into one pending delivery per endpoint targets names for it, due
	// now, and returns how many events it took. Across replicas each event
	// is fanned out once.
	FanOut(ctx context.Context, limit int, targets func(Event) []string) (int, error)
	// ClaimDeliveries returns up to limit pending deliveries due now by the
	// store's clock whose lease is free, oldest due first, each with its
	// Event, and leases them for lease: no other caller claims them until
	// the lease ends or Finish records a result. slots caps how many are
	// claimed per endpoint (an endpoint missing from slots gets none).
	ClaimDeliveries(ctx context.Context, limit int, lease time.Duration, slots map[string]int) ([]Delivery, error)
	// FinishDelivery records one try's outcome and frees the lease: the
	// try is counted, and the delivery is delivered, dead, or pending
	// until r.RetryIn from now.
	FinishDelivery(ctx context.Context, r DeliveryResult) error
	// ListDeliveries returns deliveries matching q, newest first.
	ListDeliveries(ctx context.Context, q DeliveryQuery) ([]Delivery, error)
	// Redeliver makes a delivery of the workspace pending and due now
	// again, whatever its status, its tries counted anew; an unknown id
	// (or another workspace's) is ErrNotFound.
	Redeliver(ctx context.Context, workspace, id string) (Delivery, error)
	// DeliveryStats returns the figures of the delivery metrics. It reads
	// indexes, not the whole table: delivered rows are bounded by pruning.
	DeliveryStats(ctx context.Context) (DeliveryStats, error)
	// RetireDeliveries makes every pending delivery to an endpoint not in
	// endpoints dead, with reason as its last error, and returns how many
	// it retired per endpoint: an endpoint removed from the config leaves
	// no delivery waiting forever.
	RetireDeliveries(ctx context.Context, endpoints []string, reason string) (map[string]int, error)
	// PruneDeliveries deletes up to limit deliveries delivered before
	// before, oldest first, then up to limit events fanned out before
	// before that have no delivery left, and returns how many rows it
	// deleted. Pending and dead deliveries (and their events) stay.
	PruneDeliveries(ctx context.Context, before time.Time, limit int) (int, error)
}

// EndpointRemoved is the last error of a delivery retired because its
// endpoint is no longer configured.
const EndpointRemoved = "endpoint removed from config"

// DeliveryListRequest selects a page of deliveries (GET
// /v1/webhooks/deliveries).
type DeliveryListRequest struct {
	// Workspace is required of an all-workspaces admin key, and otherwise
	// the key's own.
	Workspace string `json:"workspace,omitempty"`
	Status    string `json:"status,omitempty"`   // pending, delivered, dead
	Endpoint  string `json:"endpoint,omitempty"` // a webhook's name
	EventID   string `json:"event_id,omitempty"`
	Cursor    string `json:"cursor,omitempty"`
	Limit     int    `json:"limit,omitempty"`
}

// DeliveryPage is one page of deliveries, newest first.
type DeliveryPage struct {
	Deliveries []Delivery `json:"deliveries"`
	NextCursor string     `json:"next_cursor,omitempty"`
}

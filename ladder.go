// Package ladder is the domain of the ladder server: the words of the design
// (workspace, key, queue, step, lane, route, review, outcome, capability,
// approval, gate case, audit log) as plain Go types, the service and store
// interfaces the rest of the program implements, and the Error type whose
// codes every surface (REST, MCP, CLI) shares.
//
// It owns the contract: the request, answer and view types every surface
// and client shares (requests.go, views.go, approval_views.go,
// gate_views.go, with the figures, thresholds and gate scores they are made
// of) and the service interfaces a caller bound to one key uses
// (LadderService, ApprovalService, GateService, CapabilityService in
// service.go), implemented in process by service.Caller and over REST by
// client.Client. A client therefore needs this package alone, not the
// service, the gate's CEL engine or a store; TestLayering holds that.
//
// It imports only the standard library; each outside dependency lives in a
// package of its own (see DESIGN.md §9).
package ladder

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// Lane is where a step stands on the ladder.
type Lane string

// The lanes, lowest autonomy first.
const (
	LaneHumanOnly Lane = "human_only"
	LaneShadow    Lane = "shadow"
	LanePropose   Lane = "propose"
	LaneAuto      Lane = "auto"
)

// Lanes lists every lane, lowest autonomy first.
var Lanes = []Lane{LaneHumanOnly, LaneShadow, LanePropose, LaneAuto}

// Valid reports whether l is one of the four lanes.
func (l Lane) Valid() bool {
	switch l {
	case LaneHumanOnly, LaneShadow, LanePropose, LaneAuto:
		return true
	}
	return false
}

// Decision is the answer a route gives for one item at one step.
type Decision string

// The decisions.
const (
	DecisionActAlone  Decision = "act_alone"
	DecisionPropose   Decision = "propose"
	DecisionHumanOnly Decision = "human_only"
)

// DecisionFor maps a lane to the decision a route in that lane gets:
// auto acts alone, propose proposes, shadow and human_only leave it to a person.
func DecisionFor(l Lane) Decision {
	switch l {
	case LaneAuto:
		return DecisionActAlone
	case LanePropose:
		return DecisionPropose
	}
	return DecisionHumanOnly
}

// RiskClass is a step's risk class: A for money-moving steps, B for the rest.
type RiskClass string

// The risk classes.
const (
	ClassA RiskClass = "A"
	ClassB RiskClass = "B"
)

// KeyKind is what a key may do.
type KeyKind string

// The key kinds.
const (
	KeyAgent KeyKind = "agent" // the MCP surface, routing, capability calls
	KeyHuman KeyKind = "human" // approve, review, console
	KeyAdmin KeyKind = "admin" // keys, config
)

// Valid reports whether k is a known key kind.
func (k KeyKind) Valid() bool {
	return k == KeyAgent || k == KeyHuman || k == KeyAdmin
}

// Key is a bearer token of one workspace and one kind. Only the SHA-256 of
// its secret is stored; the token itself is shown once, at creation.
type Key struct {
	ID         string     `json:"id"`
	Workspace  string     `json:"workspace"`
	Kind       KeyKind    `json:"kind"`
	Name       string     `json:"name,omitempty"`
	SecretHash []byte     `json:"-"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  *time.Time `json:"expires_at,omitempty"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
}

// Active reports whether the key may be used at now: not revoked, not expired.
func (k Key) Active(now time.Time) bool {
	if k.RevokedAt != nil {
		return false
	}
	if k.ExpiresAt != nil && !now.Before(*k.ExpiresAt) {
		return false
	}
	return true
}

// Principal is the authenticated caller of one request: a key, or an
// OAuth access token mapped by the identity rules (see identity.go). The
// rest of ladder sees only this.
type Principal struct {
	// KeyID names the caller in audit records, approvals, reviews, logs and
	// per-caller limits: a key's id, or for a token TokenActor's name,
	// which holds the issuer, client id and subject and never the token.
	KeyID     string
	Workspace string
	Kind      KeyKind
	// Subject and ClientID are a token's sub and client id claims; empty
	// for a key.
	Subject  string
	ClientID string
}

// Verdict is a person's verdict on one routed item.
type Verdict string

// The verdicts.
const (
	VerdictAgree    Verdict = "agree"
	VerdictDisagree Verdict = "disagree"
)

// ReviewKind says how a review came about.
type ReviewKind string

// The review kinds.
const (
	ReviewShadow   ReviewKind = "shadow"   // a person handled it; compared with the agent's proposal
	ReviewApproval ReviewKind = "approval" // a person approved (as proposed or edited) or rejected
	ReviewAudit    ReviewKind = "audit"    // a sampled audit of an item the agent handled alone
)

// Route is one decision for one item at one step.
type Route struct {
	ID        string          `json:"route_id"`
	Workspace string          `json:"workspace"`
	Queue     string          `json:"queue"`
	Step      string          `json:"step"`
	Item      string          `json:"item"`
	Decision  Decision        `json:"decision"`
	Lane      Lane            `json:"lane"`
	Audit     bool            `json:"audit"`
	AuditRate float64         `json:"audit_rate"`
	Reason    string          `json:"reason"`
	Features  json.RawMessage `json:"features,omitempty"`
	KeyID     string          `json:"-"`
	At        time.Time       `json:"at"`
	// LaneEpoch is the step's lane epoch the route was decided in. A route
	// is permission only inside that epoch: after any lane change the same
	// item is decided afresh.
	LaneEpoch int `json:"lane_epoch"`
	// StateAuditRate is the step's audit rate the route was decided under,
	// unrounded (AuditRate is rounded for people, and sampling used this
	// one). RecordRoute stores the route only while the step's state still
	// has this rate, as it does for LaneEpoch: the lane and the rate are
	// the decision's inputs, so a decision made from a stale copy of the
	// state is never recorded. It is not stored; a route read back has 0.
	StateAuditRate float64 `json:"-"`
}

// Refused is the error of a route whose commit was refused because the
// step's state moved on since it was decided, given the step's lane epoch
// at commit (found false when the step has no state row): a lane change
// (ErrLaneChanged) or, the epoch the same, a new audit rate
// (ErrAuditRateChanged). Both stores read the epoch and ask this.
func (r Route) Refused(epoch int, found bool) error {
	if found && epoch == r.LaneEpoch {
		return fmt.Errorf("route decided at audit rate %v: %w", r.StateAuditRate, ErrAuditRateChanged)
	}
	return fmt.Errorf("route decided in lane epoch %d: %w", r.LaneEpoch, ErrLaneChanged)
}

// Review is a person's verdict on the agent's output for one routed item.
// Reviews are the evidence the ladder counts.
type Review struct {
	ID            string          `json:"review_id"`
	RouteID       string          `json:"route_id"`
	Workspace     string          `json:"workspace"`
	Queue         string          `json:"queue"`
	Step          string          `json:"step"`
	Item          string          `json:"item"`
	Kind          ReviewKind      `json:"kind"`
	Verdict       Verdict         `json:"verdict"`
	Correction    json.RawMessage `json:"correction,omitempty"`
	Severity      int             `json:"severity,omitempty"`
	OperatorError *bool           `json:"operator_error,omitempty"`
	Note          string          `json:"note,omitempty"`
	Adjudication  bool            `json:"adjudication,omitempty"`
	Reviewer      string          `json:"reviewer"`
	At            time.Time       `json:"at"`
}

// Agrees reports whether the review counts as an agreement.
func (r Review) Agrees() bool { return r.Verdict == VerdictAgree }

// Outcome is the downstream result of one item, by who handled it.
type Outcome struct {
	ID        string    `json:"outcome_id"`
	Workspace string    `json:"workspace"`
	Queue     string    `json:"queue"`
	Step      string    `json:"step"`
	Item      string    `json:"item"`
	HandledBy string    `json:"handled_by"` // "agent" or "person"
	OK        bool      `json:"ok"`
	At        time.Time `json:"at"`
}

// Handlers of an outcome.
const (
	HandledByAgent  = "agent"
	HandledByPerson = "person"
)

// WeekAgg is the weekly aggregate of one step's reviews: what an evidence
// pack is computed from, so it costs O(weeks), not O(reviews).
//
// Epoch counts demotions: after a demotion only reviews of the new epoch
// count toward promotion again, so aggregates are kept per epoch.
type WeekAgg struct {
	Workspace  string    `json:"workspace"`
	Queue      string    `json:"queue"`
	Step       string    `json:"step"`
	ISOWeek    string    `json:"iso_week"` // e.g. "2026-W35"
	WeekStart  time.Time `json:"week_start"`
	Epoch      int       `json:"epoch"`
	N          int       `json:"n"`
	Agreements int       `json:"agreements"`
	AuditN     int       `json:"audit_n"`
	AuditAgree int       `json:"audit_agreements"`
	Sev1       int       `json:"severity_1"`
	OpN        int       `json:"operator_n"`
	OpErrors   int       `json:"operator_errors"`
}

// StepState is the live, stored state of one step: its lane and what the
// rules need to remember between reviews.
type StepState struct {
	Workspace string    `json:"workspace"`
	Queue     string    `json:"queue"`
	Step      string    `json:"step"`
	Lane      Lane      `json:"lane"`
	LaneSince time.Time `json:"lane_since"`
	Epoch     int       `json:"epoch"`
	// LaneEpoch counts every lane change (promotion, demotion, pin, unpin):
	// routes are permission only within the lane epoch they were made in.
	// Epoch, by contrast, counts only demotions, for the promotion rules.
	LaneEpoch       int       `json:"lane_epoch"`
	Pinned          bool      `json:"pinned"`
	PinReason       string    `json:"pin_reason,omitempty"`
	AuditRate       float64   `json:"audit_rate"`
	LastSev1At      time.Time `json:"last_severity_1_at,omitzero"`
	LastAuditFailAt time.Time `json:"last_audit_failure_at,omitzero"`
	// AuditRateSince is when the audit rate last changed; the rate halves
	// after 8 clean weeks counted from here.
	AuditRateSince time.Time `json:"audit_rate_since,omitzero"`
	Version        int64     `json:"version"`
}

// Changed returns the state after a lane change to lane to at time at: a
// promotion, a demotion, a pin or an unpin. Every lane change starts a new
// lane epoch, so no route made before it is permission after it (DESIGN.md
// §4); a move down also starts a new promotion epoch, since after a demotion
// only reviews taken after it count toward promotion again. Both stores and
// the rules move lanes through this one function.
func (s StepState) Changed(to Lane, at time.Time) StepState {
	if to != s.Lane {
		if slices.Index(Lanes, to) < slices.Index(Lanes, s.Lane) {
			s.Epoch++
		}
		s.Lane, s.LaneSince = to, at
	}
	s.LaneEpoch++
	return s
}

// LaneChange records one move of a step between lanes: the rule, the
// numbers it used and who (or what) made it.
type LaneChange struct {
	ID        string             `json:"id"`
	Workspace string             `json:"workspace"`
	Queue     string             `json:"queue"`
	Step      string             `json:"step"`
	At        time.Time          `json:"at"`
	From      Lane               `json:"from"`
	To        Lane               `json:"to"`
	Rule      string             `json:"rule"`
	Numbers   map[string]float64 `json:"numbers"`
	Actor     string             `json:"actor"`
	Reason    string             `json:"reason,omitempty"`
}

// Sev1 reports whether the review is a severity-1 error: a disagreement
// of severity 1.
func (r Review) Sev1() bool { return r.Verdict == VerdictDisagree && r.Severity == 1 }

// Counts returns what one review adds to its week's aggregate row: one
// item, an agreement or not, an audit when it audited, a severity-1 error
// when it disagreed at severity 1, and an operator-error sample when the
// item was reviewed twice. Both stores count with it, so their figures agree.
func (r Review) Counts() WeekAgg {
	c := WeekAgg{N: 1}
	agree := r.Verdict == VerdictAgree
	if agree {
		c.Agreements = 1
	}
	if r.Kind == ReviewAudit {
		c.AuditN = 1
		if agree {
			c.AuditAgree = 1
		}
	}
	if r.Sev1() {
		c.Sev1 = 1
	}
	if r.OperatorError != nil {
		c.OpN = 1
		if *r.OperatorError {
			c.OpErrors = 1
		}
	}
	return c
}

// NormTime is how stores keep times: UTC, to the microsecond (PostgreSQL's
// precision), so a stored time re-hashes and compares equal on every
// backend.
func NormTime(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC().Truncate(time.Microsecond)
}

// Resolved fills the defaults of a review write: an id, the time (now when
// zero) and the ISO week it counts in.
func (w ReviewWrite) Resolved(now time.Time) (rv Review, week string, weekStart time.Time) {
	rv = w.Review
	if rv.ID == "" {
		rv.ID = NewID("rv")
	}
	if rv.At.IsZero() {
		rv.At = now
	}
	rv.At = NormTime(rv.At)
	week, weekStart = w.Week, w.WeekStart
	if week == "" || weekStart.IsZero() {
		wk, start := ISOWeek(rv.At)
		if week == "" {
			week = wk
		}
		if weekStart.IsZero() {
			weekStart = start
		}
	}
	return rv, week, weekStart
}

// For fills the defaults of a lane change of step key moving from lane
// from: an id, the step, the time (now when zero) and the origin lane.
func (c LaneChange) For(key StepKey, from Lane, now time.Time) LaneChange {
	if c.ID == "" {
		c.ID = NewID("lc")
	}
	c.Workspace, c.Queue, c.Step = key.Workspace, key.Queue, key.Step
	if c.At.IsZero() {
		c.At = now
	}
	c.At = NormTime(c.At)
	if c.From == "" {
		c.From = from
	}
	return c
}

package ladder

import (
	"encoding/json"
	"fmt"
	"time"
)

// The rules a store applies when it writes approvals, written once: each
// store reads and writes with its SQL and its clock, and decides with
// these (DESIGN.md §9: stores hold SQL only).

// DueApproval is an approval as a store read it, with whether it was
// pending and at or past its deadline by the store's clock: such an
// approval is reported only once its expiry is stored.
type DueApproval struct {
	Approval Approval
	Due      bool
}

// DecodeApproval is a stored approval: its document, with the seq the
// table gave it (the seq is not part of the document).
func DecodeApproval(seq int64, doc []byte) (Approval, error) {
	var a Approval
	if err := json.Unmarshal(doc, &a); err != nil {
		return Approval{}, fmt.Errorf("stored approval: %w", err)
	}
	a.Seq = seq
	return a, nil
}

// SplitDue returns what a read found as it reads, and the indexes of the
// approvals in it whose expiry must be stored (and read back) before they
// are reported.
func SplitDue(found []DueApproval) (out []Approval, due []int) {
	out = make([]Approval, len(found))
	for i, d := range found {
		out[i] = d.Approval
		if d.Due {
			due = append(due, i)
		}
	}
	return out, due
}

// ExpiryTx is what ExpireTx needs of a store's write transaction.
type ExpiryTx interface {
	// StoreApproval stores a over the approval with a's Seq: its status
	// and its document.
	StoreApproval(a Approval) error
	// AppendAudit appends entries in the transaction.
	AppendAudit(entries ...AuditEntry) error
}

// ExpireTx settles one approval the store read in its write transaction,
// locked where the backend needs it: a due one is stored expired, with its
// audit record and its approval.expired event at at (the store's clock),
// and returned as it then stands;
// one not due is returned as read.
func ExpireTx(tx ExpiryTx, d DueApproval, at time.Time) (Approval, error) {
	if !d.Due {
		return d.Approval, nil
	}
	a := d.Approval
	a.Status = ApprovalExpired
	if err := tx.StoreApproval(a); err != nil {
		return Approval{}, fmt.Errorf("expire approval %s: %w", a.ID, err)
	}
	e, err := ExpiryAudit(a, at)
	if err != nil {
		return Approval{}, fmt.Errorf("expire approval %s: %w", a.ID, err)
	}
	// The expiry is reported in its own transaction (the outbox).
	e.Event = ApprovalExpiredEvent(a, at)
	if err := tx.AppendAudit(e); err != nil {
		return Approval{}, err
	}
	return a, nil
}

// ApprovalCaps are the caps CreateApproval applies to a new approval; they
// travel on the approval (MaxPending, MaxShadow) but are not stored.
type ApprovalCaps struct {
	MaxPending, MaxShadow int
	// ShadowStep is the open_shadow value of a shadow record of a step,
	// "queue/step", or "" for any other approval: a record without a route
	// can never be reviewed, so it is neither open nor counted.
	ShadowStep string
}

// ForCreate splits what CreateApproval is given into the approval to store
// (times as stores keep them, no caps) and the caps to apply.
func (a Approval) ForCreate() (Approval, ApprovalCaps) {
	caps := ApprovalCaps{MaxPending: a.MaxPending, MaxShadow: a.MaxShadow}
	a.CreatedAt, a.ExpiresAt = NormTime(a.CreatedAt), NormTime(a.ExpiresAt)
	a.MaxPending, a.MaxShadow = 0, 0
	if a.Status == ApprovalShadow && a.Step != "" && a.RouteID != "" {
		caps.ShadowStep = a.Queue + "/" + a.Step
	}
	return a, caps
}

// Capped reports whether creating a must count the requesting key's
// approvals first: a pending approval under a pending cap, or a shadow
// record of a step under a shadow cap.
func (c ApprovalCaps) Capped(a Approval) bool {
	return c.MaxPending > 0 && a.Status == ApprovalPending || c.MaxShadow > 0 && c.ShadowStep != ""
}

// CountsPending reports whether a is counted against the pending cap.
func (c ApprovalCaps) CountsPending(a Approval) bool {
	return c.MaxPending > 0 && a.Status == ApprovalPending
}

// CheckPending is the pending cap: n is how many pending, unexpired
// approvals the requesting key has now.
func (c ApprovalCaps) CheckPending(a Approval, n int) error {
	if n >= c.MaxPending {
		return fmt.Errorf("%s has %d approvals pending, at most %d: %w", a.RequestedBy, n, c.MaxPending, ErrTooManyPending)
	}
	return nil
}

// ShadowTx is what OpenShadow needs of a store's write transaction.
type ShadowTx interface {
	// RouteReviewed reports whether the route was reviewed (it has a
	// counted review).
	RouteReviewed(routeID string) (bool, error)
	// OpenShadows counts the requesting key's open shadow records of a
	// step (their open_shadow value is step).
	OpenShadows(workspace, requestedBy, step string) (int, error)
}

// OpenShadow decides a shadow record of a step (ShadowStep set) in a
// store's write transaction: it is open, counted against the cap, until a
// review names its route, so it returns the record's open_shadow value,
// ShadowStep, while the route is unreviewed and "" once it is. Under a
// cap, a record of a reviewed route is refused (ErrRouteReviewed) and one
// past the cap too (CheckShadow).
func (c ApprovalCaps) OpenShadow(tx ShadowTx, a Approval) (string, error) {
	reviewed, err := tx.RouteReviewed(a.RouteID)
	if err != nil {
		return "", fmt.Errorf("route reviewed: %w", err)
	}
	switch {
	case reviewed && c.MaxShadow > 0:
		// A person handled the item and reviewed its route: a proposal
		// now compares with nothing, and a record that never counts must
		// not be stored without bound.
		return "", fmt.Errorf("route %s of %s: %w", a.RouteID, c.ShadowStep, ErrRouteReviewed)
	case reviewed:
		return "", nil
	case c.MaxShadow > 0:
		n, err := tx.OpenShadows(a.Workspace, a.RequestedBy, c.ShadowStep)
		if err != nil {
			return "", fmt.Errorf("count open shadow records: %w", err)
		}
		if err := c.CheckShadow(a, n); err != nil {
			return "", err
		}
	}
	return c.ShadowStep, nil
}

// CheckShadow is the shadow cap: n is how many open shadow records of the
// step the requesting key has now.
func (c ApprovalCaps) CheckShadow(a Approval, n int) error {
	if n >= c.MaxShadow {
		return fmt.Errorf("%s has %d unreviewed shadow proposals of %s, at most %d: %w", a.RequestedBy, n, c.ShadowStep, c.MaxShadow, ErrTooManyShadow)
	}
	return nil
}

// DecodeCall is a stored call's document.
func DecodeCall(doc []byte) (Call, error) {
	var c Call
	if err := json.Unmarshal(doc, &c); err != nil {
		return Call{}, fmt.Errorf("stored call: %w", err)
	}
	return c, nil
}

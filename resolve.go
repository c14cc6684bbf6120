package ladder

import (
	"errors"
	"time"
)

// The defaults and small rules a store applies to what it is given before
// it writes, written once (DESIGN.md §9: stores hold SQL only).

// Initial is a step state as EnsureSteps stores it: a
// new state starts at version 1 at least, so IfVersion checks always have
// a non-zero version to compare.
func (s StepState) Initial() StepState {
	s.Version = max(s.Version, 1)
	return s
}

// Resolved fills the defaults of a route to record: an id, the time (now
// when zero, as stores keep times) and no features rather than empty ones.
func (r Route) Resolved(now time.Time) Route {
	if r.ID == "" {
		r.ID = NewID("rt")
	}
	if r.At.IsZero() {
		r.At = now
	}
	r.At = NormTime(r.At)
	if len(r.Features) == 0 {
		r.Features = nil
	}
	return r
}

// Resolved checks and fills the defaults of a gate decision to record: it
// must have an id; the time is now when zero, as stores keep times; empty
// evidence is none.
func (d GateDecisionRecord) Resolved(now time.Time) (GateDecisionRecord, error) {
	if d.ID == "" {
		return GateDecisionRecord{}, errors.New("no id")
	}
	if d.At.IsZero() {
		d.At = now
	}
	d.At = NormTime(d.At)
	if len(d.Evidence) == 0 {
		d.Evidence = nil
	}
	return d, nil
}

// Add counts one stored row of outcome counts: n outcomes with failures
// among them, of items handled by handledBy (HandledByAgent or
// HandledByPerson; another handler is not part of the test).
func (c *OutcomeCounts) Add(handledBy string, n, failures int) {
	switch handledBy {
	case HandledByAgent:
		c.AgentN, c.AgentFailures = n, failures
	case HandledByPerson:
		c.PersonN, c.PersonFailures = n, failures
	}
}

// Count adds one outcome to the counts (an outcome handled by neither an
// agent nor a person is not part of the test).
func (c *OutcomeCounts) Count(o Outcome) {
	fail := 0
	if !o.OK {
		fail = 1
	}
	switch o.HandledBy {
	case HandledByAgent:
		c.AgentN, c.AgentFailures = c.AgentN+1, c.AgentFailures+fail
	case HandledByPerson:
		c.PersonN, c.PersonFailures = c.PersonN+1, c.PersonFailures+fail
	}
}

// WalkPages calls fn for every audit record with seq > afterSeq, in
// order, reading them a page of at most page records at a time with read
// (records with seq > after, in seq order), and stops at the first error
// fn returns. Paging keeps a slow fn from holding one read (and its
// snapshot) open for the whole walk.
func WalkPages(afterSeq int64, page int, read func(after int64, limit int) ([]AuditRecord, error), fn func(AuditRecord) error) error {
	for {
		recs, err := read(afterSeq, page)
		if err != nil {
			return err
		}
		for _, r := range recs {
			if err := fn(r); err != nil {
				return err
			}
			afterSeq = r.Seq
		}
		if len(recs) < page {
			return nil
		}
	}
}

// DefaultPageLimit is how many records a list query returns when its
// Limit is not positive (AuditQuery, ApprovalQuery, GateHistoryQuery).
const DefaultPageLimit = 50

// PageLimit is the number of records a list query with limit n returns at
// the most: n, or DefaultPageLimit when n is not positive.
func PageLimit(n int) int {
	if n <= 0 {
		return DefaultPageLimit
	}
	return n
}

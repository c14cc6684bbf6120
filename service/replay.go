package service

import (
	"fmt"
	"time"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/internal/memtx"
	"github.com/ladderhq/ladder/rules"
)

// Replay is one step's import replayed in memory: each row goes through
// the import's own row routine and ladder.RecordReviewTx, over an
// in-memory transaction (memtx) instead of a store's, so after every row
// the step's state is the one Service.Import of the same rows would reach.
// The demo asks it the lane while it draws a step's history, then imports
// the rows for real.
type Replay struct {
	s       *Service
	tx      *memtx.Tx
	is      *importStep
	p       ladder.Principal
	routes  map[string]importedRoute
	started bool
}

// NewReplay starts a replay of step st of workspace from start, the step's
// state as the store holds it before the import (its key is set from st).
// Rows are recorded as imported by the principal p.
func (s *Service) NewReplay(p ladder.Principal, workspace string, st ladder.Step, start ladder.StepState) *Replay {
	key := ladder.StepKey{Workspace: workspace, Queue: st.Queue, Step: st.ID}
	start.Workspace, start.Queue, start.Step = key.Workspace, key.Queue, key.Step
	return &Replay{s: s, tx: memtx.New(start), p: p, routes: map[string]importedRoute{},
		is: &importStep{st: st, key: key, fresh: true, sum: ladder.ImportStepSummary{Queue: key.Queue, Step: key.Step, LaneChanges: []ladder.LaneChange{}}}}
}

// Row replays one row (its Time set, no older than the rows before it), as
// Service.Import replays it. A row the import would refuse is an error.
func (r *Replay) Row(row ladder.ImportRow) error {
	if !r.started {
		// The import backdates a step with no record to its first row.
		if err := backdate(r.tx, r.is, row); err != nil {
			return err
		}
		r.is.oc = r.is.stored
		r.started = true
	}
	rowErr, err := r.s.importRow(r.tx, r.p, row, r.is, r.routes)
	if err != nil {
		return err
	}
	if rowErr != nil {
		return fmt.Errorf("line %d: %s: %s", rowErr.Line, rowErr.Field, rowErr.Message)
	}
	return nil
}

// State returns the step's state after the rows so far.
func (r *Replay) State() ladder.StepState { return r.tx.State(r.is.key) }

// LaneChanges returns the lane changes the rows so far made, oldest first.
func (r *Replay) LaneChanges() []ladder.LaneChange { return r.tx.LaneChanges(r.is.key) }

// RuleInput returns what the lane rules would read of the step at now,
// after the rows so far.
func (r *Replay) RuleInput(now time.Time) rules.Input {
	weeks, _ := r.tx.WeekAggs(r.is.key) // the in-memory step always exists
	return RuleInput(r.is.st, r.State(), weeks, r.is.oc, now)
}

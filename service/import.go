package service

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/gate"
)

// importStep is what an import knows of one step before and while it
// replays the step's rows.
type importStep struct {
	st  ladder.Step
	key ladder.StepKey
	// latest is the time of the step's latest recorded review or lane
	// change before the import; fresh says it has neither.
	latest ladder.ImportRow
	fresh  bool
	stored ladder.OutcomeCounts // before the import
	oc     ladder.OutcomeCounts // stored, then grown by the imported outcomes
	sum    ladder.ImportStepSummary
}

// Import loads past reviews, audits and outcomes (see ladder.ImportRow)
// into a workspace in one transaction. The rows are replayed in time order
// (stable for equal times) through the one review routine,
// ladder.RecordReviewTx, with the decider a live review uses and the
// outcome counts as of each row's time, so an imported history moves the
// lanes exactly as the same reviews recorded one by one would have.
//
// A row may not be older than its step's latest recorded review or lane
// change: the rules decided the step's state from the records so far, and
// a record slipped in before them would change figures those decisions
// were made on without making them again. A step with no record yet is
// taken to have been in its lane since its first imported row, so its
// weeks in the lane count from the history. Every bad row is refused with
// its line, and nothing is written unless every row is good.
func (s *Service) Import(ctx context.Context, p ladder.Principal, req ladder.ImportRequest) (ladder.ImportResult, error) {
	if _, ok := s.workspaces[req.Workspace]; !ok {
		return ladder.ImportResult{}, ladder.InvalidField("workspace", fmt.Sprintf("The workspace %q is not in the config.", req.Workspace), "use one of: "+strings.Join(s.order, ", "))
	}
	rows, bad, err := ladder.ParseImport(req.Data, req.Format)
	if err != nil {
		return ladder.ImportResult{}, err
	}
	// Every row's step, and what the store holds of it; the bad rows of
	// the file and those naming no step are refused together.
	steps := map[ladder.StepKey]*importStep{}
	var order []ladder.StepKey
	keys := make([]ladder.StepKey, len(rows))
	for i, r := range rows {
		if strings.TrimSpace(r.Step) == "" {
			continue // refused by ParseImport already
		}
		st, err := s.FindStep(req.Workspace, r.Queue, r.Step)
		if err != nil {
			le := ladder.AsError(err)
			field, _ := le.Data["field"].(string)
			if field == "" {
				field = "step"
			}
			bad = append(bad, ladder.ImportRowError{Line: r.Line, Field: field, Message: le.Message})
			continue
		}
		k := ladder.StepKey{Workspace: req.Workspace, Queue: st.Queue, Step: st.ID}
		keys[i] = k
		if steps[k] == nil {
			steps[k] = &importStep{st: st, key: k, fresh: true}
			order = append(order, k)
		}
	}
	if len(bad) > 0 {
		return ladder.ImportResult{}, importRefused(bad)
	}
	idx := make([]int, len(rows))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return rows[a].Time.Compare(rows[b].Time) })

	sum := sha256.Sum256(req.Data)
	digest := hex.EncodeToString(sum[:])
	now := ladder.NormTime(s.now())
	var refused []ladder.ImportRowError
	// The import moves states this process does not see written: the view
	// forgets them once it has run (a hint only; routes re-check).
	defer s.steps.drop(ladder.StepKey{})
	err = s.store.ImportRecords(ctx, func(stx ladder.ImportTx) error {
		// A batch run again (after a deadlock) starts from the stored
		// counts again.
		refused = nil
		tx := newImportTx(stx)
		for _, k := range order {
			is := steps[k]
			// The step's record is read after its state is locked, inside
			// the transaction that writes the rows, so the check below and
			// the counts the decider sees are those in force at commit.
			is.sum = ladder.ImportStepSummary{Queue: k.Queue, Step: k.Step, LaneChanges: []ladder.LaneChange{}}
			if err := backdate(tx, is, rows[firstOf(idx, keys, k)]); err != nil {
				return err
			}
			is.oc = is.stored
		}
		for i, r := range rows {
			if is := steps[keys[i]]; is != nil && !is.fresh && r.Time.Before(is.latest.Time) {
				refused = append(refused, ladder.ImportRowError{Line: r.Line, Field: "at", Message: fmt.Sprintf(
					"The row is older than the step's latest record (%s); rows are replayed on top of the step's record, so they start where it ends.", is.latest.At)})
			}
		}
		if len(refused) > 0 {
			return errImportRefused
		}
		routes := map[string]importedRoute{} // step and item → the route of its latest imported review
		for _, i := range idx {
			r, is := rows[i], steps[keys[i]]
			rowErr, err := s.importRow(tx, p, r, is, routes)
			if err != nil {
				return err
			}
			if rowErr != nil {
				refused = append(refused, *rowErr)
				return errImportRefused
			}
		}
		if err := tx.flush(); err != nil {
			return err
		}
		res := importSummary(req.Workspace, len(rows), digest, order, steps)
		e, err := ladder.NewAuditEntry(req.Workspace, p.KeyID, ladder.AuditHistoryImport, "imp_"+digest[:16], now, map[string]any{
			"sha256": digest, "format": req.Format, "rows": len(rows), "steps": res.Steps,
		})
		if err != nil {
			return err
		}
		return tx.AppendAudit(e)
	})
	if len(refused) > 0 {
		return ladder.ImportResult{}, importRefused(refused)
	}
	if err != nil {
		return ladder.ImportResult{}, storeErr("import records", err)
	}
	return importSummary(req.Workspace, len(rows), digest, order, steps), nil
}

// errImportRefused stops an import's transaction at a row the store's
// records make bad (an adjudication with nothing to overrule, a second
// review of a route); the row is reported, not this.
var errImportRefused = errors.New("import row refused")

// firstOf returns the index of the first row, in time order, of step k.
func firstOf(idx []int, keys []ladder.StepKey, k ladder.StepKey) int {
	for _, i := range idx {
		if keys[i] == k {
			return i
		}
	}
	return idx[0]
}

// backdate locks the step's state and reads its record inside the
// import's transaction (what the older-row check and the decider's outcome
// counts build on), then starts a step with no record yet in its lane at
// its first imported row, so the weeks the history spans count as weeks in
// the lane.
func backdate(tx ladder.ImportTx, is *importStep, first ladder.ImportRow) error {
	state, err := tx.LockState(is.key)
	if err != nil {
		return err
	}
	rec, err := tx.StepRecord(is.key)
	if err != nil {
		return fmt.Errorf("step record: %w", err)
	}
	is.fresh, is.latest.Time, is.stored = !rec.Has, rec.Latest, rec.Outcomes
	is.latest.At = rec.Latest.UTC().Format(time.RFC3339)
	is.sum.Lane = state.Lane
	if !is.fresh || !first.Time.Before(state.LaneSince) {
		return nil
	}
	state.LaneSince, state.AuditRateSince = first.Time, first.Time
	state.Version++
	return tx.UpdateState(state.Normalized())
}

// importRow replays one row in the import's transaction. A row the
// store's records make bad is returned as a row error.
// importedRoute is a route an import made, for the adjudications after it.
type importedRoute struct {
	id   string
	lane ladder.Lane
}

func (s *Service) importRow(tx ladder.ImportTx, p ladder.Principal, r ladder.ImportRow, is *importStep, routes map[string]importedRoute) (*ladder.ImportRowError, error) {
	k := is.key
	if r.Type == ladder.ImportOutcome {
		o := ladder.Outcome{ID: ladder.NewID("oc"), Workspace: k.Workspace, Queue: k.Queue, Step: k.Step, Item: r.Item, HandledBy: r.HandledBy, OK: *r.OK, At: r.Time}
		if err := tx.InsertOutcome(o); err != nil {
			return nil, fmt.Errorf("line %d: outcome: %w", r.Line, err)
		}
		// The decider of each later row sees this outcome counted.
		is.oc.Count(o)
		is.sum.Outcomes++
		return nil, nil
	}
	itemKey := k.Queue + "\x00" + k.Step + "\x00" + r.Item
	lane := r.RouteLane()
	var routeID string
	if r.Adjudication {
		// An adjudication's kind is its route's, as live: the lane the
		// item was routed in, whatever the row says.
		rt, ok := routes[itemKey]
		id := rt.id
		lane = cmp.Or(rt.lane, lane)
		if !ok {
			var err error
			if id, ok, err = tx.ReviewedRoute(k, r.Item); err != nil {
				return nil, fmt.Errorf("line %d: reviewed route: %w", r.Line, err)
			}
		}
		if !ok {
			return &ladder.ImportRowError{Line: r.Line, Field: "adjudication", Message: fmt.Sprintf("The item %q has no earlier review at this step to adjudicate.", r.Item)}, nil
		}
		routeID = id
	} else {
		state, err := tx.LockState(k)
		if err != nil {
			return nil, err
		}
		rt := ladder.Route{ID: ladder.NewID("rt"), Workspace: k.Workspace, Queue: k.Queue, Step: k.Step, Item: r.Item, Lane: lane, Decision: ladder.DecisionFor(lane),
			Audit: lane == ladder.LaneAuto, AuditRate: round4(state.AuditRate), Reason: "Imported from history.", KeyID: p.KeyID, At: r.Time, LaneEpoch: state.LaneEpoch}
		if err := tx.InsertRoute(rt); errors.Is(err, ladder.ErrConflict) {
			return alreadyReviewed(r), nil
		} else if err != nil {
			return nil, fmt.Errorf("line %d: route: %w", r.Line, err)
		}
		routeID = rt.ID
	}
	routes[itemKey] = importedRoute{id: routeID, lane: lane}
	kind := ladder.ReviewShadow
	switch lane {
	case ladder.LaneAuto:
		kind = ladder.ReviewAudit
	case ladder.LanePropose:
		kind = ladder.ReviewApproval
	}
	reviewer := r.Reviewer
	if reviewer == "" {
		reviewer = p.KeyID
	}
	rv := ladder.Review{ID: ladder.NewID("rv"), RouteID: routeID, Workspace: k.Workspace, Queue: k.Queue, Step: k.Step, Item: r.Item, Kind: kind,
		Verdict: ladder.Verdict(r.Verdict), Severity: r.Severity, OperatorError: r.OperatorError, Note: gate.Redact(r.Note), Adjudication: r.Adjudication,
		Reviewer: reviewer, At: r.Time}
	entry, err := reviewEntry(rv, p.KeyID)
	if err != nil {
		return nil, err
	}
	week, weekStart := ladder.ISOWeek(rv.At)
	state, change, err := ladder.RecordReviewTx(tx, ladder.ReviewWrite{Review: rv, Week: week, WeekStart: weekStart, Audit: entry,
		Decide: s.decider(is.st, is.oc, rv, p.KeyID)}, rv.At)
	if errors.Is(err, ladder.ErrConflict) {
		return alreadyReviewed(r), nil
	}
	if err != nil {
		return nil, fmt.Errorf("line %d: review: %w", r.Line, err)
	}
	if kind == ladder.ReviewAudit {
		is.sum.Audits++
	} else {
		is.sum.Reviews++
	}
	is.sum.Lane = state.Lane
	if change != nil {
		is.sum.LaneChanges = append(is.sum.LaneChanges, *change)
	}
	return nil, nil
}

func alreadyReviewed(r ladder.ImportRow) *ladder.ImportRowError {
	return &ladder.ImportRowError{Line: r.Line, Field: "item", Message: fmt.Sprintf(
		"The item %q was reviewed already at this step in this lane; set adjudication to overrule the first review.", r.Item)}
}

func importSummary(workspace string, rows int, digest string, order []ladder.StepKey, steps map[ladder.StepKey]*importStep) ladder.ImportResult {
	res := ladder.ImportResult{Workspace: workspace, Rows: rows, SHA256: digest, Steps: []ladder.ImportStepSummary{}}
	for _, k := range order {
		res.Steps = append(res.Steps, steps[k].sum)
	}
	return res
}

// importRefused is the refusal of an import with bad rows: nothing was
// written, and Data's rows name each bad row's line and field.
func importRefused(bad []ladder.ImportRowError) error {
	bad = ladder.CapImportErrors(bad)
	first := bad[0]
	return &ladder.Error{Code: ladder.CodeInvalidArgument,
		Message: fmt.Sprintf("The import has bad rows, the first on line %d, so nothing was imported.", first.Line),
		Hint:    "fix the rows listed in data.rows (each names its line and field) and import the whole file again",
		Data:    map[string]any{"rows": bad, "field": first.Field}}
}

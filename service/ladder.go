package service

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"math"
	"strings"
	"time"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/gate"
	"github.com/ladderhq/ladder/internal/tracing"
	"github.com/ladderhq/ladder/rules"
)

// InitialStates returns the starting state of every declared step, for
// EnsureSteps on start-up.
func (s *Service) InitialStates() []ladder.StepState {
	now := ladder.NormTime(s.now())
	var out []ladder.StepState
	for _, wid := range s.order {
		for _, st := range s.Steps(wid, "") {
			rate := s.initialAuditRate(wid, st)
			lane := st.StartLane
			if lane == "" {
				lane = ladder.LaneShadow
			}
			out = append(out, ladder.StepState{Workspace: wid, Queue: st.Queue, Step: st.ID, Lane: lane, LaneSince: now, AuditRate: rate, AuditRateSince: now})
		}
	}
	return out
}

// initialAuditRate is the audit rate a step starts with: the config's, or
// the one its rules and weekly volume give (rules.InitialAuditRate).
func (s *Service) initialAuditRate(workspace string, st ladder.Step) float64 {
	if st.AuditRate != 0 {
		return st.AuditRate
	}
	vol := float64(st.WeeklyVolume)
	if vol <= 0 {
		vol = 100
	}
	return rules.InitialAuditRate(st.Class, s.thresholdsFor(workspace, st).AutoLower, vol)
}

func (s *Service) thresholdsFor(workspace string, st ladder.Step) ladder.Thresholds {
	if t, ok := s.rules[ladder.StepKey{Workspace: workspace, Queue: st.Queue, Step: st.ID}]; ok {
		return t
	}
	return rules.Defaults(st.Class)
}

// Thresholds returns the lane rules in force for a step.
func (s *Service) Thresholds(workspace string, st ladder.Step) ladder.Thresholds {
	return s.thresholdsFor(workspace, st)
}

// sampled decides blind, deterministic audit sampling:
// H(secret, workspace, step, item) < rate. The same item always gets the
// same answer, and without the secret the agent cannot predict it.
func (s *Service) sampled(workspace, queue, step, item string, rate float64) bool {
	if rate <= 0 {
		return false
	}
	if rate >= 1 {
		return true
	}
	m := s.macs.Get().(*sampler)
	defer s.macs.Put(m)
	sum := m.sum(workspace, queue, step, item)
	u := float64(binary.BigEndian.Uint64(sum[:8])>>11) / float64(1<<53)
	return u < rate
}

// sampler is a pooled HMAC-SHA256 keyed with the audit secret, with the
// buffers one sample needs, so a sample allocates nothing: the parts go
// into buf and through one Write, which hashes the same bytes as a Write
// per part would.
type sampler struct {
	mac hash.Hash
	buf []byte
	out [sha256.Size]byte
}

// sum returns the HMAC of each part followed by a zero byte.
func (m *sampler) sum(parts ...string) []byte {
	m.mac.Reset()
	m.buf = m.buf[:0]
	for _, p := range parts {
		m.buf = append(append(m.buf, p...), 0)
	}
	m.mac.Write(m.buf)
	return m.mac.Sum(m.out[:0])
}

// Decide computes a route without I/O from a step's state: the decision
// follows the lane, and items in auto are sampled for audit.
func (s *Service) Decide(workspace string, st ladder.Step, state ladder.StepState, item string) ladder.Route {
	r := ladder.Route{Workspace: workspace, Queue: st.Queue, Step: st.ID, Item: item, Lane: state.Lane, Decision: ladder.DecisionFor(state.Lane), AuditRate: round4(state.AuditRate)}
	// Concatenated, not formatted: this runs on every route, and the
	// sentences are fixed around the step's name.
	switch state.Lane {
	case ladder.LaneAuto:
		r.Audit = s.sampled(workspace, st.Queue, st.ID, item, state.AuditRate)
		if r.Audit {
			r.Reason = st.Name + " runs alone (auto); this item is sampled for audit, so a person will check the result afterwards."
		} else {
			r.Reason = st.Name + " runs alone (auto); act, and the result is recorded."
		}
	case ladder.LanePropose:
		r.Reason = st.Name + " is in propose: send your proposal and wait; a person approves it before anything runs."
	case ladder.LaneShadow:
		r.Reason = st.Name + " is in shadow: a person handles this item, and your output is compared with theirs."
	default:
		r.Reason = st.Name + " is human-only: a person handles this item."
	}
	return r
}

// Route decides one item at one step and records the route (logged in the
// audit log). A repeated call for the same step and item returns the first
// route while the step's lane is unchanged; after any lane change the item
// is decided afresh (DESIGN.md §4).
func (s *Service) Route(ctx context.Context, p ladder.Principal, req ladder.RouteRequest) (ladder.Route, error) {
	if strings.TrimSpace(req.Item) == "" {
		return ladder.Route{}, ladder.InvalidField("item", "The item field is required.", "give the id of the work item, e.g. the bill number")
	}
	if len(req.Item) > 512 {
		return ladder.Route{}, ladder.InvalidField("item", "The item is longer than 512 characters.", "send the item's id, not its content")
	}
	st, err := s.FindStep(p.Workspace, req.Queue, req.Step)
	if err != nil {
		return ladder.Route{}, err
	}
	var features json.RawMessage
	if len(req.Features) > 0 {
		if features, err = ladder.CanonicalJSON(req.Features); err != nil {
			return ladder.Route{}, ladder.InvalidField("features", "The features are not valid JSON.", "send features as a JSON object")
		}
	}
	return s.routeItem(ctx, p, st, req.Item, features)
}

// laneAttempts bounds how often one route is decided again because the
// step's lane changed between reading its state and committing the route.
const laneAttempts = 4

// routeItem decides item at step st from the step's state and records the
// route. The store records it only while the step is still in the lane
// epoch and at the audit rate the decision was made with, so the state in
// force at commit decides; when a change lands in between, the item is
// decided again from the new state. The first decision may come from the
// view of step states (a hint, with no read); a refused one, and every one
// after it, reads the state from the store.
func (s *Service) routeItem(ctx context.Context, p ladder.Principal, st ladder.Step, item string, features json.RawMessage) (rt ladder.Route, err error) {
	return s.routeItemWith(ctx, p, st, item, features, s.recordRoute)
}

// routeCommit stores a decided route with its audit entry, and with any
// write the route allows in the same transaction (a capability call's begun
// record, RouteAndBeginCall); ErrLaneChanged or ErrAuditRateChanged stores
// nothing and the route is decided again.
type routeCommit func(ctx context.Context, r ladder.Route, entry ladder.AuditEntry) (ladder.Route, error)

// recordRoute is the routeCommit of a route alone.
func (s *Service) recordRoute(ctx context.Context, r ladder.Route, entry ladder.AuditEntry) (ladder.Route, error) {
	got, _, err := s.store.RecordRoute(ctx, r, entry)
	return got, err
}

// routeItemWith is routeItem with each decided route stored by commit.
func (s *Service) routeItemWith(ctx context.Context, p ladder.Principal, st ladder.Step, item string, features json.RawMessage, commit routeCommit) (rt ladder.Route, err error) {
	ctx, sp := tracing.Start(ctx, s.tracer, tracing.SpanRoute)
	defer func() { endRoute(sp, p, st, rt, err) }()
	key := ladder.StepKey{Workspace: p.Workspace, Queue: st.Queue, Step: st.ID}
	useView := true
	for attempt := 1; ; attempt++ {
		state, viewed, gen := s.steps.get(key)
		if !useView || !viewed {
			viewed = false
			if state, err = s.store.GetStepState(ctx, key); err != nil {
				return ladder.Route{}, storeErr("get step state", err)
			}
			s.steps.fill(state, gen)
		}
		r := s.Decide(p.Workspace, st, state, item)
		r.ID = ladder.NewID("rt")
		r.KeyID = p.KeyID
		r.At = ladder.NormTime(s.now())
		r.Features = features
		r.LaneEpoch, r.StateAuditRate = state.LaneEpoch, state.AuditRate
		data, err := r.AuditData()
		if err != nil {
			return ladder.Route{}, fmt.Errorf("route audit data: %w", err)
		}
		entry, err := ladder.NewAuditEntry(p.Workspace, p.KeyID, ladder.AuditRoute, r.ID, r.At, data)
		if err != nil {
			return ladder.Route{}, err
		}
		got, err := commit(ctx, r, entry)
		if rateChanged := errors.Is(err, ladder.ErrAuditRateChanged); rateChanged || errors.Is(err, ladder.ErrLaneChanged) {
			s.steps.drop(key)
			useView = false
			if viewed {
				// The view was behind: not a change during this call,
				// so the attempt does not count.
				attempt--
			}
			if attempt < laneAttempts {
				continue
			}
			if rateChanged {
				return ladder.Route{}, auditRateChanging(st)
			}
			return ladder.Route{}, laneChanging(st)
		}
		if err != nil {
			return ladder.Route{}, storeErr("record route", err)
		}
		return got, nil
	}
}

// endRoute ends a route decision's span with what was decided.
func endRoute(sp tracing.Span, p ladder.Principal, st ladder.Step, rt ladder.Route, err error) {
	if sp.Recording() {
		sp.Set(tracing.Workspace.String(p.Workspace), tracing.Step.String(st.Queue+"/"+st.ID))
		if err == nil {
			sp.Set(tracing.Lane.String(string(rt.Lane)), tracing.Decision.String(string(rt.Decision)), tracing.RouteID.String(rt.ID))
		}
	}
	sp.End(err)
}

// laneChanging is the refusal when a step's lane kept changing under one
// decision: nothing was recorded, and a retry decides under the new lane.
func laneChanging(st ladder.Step) error {
	return &ladder.Error{Code: ladder.CodeConflict, Message: fmt.Sprintf("The lane of %s changed while this was being decided, so nothing was done.", st.Name),
		Hint: "retry; the step's new lane decides ({{steps}} shows it)"}
}

// auditRateChanging is the refusal when a step's audit rate kept changing
// under one decision (its lane did not): nothing was recorded, and a retry
// samples at the new rate.
func auditRateChanging(st ladder.Step) error {
	return &ladder.Error{Code: ladder.CodeConflict, Message: fmt.Sprintf("The audit rate of %s changed while this was being decided, so nothing was done.", st.Name),
		Hint: "retry; the step's new audit rate decides ({{steps}} shows it)"}
}

// Review records a person's verdict on a route, updates the week's
// aggregates and re-evaluates the step's lane in the same transaction.
func (s *Service) Review(ctx context.Context, p ladder.Principal, routeID string, req ladder.ReviewRequest) (ladder.ReviewResult, error) {
	req.Note = gate.Redact(req.Note) // DESIGN.md §8: secrets in notes never reach the log or a response
	v := ladder.Verdict(req.Verdict)
	if v != ladder.VerdictAgree && v != ladder.VerdictDisagree {
		return ladder.ReviewResult{}, &ladder.Error{Code: ladder.CodeInvalidArgument, Message: fmt.Sprintf("The verdict %q is not allowed; allowed values: agree, disagree.", req.Verdict), Hint: `send "verdict": "agree" or "disagree"`, Data: map[string]any{"field": "verdict", "allowed": []string{"agree", "disagree"}}}
	}
	if req.Severity != 0 && (req.Severity < 1 || req.Severity > 3) {
		return ladder.ReviewResult{}, ladder.InvalidField("severity", fmt.Sprintf("The severity %d is out of range; allowed values: 1, 2, 3.", req.Severity), "1 is the most severe; leave it out for an agreement")
	}
	if v == ladder.VerdictAgree && req.Severity != 0 {
		return ladder.ReviewResult{}, ladder.InvalidField("severity", "A severity applies to disagreements only.", "leave severity out, or send verdict disagree")
	}
	route, err := s.store.GetRoute(ctx, p.Workspace, routeID)
	if errors.Is(err, ladder.ErrNotFound) {
		return ladder.ReviewResult{}, ladder.NotFound(ladder.CodeRouteNotFound, fmt.Sprintf("No route %q in this workspace.", routeID), "use the route_id that {{route}} returned")
	}
	if err != nil {
		return ladder.ReviewResult{}, storeErr("get route", err)
	}
	st, err := s.FindStep(p.Workspace, route.Queue, route.Step)
	if err != nil {
		return ladder.ReviewResult{}, err
	}
	now := ladder.NormTime(s.now())
	kind := ladder.ReviewShadow
	switch route.Lane {
	case ladder.LaneAuto:
		kind = ladder.ReviewAudit
	case ladder.LanePropose:
		kind = ladder.ReviewApproval
	}
	rv := ladder.Review{ID: ladder.NewID("rv"), RouteID: route.ID, Workspace: p.Workspace, Queue: route.Queue, Step: route.Step, Item: route.Item,
		Kind: kind, Verdict: v, Severity: req.Severity, OperatorError: req.OperatorError, Note: req.Note, Adjudication: req.Adjudication, Reviewer: p.KeyID, At: now}
	if len(req.Correction) > 0 {
		c, err := ladder.CanonicalJSON(req.Correction)
		if err != nil {
			return ladder.ReviewResult{}, ladder.InvalidField("correction", "The correction is not valid JSON.", "send the corrected output as JSON")
		}
		rv.Correction = c
	}
	return s.recordReview(ctx, st, rv, p.KeyID)
}

// recordReview stores a review and runs the lane rules inside its
// transaction. Approvals of step-tied proposals come through here too.
func (s *Service) recordReview(ctx context.Context, st ladder.Step, rv ladder.Review, actor string) (ladder.ReviewResult, error) {
	key := ladder.StepKey{Workspace: rv.Workspace, Queue: rv.Queue, Step: rv.Step}
	oc, err := s.store.OutcomeCounts(ctx, key)
	if err != nil {
		return ladder.ReviewResult{}, storeErr("outcome counts", err)
	}
	week, weekStart := ladder.ISOWeek(rv.At)
	entry, err := reviewEntry(rv, actor)
	if err != nil {
		return ladder.ReviewResult{}, err
	}
	decide := s.decider(st, oc, rv, actor)
	state, change, err := s.store.RecordReview(ctx, ladder.ReviewWrite{Review: rv, Week: week, WeekStart: weekStart, Audit: entry, Decide: decide})
	if err == nil {
		s.steps.wrote(state)
	}
	switch {
	case errors.Is(err, ladder.ErrConflict):
		return ladder.ReviewResult{}, &ladder.Error{Code: ladder.CodeAlreadyReviewed, Message: "This route was reviewed already.", Hint: "to overrule the first review, {{adjudicate}}"}
	case errors.Is(err, ladder.ErrNotFound):
		return ladder.ReviewResult{}, ladder.NotFound(ladder.CodeRouteNotFound, fmt.Sprintf("No route %q in this workspace.", rv.RouteID), "use the route_id that {{route}} returned")
	case err != nil:
		return ladder.ReviewResult{}, storeErr("record review", err)
	}
	s.laneChanged(change)
	return ladder.ReviewResult{Review: rv, Lane: state.Lane, LaneChange: change}, nil
}

// reviewEntry is the audit entry of a recorded review, live or imported.
func reviewEntry(rv ladder.Review, actor string) (ladder.AuditEntry, error) {
	return ladder.NewAuditEntry(rv.Workspace, actor, ladder.AuditReview, rv.ID, rv.At, map[string]any{
		"route_id": rv.RouteID, "queue": rv.Queue, "step": rv.Step, "item": rv.Item, "kind": rv.Kind, "verdict": rv.Verdict,
		"severity": rv.Severity, "operator_error": rv.OperatorError, "adjudication": rv.Adjudication, "note": rv.Note, "correction": rv.Correction,
	})
}

// decider is the decider of one review, live or imported: the step's
// rules in force, applied with the outcome counts as of the review's time.
// Both paths build it here, so an imported history is decided exactly as
// the same reviews recorded one by one would have been.
func (s *Service) decider(st ladder.Step, oc ladder.OutcomeCounts, rv ladder.Review, actor string) ladder.ReviewDecider {
	return s.deciderWith(st, s.thresholdsFor(rv.Workspace, st), oc, rv, actor)
}

// deciderWith is decider under thresholds th (a backtest's other rules).
func (s *Service) deciderWith(st ladder.Step, th ladder.Thresholds, oc ladder.OutcomeCounts, rv ladder.Review, actor string) ladder.ReviewDecider {
	return func(state ladder.StepState, weeks []ladder.WeekAgg) (ladder.StepState, *ladder.LaneChange, []ladder.AuditEntry, error) {
		return s.applyRules(st, th, state, weeks, oc, rv, actor)
	}
}

// applyRules is the decider run inside a review's transaction: it updates
// the severity-1 clock and the audit rate, then applies the lane rules.
func (s *Service) applyRules(st ladder.Step, th ladder.Thresholds, state ladder.StepState, weeks []ladder.WeekAgg, oc ladder.OutcomeCounts, rv ladder.Review, actor string) (ladder.StepState, *ladder.LaneChange, []ladder.AuditEntry, error) {
	now := rv.At
	failed := rv.Verdict == ladder.VerdictDisagree
	if rv.Sev1() {
		state.LastSev1At = now
	}
	// An audit is a review of an item routed in auto (its kind comes from
	// the route's lane). A failed one doubles the rate whatever the step's
	// lane when the verdict arrives (DESIGN.md §4): a step demoted in the
	// meantime returns to auto with the doubled rate. Clean weeks halve it
	// only while the step is in auto.
	switch {
	case rv.Kind == ladder.ReviewAudit && failed:
		state.LastAuditFailAt = now
		state.AuditRate = rules.AdjustAuditRate(state.AuditRate, st.Class, true, 0)
		state.AuditRateSince = now
	case rv.Kind == ladder.ReviewAudit && state.Lane == ladder.LaneAuto:
		if clean := int(now.Sub(rateAnchor(state)) / rules.Week); clean >= rules.AuditCleanWeeks {
			state.AuditRate = rules.AdjustAuditRate(state.AuditRate, st.Class, false, clean)
			state.AuditRateSince = now
		}
	}
	in := RuleInput(st, state, weeks, oc, now)
	in.Sev1AuditFailure = rv.Kind == ladder.ReviewAudit && failed && rv.Severity == 1
	res := rules.Evaluate(th, in)
	if res.Move == nil {
		return state, nil, nil, nil
	}
	return s.Move(state, res.Move, actor, now)
}

// Move applies a rule's lane move to state and returns the lane change and
// its audit entry.
func (s *Service) Move(state ladder.StepState, m *rules.Move, actor string, now time.Time) (ladder.StepState, *ladder.LaneChange, []ladder.AuditEntry, error) {
	ch := &ladder.LaneChange{ID: ladder.NewID("lc"), Workspace: state.Workspace, Queue: state.Queue, Step: state.Step, At: now,
		From: m.From, To: m.To, Rule: m.Rule, Numbers: roundNumbers(m.Numbers), Actor: "rules (after a review by " + actor + ")"}
	state = state.Changed(m.To, now)
	if m.To == ladder.LaneAuto {
		state.AuditRateSince = now
	}
	e, err := ladder.NewAuditEntry(state.Workspace, actor, ladder.AuditLaneChange, ch.ID, now, ch)
	if err != nil {
		return state, nil, nil, err
	}
	e.Event = ladder.LaneChangedEvent(*ch)
	return state, ch, []ladder.AuditEntry{e}, nil
}

func roundNumbers(m map[string]float64) map[string]float64 {
	out := make(map[string]float64, len(m))
	for k, v := range m {
		if math.IsInf(v, 0) || math.IsNaN(v) {
			continue
		}
		out[k] = math.Round(v*1e6) / 1e6
	}
	return out
}

// RecordOutcome records an item's downstream result for the outcome test.
func (s *Service) RecordOutcome(ctx context.Context, p ladder.Principal, req ladder.OutcomeRequest) (ladder.Outcome, error) {
	if req.HandledBy != ladder.HandledByAgent && req.HandledBy != ladder.HandledByPerson {
		return ladder.Outcome{}, &ladder.Error{Code: ladder.CodeInvalidArgument, Message: fmt.Sprintf("The handled_by value %q is not allowed; allowed values: agent, person.", req.HandledBy), Hint: "say who handled the item", Data: map[string]any{"field": "handled_by", "allowed": []string{"agent", "person"}}}
	}
	if req.OK == nil {
		return ladder.Outcome{}, ladder.InvalidField("ok", "The ok field is required.", "send ok: true when the item had no downstream failure (no dispute, no re-rate)")
	}
	if strings.TrimSpace(req.Item) == "" {
		return ladder.Outcome{}, ladder.InvalidField("item", "The item field is required.", "give the id of the work item")
	}
	st, err := s.FindStep(p.Workspace, req.Queue, req.Step)
	if err != nil {
		return ladder.Outcome{}, err
	}
	o := ladder.Outcome{ID: ladder.NewID("oc"), Workspace: p.Workspace, Queue: st.Queue, Step: st.ID, Item: req.Item, HandledBy: req.HandledBy, OK: *req.OK, At: ladder.NormTime(s.now())}
	e, err := ladder.NewAuditEntry(p.Workspace, p.KeyID, ladder.AuditOutcome, o.ID, o.At, o)
	if err != nil {
		return ladder.Outcome{}, err
	}
	if err := s.store.RecordOutcome(ctx, o, e); err != nil {
		return ladder.Outcome{}, storeErr("record outcome", err)
	}
	return o, nil
}

// The rules a person's lane changes record.
const (
	rulePinned   = "pinned by a person"
	ruleUnpinned = "unpinned by a person"
)

// Pin sets a step's lane by a person's hand; the rules leave a pinned step
// alone. Pinning to a lower lane starts a new epoch, like a demotion.
func (s *Service) Pin(ctx context.Context, p ladder.Principal, queue, step string, req ladder.PinRequest, pin bool) (ladder.StepState, error) {
	req.Reason = gate.Redact(req.Reason) // DESIGN.md §8: secrets in notes never reach the log or a response
	if strings.TrimSpace(req.Reason) == "" {
		return ladder.StepState{}, ladder.InvalidField("reason", "The reason field is required.", "say why, in a sentence; it is shown in the evidence pack")
	}
	st, err := s.FindStep(p.Workspace, queue, step)
	if err != nil {
		return ladder.StepState{}, err
	}
	key := ladder.StepKey{Workspace: p.Workspace, Queue: st.Queue, Step: st.ID}
	state, err := s.store.GetStepState(ctx, key)
	if err != nil {
		return ladder.StepState{}, storeErr("get step state", err)
	}
	to := state.Lane
	if pin {
		to = ladder.Lane(req.Lane)
		if !to.Valid() {
			return ladder.StepState{}, ladder.InvalidField("lane", fmt.Sprintf("The lane %q is not allowed; allowed values: human_only, shadow, propose, auto.", req.Lane), "name the lane to pin the step to")
		}
	} else if !state.Pinned {
		return ladder.StepState{}, &ladder.Error{Code: ladder.CodeConflict, Message: "The step is not pinned.", Hint: "nothing to do; pin it first to hold it in a lane"}
	}
	now := ladder.NormTime(s.now())
	rule, kind := rulePinned, ladder.AuditPin
	if !pin {
		rule, kind = ruleUnpinned, ladder.AuditUnpin
	}
	ch := ladder.LaneChange{ID: ladder.NewID("lc"), Workspace: p.Workspace, Queue: st.Queue, Step: st.ID, At: now, From: state.Lane, To: to, Rule: rule, Numbers: map[string]float64{}, Actor: p.KeyID, Reason: req.Reason}
	e, err := ladder.NewAuditEntry(p.Workspace, p.KeyID, kind, ch.ID, now, ch)
	if err != nil {
		return ladder.StepState{}, err
	}
	e.Event = ladder.LaneChangedEvent(ch)
	got, err := s.store.SetLane(ctx, ladder.LaneWrite{Key: key, Change: ch, Pinned: pin, Reason: req.Reason, Audit: []ladder.AuditEntry{e}, IfVersion: state.Version})
	if err == nil {
		s.steps.wrote(got)
	}
	if errors.Is(err, ladder.ErrConflict) {
		return ladder.StepState{}, &ladder.Error{Code: ladder.CodeConflict, Message: "The step changed while you were pinning it.", Hint: "reload the step and try again"}
	}
	if err == nil && (ch.From != to || pin != state.Pinned) {
		ch.To = to
		s.laneChanged(&ch)
	}
	return got, storeErr("set lane", err)
}

// StepsRunAlone lists a workspace's steps with their lanes and why.
// baseURL is this server's public URL, for the evidence links.
func (s *Service) StepsRunAlone(ctx context.Context, workspace, queue, baseURL string) (ladder.StepsView, error) {
	steps := s.Steps(workspace, queue)
	if queue != "" && len(steps) == 0 {
		_, err := s.FindStep(workspace, queue, "x")
		return ladder.StepsView{}, err
	}
	states, err := s.store.ListStepStates(ctx, workspace)
	if err != nil {
		return ladder.StepsView{}, storeErr("list step states", err)
	}
	byKey := map[string]ladder.StepState{}
	for _, st := range states {
		byKey[st.Queue+"/"+st.Step] = st
	}
	view := ladder.StepsView{Workspace: workspace, Steps: []ladder.StepSummary{}}
	var alone []string
	now := s.now()
	for _, st := range steps {
		state, ok := byKey[st.Queue+"/"+st.ID]
		if !ok {
			state = ladder.StepState{Lane: st.StartLane}
		}
		weeks, err := s.store.WeekAggs(ctx, ladder.StepKey{Workspace: workspace, Queue: st.Queue, Step: st.ID})
		if err != nil {
			return ladder.StepsView{}, storeErr("week aggregates", err)
		}
		sortWeeks(weeks)
		f, _ := figures(weeks)
		row := ladder.StepSummary{Queue: st.Queue, Step: st.ID, Name: st.Name, Lane: state.Lane, RunsAlone: state.Lane == ladder.LaneAuto, MoneyMoving: st.MoneyMoving,
			Why: Why(st, state, weeks, s.thresholdsFor(workspace, st), now), Last4WeeksAccuracy: f.Rolling4.Accuracy, AuditRate: round4(state.AuditRate),
			Evidence: strings.TrimSuffix(baseURL, "/") + "/v1/steps/" + st.Queue + "/" + st.ID + "/evidence"}
		if row.RunsAlone {
			alone = append(alone, st.Name)
		}
		view.Steps = append(view.Steps, row)
	}
	others := len(steps) - len(alone)
	list := "none"
	if len(alone) > 0 {
		list = strings.Join(alone, "; ")
	}
	need := fmt.Sprintf("%d other steps need a person.", others)
	if others == 1 {
		need = "1 other step needs a person."
	}
	view.Sentence = fmt.Sprintf("Runs alone (Auto): %s. %s", list, need)
	return view, nil
}

// Evidence builds a step's evidence pack from its weekly aggregates, so it
// costs O(weeks), not O(reviews).
func (s *Service) Evidence(ctx context.Context, workspace, queue, step string) (ladder.EvidencePack, error) {
	st, err := s.FindStep(workspace, queue, step)
	if err != nil {
		return ladder.EvidencePack{}, err
	}
	key := ladder.StepKey{Workspace: workspace, Queue: st.Queue, Step: st.ID}
	state, err := s.store.GetStepState(ctx, key)
	if err != nil {
		return ladder.EvidencePack{}, storeErr("get step state", err)
	}
	weeks, err := s.store.WeekAggs(ctx, key)
	if err != nil {
		return ladder.EvidencePack{}, storeErr("week aggregates", err)
	}
	sortWeeks(weeks)
	changes, err := s.store.LaneChanges(ctx, key)
	if err != nil {
		return ladder.EvidencePack{}, storeErr("lane changes", err)
	}
	oc, err := s.store.OutcomeCounts(ctx, key)
	if err != nil {
		return ladder.EvidencePack{}, storeErr("outcome counts", err)
	}
	dis, err := s.store.Reviews(ctx, ladder.ReviewQuery{Key: key, Disagreement: true, Limit: 10})
	if err != nil {
		return ladder.EvidencePack{}, storeErr("reviews", err)
	}
	aud, err := s.store.Reviews(ctx, ladder.ReviewQuery{Key: key, Kind: ladder.ReviewAudit, Limit: 10})
	if err != nil {
		return ladder.EvidencePack{}, storeErr("reviews", err)
	}
	now := s.now()
	th := s.thresholdsFor(workspace, st)
	f, toWeek := figures(weeks)
	ot := OutcomeTest(oc)
	pack := ladder.EvidencePack{Workspace: workspace, Queue: st.Queue, Step: st.ID, Name: st.Name, Lane: state.Lane, Pinned: state.Pinned, MoneyMoving: st.MoneyMoving, Class: st.Class,
		Why: Why(st, state, weeks, th, now), EvidenceToWeek: toWeek, AuditRate: round4(state.AuditRate), Figures: f, LaneChanges: changes,
		OutcomeTest:         ladder.OutcomeView{State: ot.State, Agent: ot.Agent, Person: ot.Person, Margin: ot.Margin},
		RecentDisagreements: dis, RecentAudits: aud, Thresholds: th}
	if pack.LaneChanges == nil {
		pack.LaneChanges = []ladder.LaneChange{}
	}
	if pack.RecentDisagreements == nil {
		pack.RecentDisagreements = []ladder.Review{}
	}
	if pack.RecentAudits == nil {
		pack.RecentAudits = []ladder.Review{}
	}
	if ot.State != ladder.NINotStarted {
		p := round4(ot.PValue)
		pack.OutcomeTest.PValue = &p
	}
	in := RuleInput(st, state, weeks, oc, now)
	pack.Figures.OperatorError = operatorErrorInForce(in, state.Lane, changes)
	res := rules.Evaluate(th, in)
	switch {
	case res.Next != nil:
		pack.NextMove = &ladder.NextMoveView{To: res.Next.To, Rule: res.Next.Rule, Needs: res.Next.Needs}
	case res.Move != nil:
		pack.NextMove = &ladder.NextMoveView{To: res.Move.To, Rule: res.Move.Rule + " (due at the next review)", Needs: map[string]ladder.Requirement{}}
	case res.Hold != "":
		pack.NextMove = &ladder.NextMoveView{Rule: "held: " + res.Hold + " (only a person moves it)", Needs: map[string]ladder.Requirement{}}
	}
	pack.Sentence = fmt.Sprintf("%s is in %s. Evidence to week %d: %s", st.Name, state.Lane, toWeek, evidenceSummary(f, pack.Why))
	return pack, nil
}

func evidenceSummary(f ladder.Figures, why string) string {
	r := f.Rolling4
	if r.N == 0 || r.Accuracy == nil {
		return "no reviews in the last 4 weeks. " + why
	}
	return fmt.Sprintf("the agent agreed with the person on %s of %d reviews over the last four weeks (Wilson 95%% %.3f–%.3f). %s",
		pct(*r.Accuracy), r.N, r.WilsonLower, r.WilsonUpper, why)
}

// rateAnchor is when the audit rate's clean weeks start counting: its last
// change, or the step's entry into its lane for states stored before the
// rate's change time was kept.
func rateAnchor(st ladder.StepState) time.Time {
	if st.AuditRateSince.IsZero() {
		return st.LaneSince
	}
	return st.AuditRateSince
}

package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/upstream"
)

// A call's result, once the call ran, must reach the store: a replay of
// its idempotency key answers from it, and a call left running looks as
// if it might still run. This file keeps that promise when the store
// fails at the wrong moment (the result is retried, then held in memory
// and retried in the background), and when the process running a call
// dies (the sweep marks the call unknown once it has run longer than its
// executor can, and settles the approvals that waited on it).

const (
	// DefaultCallMargin is how long past its executor's timeout a call may
	// stay running before the sweep marks its outcome unknown. It covers
	// the time around the upstream call (the result's write and its
	// retries) and a replica paused by its host.
	DefaultCallMargin = 2 * time.Minute

	// resultTries and resultBudget bound how long a caller waits while its
	// call's result is retried, before it is held in memory instead.
	resultTries  = 3
	resultBudget = 5 * time.Second
	// maxWaiting and maxWaitingBytes bound the results held in memory;
	// past them a result is dropped (logged) and its call will be marked
	// unknown, never answered wrongly.
	maxWaiting      = 10000
	maxWaitingBytes = 64 << 20
	// retryEvery is the background retrier's first wait, doubled while
	// nothing is stored up to retryAtMost.
	retryEvery  = 250 * time.Millisecond
	retryAtMost = 10 * time.Second
	// sweepPage is how many running calls or executing approvals the sweep
	// reads at once.
	sweepPage = 200
)

// callBook is what this process knows about the calls it runs: those in
// flight (begun, result not stored yet) and those whose result the store
// has not taken yet. The sweep leaves both alone; a replay answers from a
// waiting result.
type callBook struct {
	mu       sync.Mutex
	inflight map[string]struct{}
	waiting  map[string]*waitingResult
	bytes    int
	retrying bool          // the background retrier runs
	stop     chan struct{} // closed by Close
	closed   bool
	wg       sync.WaitGroup
	// orphans are executing approvals this process found with no call
	// stored, by approval id, with the call id and when it first saw them.
	orphans map[string]orphan
}

type orphan struct {
	callID string
	since  time.Time
}

// waitingResult is a finished call whose result the store has not taken.
type waitingResult struct {
	call  ladder.Call
	actor string
	audit ladder.AuditEntry
	size  int
}

func newCallBook() *callBook {
	return &callBook{inflight: map[string]struct{}{}, waiting: map[string]*waitingResult{}, stop: make(chan struct{}), orphans: map[string]orphan{}}
}

func (b *callBook) begin(id string) {
	b.mu.Lock()
	b.inflight[id] = struct{}{}
	b.mu.Unlock()
}

func (b *callBook) end(id string) {
	b.mu.Lock()
	delete(b.inflight, id)
	b.mu.Unlock()
}

// holds reports whether this process runs the call or holds its result.
func (b *callBook) holds(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, run := b.inflight[id]
	_, wait := b.waiting[id]
	return run || wait
}

// result returns the waiting result of a call, if this process holds one.
func (b *callBook) result(id string) (ladder.Call, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	w, ok := b.waiting[id]
	if !ok {
		return ladder.Call{}, false
	}
	return w.call, true
}

// hold keeps w until the store takes it; it reports false when the book
// is full or closed, and whether the retrier must be started.
func (b *callBook) hold(w *waitingResult) (held, start bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.inflight, w.call.ID)
	if b.closed || len(b.waiting) >= maxWaiting || b.bytes+w.size > maxWaitingBytes {
		return false, false
	}
	b.waiting[w.call.ID] = w
	b.bytes += w.size
	start = !b.retrying
	b.retrying = true
	if start {
		b.wg.Add(1)
	}
	return true, start
}

func (b *callBook) drop(id string) {
	b.mu.Lock()
	if w, ok := b.waiting[id]; ok {
		b.bytes -= w.size
		delete(b.waiting, id)
	}
	b.mu.Unlock()
}

// pending returns the waiting results, oldest call first; with none, it
// stops the retrier's loop (retrying false) in the same step.
func (b *callBook) pending() []*waitingResult {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.waiting) == 0 {
		b.retrying = false
		return nil
	}
	out := make([]*waitingResult, 0, len(b.waiting))
	for _, w := range b.waiting {
		out = append(out, w)
	}
	return out
}

// ResultsWaiting returns how many finished calls' results this process
// holds in memory because the store has not taken them yet (exported as
// ladder_call_results_waiting).
func (s *Service) ResultsWaiting() int {
	s.calls.mu.Lock()
	defer s.calls.mu.Unlock()
	return len(s.calls.waiting)
}

// Close stops the background retrier after one last try to store the
// results it holds; those still waiting are logged, and their calls will
// be marked unknown by a later sweep. The store stays open.
func (s *Service) Close() error {
	b := s.calls
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	close(b.stop)
	b.mu.Unlock()
	b.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), resultBudget)
	defer cancel()
	s.storeWaiting(ctx)
	for _, w := range s.calls.pending() {
		s.log.Error("call result lost at shutdown: the store did not take it; the call will be marked unknown", "call_id", w.call.ID,
			"workspace", w.call.Workspace, "capability", w.call.Capability, "status", w.call.Status)
	}
	return nil
}

// recordResult stores the result of a call that ran. The caller's context
// is not used (only its values): the result must be stored whether or not the caller still
// waits. A failing store is retried a few times within resultBudget; then
// the result is held in memory and retried in the background until the
// store takes it, and meanwhile a replay on this process answers from it.
func (s *Service) recordResult(ctx context.Context, actor string, call ladder.Call, audit ladder.AuditEntry) {
	// Nor is its key check: the call began while its key was active, and
	// what it did is stored even if the key was revoked since.
	ctx = ladder.WithoutKeyCheck(context.WithoutCancel(ctx))
	w := &waitingResult{call: call, actor: actor, audit: audit, size: len(call.Result) + len(call.Payload) + len(call.Error) + len(audit.Data) + 512}
	give := time.Now().Add(resultBudget)
	var err error
	for try := 0; try < resultTries; try++ {
		if try > 0 {
			time.Sleep(time.Duration(50<<(2*try)) * time.Millisecond) // 200 ms, 800 ms
		}
		actx, cancel := context.WithDeadline(ctx, give)
		err = s.storeResult(actx, w)
		cancel()
		if err == nil || errors.Is(err, ladder.ErrNotFound) || time.Now().After(give) {
			break
		}
	}
	switch {
	case err == nil:
		s.calls.end(call.ID)
		return
	case errors.Is(err, ladder.ErrNotFound):
		s.calls.end(call.ID)
		s.log.ErrorContext(ctx, "record call result: the call is not stored", "call_id", call.ID, "err", err)
		return
	}
	held, start := s.calls.hold(w)
	if !held {
		s.log.ErrorContext(ctx, "record call result: the store refused it and it cannot be held (memory cap reached, or shutting down); the call will be marked unknown",
			"call_id", call.ID, "capability", call.Capability, "err", err)
		return
	}
	s.log.WarnContext(ctx, "record call result: the store refused it; holding it in memory and retrying", "call_id", call.ID,
		"capability", call.Capability, "results_waiting", s.ResultsWaiting(), "err", err)
	if start {
		go s.retryResults()
	}
}

// storeResult makes one try to store a finished call's result. A call
// that is no longer running was finished by an earlier try whose commit
// reported a failure (nothing more to do), or marked unknown by a sweep:
// the result is the truth and replaces the mark, recorded in the audit
// log.
func (s *Service) storeResult(ctx context.Context, w *waitingResult) error {
	_, err := s.store.FinishCall(ctx, w.call, w.audit)
	if !errors.Is(err, ladder.ErrConflict) {
		return err
	}
	cur, err := s.store.GetCall(ctx, w.call.Workspace, w.call.ID)
	if err != nil {
		return err
	}
	switch cur.Status {
	case ladder.CallOK, ladder.CallFailed:
		return nil
	case ladder.CallUnknown:
	default:
		return fmt.Errorf("call %s is %s after its result was refused: %w", cur.ID, cur.Status, ladder.ErrConflict)
	}
	var data map[string]any
	if err := json.Unmarshal(w.audit.Data, &data); err != nil {
		return fmt.Errorf("result audit data: %w", err)
	}
	data["replaces"] = string(ladder.CallUnknown)
	e, err := ladder.NewAuditEntry(w.call.Workspace, w.actor, ladder.AuditCallResult, w.call.ID, s.now(), data)
	if err != nil {
		return err
	}
	if _, err := s.store.UpdateCall(ctx, w.call, ladder.CallUnknown, e); err != nil {
		return err
	}
	s.log.WarnContext(ctx, "a call marked unknown got its result: the result replaces the mark", "call_id", w.call.ID, "status", w.call.Status)
	if w.call.ApprovalID != "" {
		// The sweep settled its approval as unknown; the truth replaces
		// that too.
		if err := s.settleApprovalOf(ctx, w.call); err != nil {
			s.log.WarnContext(ctx, "settle approval from its call", "approval_id", w.call.ApprovalID, "err", err)
		}
	}
	return nil
}

// retryResults stores held results until none is left or Close.
func (s *Service) retryResults() {
	defer s.calls.wg.Done()
	wait := retryEvery
	for {
		select {
		case <-s.calls.stop:
			return
		case <-time.After(wait):
		}
		ctx, cancel := context.WithTimeout(context.Background(), retryAtMost)
		stored, left := s.storeWaiting(ctx)
		cancel()
		if left == 0 {
			if s.calls.pending() == nil {
				s.log.Info("call results stored; none waiting")
				return
			}
			continue
		}
		s.log.Warn("call results waiting to be stored", "results_waiting", left, "stored_now", stored)
		if stored > 0 {
			wait = retryEvery
		} else {
			wait = min(2*wait, retryAtMost)
		}
	}
}

// storeWaiting tries every held result once and reports how many it
// stored and how many still wait.
func (s *Service) storeWaiting(ctx context.Context) (stored, left int) {
	for _, w := range s.calls.pending() {
		err := s.storeResult(ctx, w)
		switch {
		case err == nil:
			s.calls.drop(w.call.ID)
			stored++
			if w.call.ApprovalID != "" {
				// Its approval may have waited in executing for this.
				if err := s.settleApprovalOf(ctx, w.call); err != nil {
					s.log.WarnContext(ctx, "settle approval from its call", "approval_id", w.call.ApprovalID, "err", err)
				}
			}
		case errors.Is(err, ladder.ErrNotFound):
			s.calls.drop(w.call.ID)
			s.log.ErrorContext(ctx, "record call result: the call is not stored", "call_id", w.call.ID, "err", err)
		default:
			left++
		}
	}
	return stored, left
}

// callTimeout is how long a call of the capability can legitimately run:
// its executor's timeout; for a capability no longer in this replica's
// config, the longest of any.
func (s *Service) callTimeout(workspace, capability string) time.Duration {
	if c, ok := s.FindCapability(workspace, capability); ok {
		return executorTimeout(c.Executor)
	}
	return s.longestTimeout()
}

func executorTimeout(x ladder.Executor) time.Duration {
	if x.Timeout > 0 {
		return x.Timeout
	}
	return upstream.DefaultTimeout
}

// shortestTimeout and longestTimeout are over every capability of every
// workspace, and the default.
func (s *Service) shortestTimeout() time.Duration {
	d := upstream.DefaultTimeout
	for _, w := range s.workspaces {
		for _, c := range w.Capabilities {
			d = min(d, executorTimeout(c.Executor))
		}
	}
	return d
}

func (s *Service) longestTimeout() time.Duration {
	d := upstream.DefaultTimeout
	for _, w := range s.workspaces {
		for _, c := range w.Capabilities {
			d = max(d, executorTimeout(c.Executor))
		}
	}
	return d
}

// RecoverCalls is the sweep serve runs at start and every minute. It
// marks unknown (CallUnknown, with an audit record) every call running for
// longer than its executor's timeout plus the margin, by the store's
// clock, whose result this process does not hold: no process can still be
// running it, so the one that began it died or lost its result. With
// several replicas on one database this is what keeps a replica from
// marking a call another live replica runs: no call legitimately runs
// longer than its executor's timeout, and the database's clock is the one
// every replica measures with. The mark is a compare-and-set from running,
// so a result stored first wins; a result that arrives after it replaces
// it (see storeResult).
//
// Then it settles every approval left executing: with its call's outcome
// once the call has one (ok, failed, or unknown), and, when no call was
// ever stored for it and it has been so for longer than any executor's
// timeout plus the margin, as not executed (retryable), after claiming the
// call's id so that no late process can begin it.
func (s *Service) RecoverCalls(ctx context.Context) (ladder.CallRecovery, error) {
	var r ladder.CallRecovery
	var after int64
	for {
		calls, err := s.store.StaleCalls(ctx, s.shortestTimeout()+s.callMargin, after, sweepPage)
		if err != nil {
			return r, fmt.Errorf("stale calls: %w", err)
		}
		for _, c := range calls {
			after = c.Seq
			limit := s.callTimeout(c.Workspace, c.Capability) + s.callMargin
			if c.RunningFor < limit || s.calls.holds(c.ID) {
				continue
			}
			err := s.markUnknown(ctx, c, limit)
			switch {
			case err == nil:
				r.MarkedUnknown++
			case errors.Is(err, ladder.ErrConflict):
				// Its result was stored first.
			default:
				return r, err
			}
		}
		if len(calls) < sweepPage {
			break
		}
	}
	seen := map[string]bool{}
	for _, ws := range s.order {
		q := ladder.ApprovalQuery{Workspace: ws, Status: ladder.ApprovalExecuting, Limit: sweepPage}
		for {
			rows, err := s.store.ListApprovals(ctx, q)
			if err != nil {
				return r, fmt.Errorf("executing approvals: %w", err)
			}
			for _, a := range rows {
				if a.Status != ladder.ApprovalExecuting {
					continue
				}
				seen[a.ID] = true
				ok, err := s.recoverApproval(ctx, a)
				if err != nil {
					return r, err
				}
				if ok {
					r.ApprovalsSettled++
				}
			}
			if len(rows) < q.Limit {
				break
			}
			q.BeforeSeq = rows[len(rows)-1].Seq
		}
	}
	s.calls.mu.Lock()
	for id := range s.calls.orphans {
		if !seen[id] {
			delete(s.calls.orphans, id)
		}
	}
	s.calls.mu.Unlock()
	return r, nil
}

// unknownReason is what a call marked unknown says about itself.
const unknownReason = "the server running it stopped (or lost its database) after the call began and before its result was stored"

// markUnknown marks a running call's outcome unknown, from running.
func (s *Service) markUnknown(ctx context.Context, c ladder.Call, limit time.Duration) error {
	now := ladder.NormTime(s.now())
	b := c
	b.Status, b.ErrorCode, b.Error = ladder.CallUnknown, ladder.CodeOutcomeUnknown, unknownReason
	e, err := ladder.NewAuditEntry(c.Workspace, "system", ladder.AuditCallResult, c.ID, now, map[string]any{
		"event": "outcome_unknown", "capability": c.Capability, "status": ladder.CallUnknown, "approval_id": c.ApprovalID,
		"running_ms": c.RunningFor.Milliseconds(), "limit_ms": limit.Milliseconds(), "reason": unknownReason,
	})
	if err != nil {
		return err
	}
	if _, err := s.store.UpdateCall(ctx, b, ladder.CallRunning, e); err != nil {
		return fmt.Errorf("mark call unknown: %w", err)
	}
	s.log.WarnContext(ctx, "call outcome unknown: it ran longer than its executor's timeout plus the margin and no result was stored",
		"call_id", c.ID, "workspace", c.Workspace, "capability", c.Capability, "running_for", c.RunningFor.String(), "limit", limit.String())
	return nil
}

// recoverApproval settles one approval found executing, if it can be.
func (s *Service) recoverApproval(ctx context.Context, a ladder.Approval) (bool, error) {
	callID := a.CallID
	var (
		c   ladder.Call
		err error
	)
	if callID == "" {
		// Executing since before call ids were given out with the decision:
		// its first execution's key names the call.
		c, err = s.store.CallByKey(ctx, a.Workspace, a.Capability, "approval:"+a.ID)
	} else {
		c, err = s.store.GetCall(ctx, a.Workspace, callID)
	}
	switch {
	case err == nil:
		if c.Status == ladder.CallRunning {
			return false, nil // the call sweep marks it when it is due
		}
		s.forgetOrphan(a.ID)
		return s.settleApproval(ctx, a, c)
	case !errors.Is(err, ladder.ErrNotFound):
		return false, fmt.Errorf("call of approval %s: %w", a.ID, err)
	}
	// No call stored. A live process may be about to begin it (the gate
	// runs in between); only once this process has seen it so for longer
	// than any call could take is the process that approved it gone.
	now := s.now()
	s.calls.mu.Lock()
	o, ok := s.calls.orphans[a.ID]
	if !ok || o.callID != callID {
		o = orphan{callID: callID, since: now}
		s.calls.orphans[a.ID] = o
	}
	s.calls.mu.Unlock()
	if now.Sub(o.since) < s.longestTimeout()+s.callMargin || (callID != "" && s.calls.holds(callID)) {
		return false, nil
	}
	// Claim the call id (and, for an old approval, its first key) with a
	// call that never ran, so a late process cannot begin it.
	if callID == "" {
		callID = ladder.NewID("cl")
	}
	tomb := ladder.Call{ID: callID, Workspace: a.Workspace, Capability: a.Capability, KeyID: "system", Status: ladder.CallFailed,
		ErrorCode: ladder.CodeInternal, Error: "the server stopped after the approval and before the call began; nothing ran",
		Payload: a.Payload, Scope: a.Scope, ApprovalID: a.ID, StartedAt: ladder.NormTime(now)}
	if len(a.EditedPayload) > 0 {
		tomb.Payload = a.EditedPayload
	}
	if a.CallID == "" {
		tomb.IdempotencyKey = "approval:" + a.ID
	}
	e, err := ladder.NewAuditEntry(a.Workspace, "system", ladder.AuditCall, tomb.ID, now, map[string]any{
		"event": "never_began", "capability": a.Capability, "approval_id": a.ID, "reason": tomb.Error,
	})
	if err != nil {
		return false, err
	}
	got, created, err := s.store.BeginCall(ctx, tomb, e)
	switch {
	case errors.Is(err, ladder.ErrConflict):
		// The call began after all (its id is taken): settle it from the
		// call on a later pass.
		return false, nil
	case err != nil:
		return false, fmt.Errorf("claim call of approval %s: %w", a.ID, err)
	case !created && got.Status == ladder.CallRunning:
		return false, nil
	}
	s.forgetOrphan(a.ID)
	return s.settleApproval(ctx, a, got)
}

func (s *Service) forgetOrphan(approvalID string) {
	s.calls.mu.Lock()
	delete(s.calls.orphans, approvalID)
	s.calls.mu.Unlock()
}

// settleApprovalOf settles the approval a call ran for, from the call.
func (s *Service) settleApprovalOf(ctx context.Context, c ladder.Call) error {
	a, err := s.store.GetApproval(ctx, c.Workspace, c.ApprovalID)
	if err != nil {
		return err
	}
	_, err = s.settleApproval(ctx, a, c)
	return err
}

// outcomeUnknownOf reports whether an approval's execution was stored with
// an unknown outcome.
func outcomeUnknownOf(a ladder.Approval) bool {
	return a.Status == ladder.ApprovalApproved && strings.HasPrefix(a.ExecError, string(ladder.CodeOutcomeUnknown)+":")
}

// settleApproval stores an approval's execution outcome from its call: an
// approval left executing takes the call's outcome (approved with its
// result; approved and not executed with its error, retryable; or
// approved with an unknown outcome), and one stored with an unknown
// outcome takes the result that arrived after it. Anything else is left
// as it is.
func (s *Service) settleApproval(ctx context.Context, a ladder.Approval, c ladder.Call) (bool, error) {
	if a.CallID != "" && a.CallID != c.ID {
		return false, nil // another execution of it
	}
	from := a.Status
	switch {
	case c.Status == ladder.CallRunning:
		return false, nil
	case from == ladder.ApprovalExecuting:
	case outcomeUnknownOf(a) && c.Status != ladder.CallUnknown:
	default:
		return false, nil
	}
	now := ladder.NormTime(s.now())
	b := a
	b.Status, b.CallID, b.Result, b.ExecutedAt = ladder.ApprovalApproved, c.ID, nil, nil
	switch c.Status {
	case ladder.CallOK:
		b.ExecError, b.Result, b.ExecutedAt = "", c.Result, c.FinishedAt
		if b.ExecutedAt == nil {
			b.ExecutedAt = &now
		}
	case ladder.CallUnknown:
		b.ExecError = fmt.Sprintf("%s: call %s %s; it may or may not have run upstream, and ladder will not run it again: check the upstream system", ladder.CodeOutcomeUnknown, c.ID, unknownReason)
	default:
		b.ExecError = fmt.Sprintf("%s: %s", c.ErrorCode, c.Error)
	}
	e, err := ladder.NewAuditEntry(a.Workspace, "system", ladder.AuditApproval, a.ID, now, map[string]any{
		"event": "executed", "status": b.Status, "exec_error": b.ExecError, "call_id": c.ID, "call_status": c.Status, "settled_from": from,
	})
	if err != nil {
		return false, err
	}
	e.Event = executionFailed(b, now)
	if _, err := s.updateApproval(ctx, b, from, []ladder.AuditEntry{e}); err != nil {
		if errors.Is(err, ladder.ErrConflict) {
			return false, nil // settled by someone else first
		}
		return false, fmt.Errorf("settle approval %s: %w", a.ID, err)
	}
	s.log.InfoContext(ctx, "approval settled from its call", "approval_id", a.ID, "call_id", c.ID, "call_status", c.Status)
	return true, nil
}

// outcomeUnknown is the answer to a replay of a call whose outcome is
// unknown.
func outcomeUnknown(c ladder.Call) error {
	return &ladder.Error{Code: ladder.CodeOutcomeUnknown,
		Message: fmt.Sprintf("The outcome of call %s is unknown: %s.", c.ID, unknownReason),
		Hint: fmt.Sprintf("it may or may not have run upstream, and ladder will not run it again under this idempotency_key; check the upstream system for call %s (idempotency key %q) before acting again, and send a new idempotency_key only if it did not run",
			c.ID, c.IdempotencyKey),
		Data: map[string]any{"call_id": c.ID, "replayed": true, "idempotency_key": c.IdempotencyKey}}
}

// storeApprovalOutcome stores an approval's execution outcome over
// executing, retried as a call's result is; an approval settled first
// from the same call (by the sweep or the retrier) is returned as stored.
func (s *Service) storeApprovalOutcome(ctx context.Context, b ladder.Approval, e ladder.AuditEntry) (ladder.Approval, error) {
	ctx = context.WithoutCancel(ctx)
	give := time.Now().Add(resultBudget)
	var err error
	for try := 0; try < resultTries; try++ {
		if try > 0 {
			time.Sleep(time.Duration(50<<(2*try)) * time.Millisecond)
		}
		actx, cancel := context.WithDeadline(ctx, give)
		var got ladder.Approval
		got, err = s.updateApproval(actx, b, ladder.ApprovalExecuting, []ladder.AuditEntry{e})
		if errors.Is(err, ladder.ErrConflict) {
			// Stored by an earlier try whose commit reported a failure, or
			// settled from the call meanwhile.
			if cur, gerr := s.store.GetApproval(actx, b.Workspace, b.ID); gerr == nil && cur.CallID == b.CallID && cur.Status != ladder.ApprovalExecuting {
				got, err = cur, nil
			}
		}
		cancel()
		if err == nil {
			return got, nil
		}
		if errors.Is(err, ladder.ErrConflict) || errors.Is(err, ladder.ErrNotFound) || time.Now().After(give) {
			break
		}
	}
	return ladder.Approval{}, err
}

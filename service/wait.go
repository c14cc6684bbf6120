package service

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/ladderhq/ladder"
)

// MaxApprovalWait is the longest an agent may wait for an approval's
// outcome in one call.
const MaxApprovalWait = 60 * time.Second

// waiters are the calls waiting on approvals, by approval id. The zero
// value is ready to use.
type waiters struct {
	mu sync.Mutex
	m  map[string]map[chan struct{}]struct{}
}

// add registers a waiter on id; its channel receives when id may have
// changed.
func (w *waiters) add(id string) chan struct{} {
	ch := make(chan struct{}, 1)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[string]map[chan struct{}]struct{}{}
	}
	if w.m[id] == nil {
		w.m[id] = map[chan struct{}]struct{}{}
	}
	w.m[id][ch] = struct{}{}
	return ch
}

func (w *waiters) remove(id string, ch chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.m[id], ch)
	if len(w.m[id]) == 0 {
		delete(w.m, id)
	}
}

// notify wakes the waiters on id ("" wakes every waiter).
func (w *waiters) notify(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for key, chs := range w.m {
		if id != "" && key != id {
			continue
		}
		for ch := range chs {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

// ApprovalChanged tells the agents waiting on approval id, on this
// replica, to look again: another replica stored a change to it (the
// store's change notifications), or, with id "", changes may have been
// missed.
func (s *Service) ApprovalChanged(id string) { s.waiters.notify(id) }

// updateApproval is the store's UpdateApproval, then a word to the agents
// waiting on the approval here.
func (s *Service) updateApproval(ctx context.Context, a ladder.Approval, from ladder.ApprovalStatus, audit []ladder.AuditEntry) (ladder.Approval, error) {
	got, err := s.store.UpdateApproval(ctx, a, from, audit)
	s.waiters.notify(a.ID) // on an error too: the approval may have expired meanwhile
	return got, err
}

// settled reports whether an approval has its final outcome: decided and,
// when approved, executed (or failed); or expired.
func settled(st ladder.ApprovalStatus) bool {
	return st != ladder.ApprovalPending && st != ladder.ApprovalExecuting
}

// WaitApproval is ApprovalStatus that, for up to wait, waits for the
// approval's outcome: it answers as soon as the approval is rejected,
// approved and run, or expired, and with the status then (pending) when
// the wait ends. It holds no database connection while it waits: it reads
// when a decision is stored (on any replica) and when the deadline passes.
func (s *Service) WaitApproval(ctx context.Context, p ladder.Principal, id string, wait time.Duration) (ladder.ApprovalView, error) {
	if wait < 0 || wait > MaxApprovalWait {
		return ladder.ApprovalView{}, argError("wait", fmt.Sprintf("%s is out of range", wait), "wait 0 to 60 seconds for the outcome")
	}
	if wait == 0 {
		return s.ApprovalStatus(ctx, p, id)
	}
	ch := s.waiters.add(id)
	defer s.waiters.remove(id, ch)
	end := time.NewTimer(wait)
	defer end.Stop()
	for {
		v, err := s.ApprovalStatus(ctx, p, id)
		if err != nil || settled(v.Status) {
			return v, err
		}
		// The store decides expiry by its clock; read again a moment after
		// the deadline by ours (and so on, should the clocks differ).
		next := wait
		if v.Status == ladder.ApprovalPending && !v.ExpiresAt.IsZero() {
			next = max(time.Until(v.ExpiresAt), 0) + 100*time.Millisecond
		}
		expiry := time.NewTimer(next)
		select {
		case <-ch:
		case <-expiry.C:
		case <-end.C:
			expiry.Stop()
			return s.ApprovalStatus(ctx, p, id)
		case <-ctx.Done():
			expiry.Stop()
			return ladder.ApprovalView{}, ctx.Err()
		}
		expiry.Stop()
	}
}

// CallCapabilityWait is CallCapability for a caller that can block: when
// the call becomes an approval request and wait is positive, it waits up
// to wait for the outcome, as WaitApproval does (no database connection
// held), and answers with it — the executed result when a person approved
// and the call ran in time, the rejection, the expiry or the failed run —
// or, when the wait ends first, with the usual approval_requested answer.
// wait never reaches the payload: the surfaces pass it beside the
// arguments (REST's ?wait=, MCP's _meta), so it cannot collide with a
// payload field of the same name.
func (s *Service) CallCapabilityWait(ctx context.Context, p ladder.Principal, name string, raw json.RawMessage, wait time.Duration) (ladder.CallResult, error) {
	if wait < 0 || wait > MaxApprovalWait {
		return ladder.CallResult{}, argError("wait", fmt.Sprintf("%s is out of range", wait), "wait 0 to 60 seconds for a person's decision, or leave it out to answer at once")
	}
	res, err := s.CallCapability(ctx, p, name, raw)
	if err != nil || wait == 0 || res.Status != ladder.CallResultApprovalRequested || res.ApprovalID == "" {
		return res, err
	}
	v, err := s.WaitApproval(ctx, p, res.ApprovalID, wait)
	if err != nil {
		if ctx.Err() != nil {
			return ladder.CallResult{}, ctx.Err()
		}
		// The approval is stored; the agent learns its outcome with
		// approval_status, as without wait.
		s.log.Warn("wait for approval", "approval_id", res.ApprovalID, "err", err)
		return res, nil
	}
	return waitedResult(res, v), nil
}

// waitedResult is the answer to a call that waited for its approval: res
// as it was (approval_requested) while the approval is pending, else the
// approval's outcome.
func waitedResult(res ladder.CallResult, v ladder.ApprovalView) ladder.CallResult {
	by := v.DecidedBy
	if by == "" {
		by = "a person"
	}
	switch {
	case v.Status == ladder.ApprovalApproved && v.ExecError == "":
		res.Status, res.Result, res.CallID, res.ExpiresAt = ladder.CallResultExecuted, v.Result, v.CallID, nil
		res.Message = fmt.Sprintf("Approval %s was approved by %s and the call ran once; result holds the upstream's answer.", v.ID, by)
		if len(v.EditedPayload) > 0 {
			res.Proposal = v.EditedPayload
			res.Message = fmt.Sprintf("Approval %s was approved by %s with an edited payload (proposal holds it) and the call ran once; result holds the upstream's answer.", v.ID, by)
		}
	case v.Status == ladder.ApprovalApproved:
		res.Status, res.CallID, res.ExpiresAt = ladder.CallResultExecutionFailed, v.CallID, nil
		res.Message = fmt.Sprintf("Approval %s was approved by %s but the call did not run: %s", v.ID, by, v.ExecError)
	case v.Status == ladder.ApprovalRejected:
		res.Status, res.ExpiresAt = ladder.CallResultRejected, nil
		res.Message = fmt.Sprintf("Approval %s was rejected by %s; nothing ran. Reason: %s", v.ID, by, v.DecisionReason)
	case v.Status == ladder.ApprovalExpired:
		res.Status = ladder.CallResultExpired
		res.Message = fmt.Sprintf("Approval %s expired: nobody decided in time, and nothing ran.", v.ID)
	}
	return res
}

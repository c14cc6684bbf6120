// Package faultstore wraps a ladder.Store and makes it fail on command: the
// store going away, turning read-only, running out of space, or hanging;
// or one method failing its next few calls, before or after they commit.
// Tests use it to prove that ladder refuses with AUDIT_UNAVAILABLE, runs
// nothing, reports not ready, and resumes by itself when the fault clears.
package faultstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ladderhq/ladder"
)

// The faults a Store can inject. Each wraps ladder.ErrUnavailable, as the
// real stores do when the database cannot durably write.
var (
	ErrDown     = fmt.Errorf("database went away: %w", ladder.ErrUnavailable)
	ErrReadOnly = fmt.Errorf("attempt to write a readonly database: %w", ladder.ErrUnavailable)
	ErrDiskFull = fmt.Errorf("database or disk is full: %w", ladder.ErrUnavailable)
)

// Store is a ladder.Store that passes every call to the wrapped store
// unless a fault is set.
type Store struct {
	next ladder.Store

	mu       sync.Mutex
	writeErr error         // writes fail with it
	readErr  error         // reads fail with it
	unseen   error         // writes but Ping's probe fail with it
	hang     chan struct{} // non-nil: every call waits until it is closed or ctx ends
	next1    map[string][]methodFault
	refusedW atomic.Int64
	refusedR atomic.Int64
	passedW  atomic.Int64
	hung     atomic.Int64
	pings    atomic.Int64
}

var _ ladder.Store = (*Store)(nil)

// New wraps next.
func New(next ladder.Store) *Store { return &Store{next: next} }

// FailWrites makes every write (and Ping) fail with err; nil clears it.
func (s *Store) FailWrites(err error) {
	s.mu.Lock()
	s.writeErr = err
	s.mu.Unlock()
}

// FailReads makes every read (and Ping) fail with err; nil clears it.
func (s *Store) FailReads(err error) {
	s.mu.Lock()
	s.readErr = err
	s.mu.Unlock()
}

// FailWritesButPing makes every write fail with err while Ping still
// succeeds; nil clears it. It is the fault a store's write probe cannot
// see: a one-row probe that fits where a new route does not, or a
// privilege revoked on one table. Only the callers' writes reveal it.
func (s *Store) FailWritesButPing(err error) {
	s.mu.Lock()
	s.unseen = err
	s.mu.Unlock()
}

// FailAll makes every call fail with err; nil clears every fault.
func (s *Store) FailAll(err error) {
	s.FailWrites(err)
	s.FailReads(err)
	s.FailWritesButPing(nil)
}

// Hang makes every call wait until the returned release function is called
// (or the call's context ends, when it fails with the context's error).
func (s *Store) Hang() (release func()) {
	ch := make(chan struct{})
	s.mu.Lock()
	s.hang = ch
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			if s.hang == ch {
				s.hang = nil
			}
			s.mu.Unlock()
			close(ch)
		})
	}
}

// methodFault is one queued failure of one method (FailNext), or a call
// let through (PassNext, err nil).
type methodFault struct {
	err         error
	afterCommit bool
	sticky      bool // stays at the head of the queue (FailNext with n < 0)
}

// PassNext lets the next n calls of the named method through before the
// faults queued after it: to fail the second UpdateApproval of an
// approval, not the first.
func (s *Store) PassNext(method string, n int) { s.queue(method, n, nil, false) }

// ClearNext drops every fault FailNext, FailNextAfterCommit and PassNext
// queued.
func (s *Store) ClearNext() {
	s.mu.Lock()
	s.next1 = nil
	s.mu.Unlock()
}

// FailNext makes the next n calls of the named method ("FinishCall",
// "UpdateCall", "UpdateApproval") fail with err, before they reach the
// wrapped store; the faults queue behind any set already. A negative n
// fails every call from then on, until ClearNext.
func (s *Store) FailNext(method string, n int, err error) { s.queue(method, n, err, false) }

// FailNextAfterCommit is FailNext for a connection that drops after the
// COMMIT: each call reaches the wrapped store, which stores it, and then
// fails with err, so the caller cannot tell that it happened.
func (s *Store) FailNextAfterCommit(method string, n int, err error) { s.queue(method, n, err, true) }

func (s *Store) queue(method string, n int, err error, afterCommit bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.next1 == nil {
		s.next1 = map[string][]methodFault{}
	}
	f := methodFault{err: err, afterCommit: afterCommit, sticky: n < 0}
	if n < 0 {
		n = 1
	}
	for range n {
		s.next1[method] = append(s.next1[method], f)
	}
}

// take pops the next queued fault of method, if any.
func (s *Store) take(method string) (methodFault, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.next1[method]
	if len(q) == 0 {
		return methodFault{}, false
	}
	if !q[0].sticky {
		s.next1[method] = q[1:]
	}
	return q[0], true
}

// faulted runs do, the wrapped store's method, under the next queued fault
// of method.
func faulted[T any](s *Store, method string, do func() (T, error)) (T, error) {
	f, ok := s.take(method)
	if !ok || f.err == nil {
		return do()
	}
	var zero T
	if !f.afterCommit {
		s.refusedW.Add(1)
		return zero, f.err
	}
	if _, err := do(); err != nil {
		return zero, err
	}
	return zero, f.err
}

// RefusedWrites returns how many writes the fault refused.
func (s *Store) RefusedWrites() int64 { return s.refusedW.Load() }

// Hung returns how many calls are waiting on Hang right now.
func (s *Store) Hung() int64 { return s.hung.Load() }

// PassedWrites returns how many writes reached the wrapped store.
func (s *Store) PassedWrites() int64 { return s.passedW.Load() }

// Pings returns how many times Ping was called.
func (s *Store) Pings() int64 { return s.pings.Load() }

func (s *Store) wait(ctx context.Context) error {
	s.mu.Lock()
	ch := s.hang
	s.mu.Unlock()
	if ch == nil {
		return nil
	}
	s.hung.Add(1)
	defer s.hung.Add(-1)
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("store hung: %w", errors.Join(ctx.Err(), ladder.ErrUnavailable))
	}
}

func (s *Store) write(ctx context.Context) error {
	if err := s.wait(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	err := cmp.Or(s.writeErr, s.unseen)
	s.mu.Unlock()
	if err != nil {
		s.refusedW.Add(1)
		return err
	}
	s.passedW.Add(1)
	return nil
}

func (s *Store) read(ctx context.Context) error {
	if err := s.wait(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	err := s.readErr
	s.mu.Unlock()
	if err != nil {
		s.refusedR.Add(1)
	}
	return err
}

// Ping is the stores' read and durable write probe: it fails while reads
// or writes fail (FailWritesButPing aside), so /readyz reports not ready.
func (s *Store) Ping(ctx context.Context) error {
	s.pings.Add(1)
	if err := s.wait(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	err := errors.Join(s.writeErr, s.readErr)
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return s.next.Ping(ctx)
}

// Close closes the wrapped store.
func (s *Store) Close() error { return s.next.Close() }

// CreateKey implements ladder.Store.
func (s *Store) CreateKey(ctx context.Context, k ladder.Key, a ladder.AuditEntry) error {
	if err := s.write(ctx); err != nil {
		return err
	}
	return s.next.CreateKey(ctx, k, a)
}

// GetKey implements ladder.Store.
func (s *Store) GetKey(ctx context.Context, id string) (ladder.Key, error) {
	if err := s.read(ctx); err != nil {
		return ladder.Key{}, err
	}
	return s.next.GetKey(ctx, id)
}

// ListKeys implements ladder.Store.
func (s *Store) ListKeys(ctx context.Context, ws string) ([]ladder.Key, error) {
	if err := s.read(ctx); err != nil {
		return nil, err
	}
	return s.next.ListKeys(ctx, ws)
}

// RevokeKey implements ladder.Store.
func (s *Store) RevokeKey(ctx context.Context, id string, at time.Time, a ladder.AuditEntry) error {
	if err := s.write(ctx); err != nil {
		return err
	}
	return s.next.RevokeKey(ctx, id, at, a)
}

// CountKeys implements ladder.Store.
func (s *Store) CountKeys(ctx context.Context) (int, error) {
	if err := s.read(ctx); err != nil {
		return 0, err
	}
	return s.next.CountKeys(ctx)
}

// AppendAudit implements ladder.Store.
func (s *Store) AppendAudit(ctx context.Context, e ...ladder.AuditEntry) ([]ladder.AuditRecord, error) {
	if err := s.write(ctx); err != nil {
		return nil, err
	}
	return s.next.AppendAudit(ctx, e...)
}

// ListAudit implements ladder.Store.
func (s *Store) ListAudit(ctx context.Context, q ladder.AuditQuery) ([]ladder.AuditRecord, error) {
	if err := s.read(ctx); err != nil {
		return nil, err
	}
	return s.next.ListAudit(ctx, q)
}

// WalkAudit implements ladder.Store.
func (s *Store) WalkAudit(ctx context.Context, after int64, fn func(ladder.AuditRecord) error) error {
	if err := s.read(ctx); err != nil {
		return err
	}
	return s.next.WalkAudit(ctx, after, fn)
}

// EnsureSteps implements ladder.Store.
func (s *Store) EnsureSteps(ctx context.Context, st []ladder.StepState) error {
	if err := s.write(ctx); err != nil {
		return err
	}
	return s.next.EnsureSteps(ctx, st)
}

// GetStepState implements ladder.Store.
func (s *Store) GetStepState(ctx context.Context, k ladder.StepKey) (ladder.StepState, error) {
	if err := s.read(ctx); err != nil {
		return ladder.StepState{}, err
	}
	return s.next.GetStepState(ctx, k)
}

// ListStepStates implements ladder.Store.
func (s *Store) ListStepStates(ctx context.Context, ws string) ([]ladder.StepState, error) {
	if err := s.read(ctx); err != nil {
		return nil, err
	}
	return s.next.ListStepStates(ctx, ws)
}

// RecordRoute implements ladder.Store.
func (s *Store) RecordRoute(ctx context.Context, r ladder.Route, a ladder.AuditEntry) (ladder.Route, bool, error) {
	if err := s.write(ctx); err != nil {
		return ladder.Route{}, false, err
	}
	return s.next.RecordRoute(ctx, r, a)
}

// GetRoute implements ladder.Store.
func (s *Store) GetRoute(ctx context.Context, ws, id string) (ladder.Route, error) {
	if err := s.read(ctx); err != nil {
		return ladder.Route{}, err
	}
	return s.next.GetRoute(ctx, ws, id)
}

// RecordReview implements ladder.Store.
func (s *Store) RecordReview(ctx context.Context, w ladder.ReviewWrite) (ladder.StepState, *ladder.LaneChange, error) {
	if err := s.write(ctx); err != nil {
		return ladder.StepState{}, nil, err
	}
	return s.next.RecordReview(ctx, w)
}

// SetLane implements ladder.Store.
func (s *Store) SetLane(ctx context.Context, w ladder.LaneWrite) (ladder.StepState, error) {
	if err := s.write(ctx); err != nil {
		return ladder.StepState{}, err
	}
	return s.next.SetLane(ctx, w)
}

// WeekAggs implements ladder.Store.
func (s *Store) WeekAggs(ctx context.Context, k ladder.StepKey) ([]ladder.WeekAgg, error) {
	if err := s.read(ctx); err != nil {
		return nil, err
	}
	return s.next.WeekAggs(ctx, k)
}

// LaneChanges implements ladder.Store.
func (s *Store) LaneChanges(ctx context.Context, k ladder.StepKey) ([]ladder.LaneChange, error) {
	if err := s.read(ctx); err != nil {
		return nil, err
	}
	return s.next.LaneChanges(ctx, k)
}

// Reviews implements ladder.Store.
func (s *Store) Reviews(ctx context.Context, q ladder.ReviewQuery) ([]ladder.Review, error) {
	if err := s.read(ctx); err != nil {
		return nil, err
	}
	return s.next.Reviews(ctx, q)
}

// RecordOutcome implements ladder.Store.
func (s *Store) RecordOutcome(ctx context.Context, o ladder.Outcome, a ladder.AuditEntry) error {
	if err := s.write(ctx); err != nil {
		return err
	}
	return s.next.RecordOutcome(ctx, o, a)
}

// OutcomeCounts implements ladder.Store.
func (s *Store) OutcomeCounts(ctx context.Context, k ladder.StepKey) (ladder.OutcomeCounts, error) {
	if err := s.read(ctx); err != nil {
		return ladder.OutcomeCounts{}, err
	}
	return s.next.OutcomeCounts(ctx, k)
}

// Outcomes implements ladder.Store.
func (s *Store) Outcomes(ctx context.Context, k ladder.StepKey) ([]ladder.Outcome, error) {
	if err := s.read(ctx); err != nil {
		return nil, err
	}
	return s.next.Outcomes(ctx, k)
}

// RecordGateDecision implements ladder.Store.
func (s *Store) RecordGateDecision(ctx context.Context, d ladder.GateDecisionRecord, a ladder.AuditEntry) (ladder.GateDecisionRecord, error) {
	if err := s.write(ctx); err != nil {
		return ladder.GateDecisionRecord{}, err
	}
	return s.next.RecordGateDecision(ctx, d, a)
}

// GateHistory implements ladder.Store.
func (s *Store) GateHistory(ctx context.Context, q ladder.GateHistoryQuery) ([]ladder.GateDecisionRecord, error) {
	if err := s.read(ctx); err != nil {
		return nil, err
	}
	return s.next.GateHistory(ctx, q)
}

// CreateApproval implements ladder.Store.
func (s *Store) CreateApproval(ctx context.Context, a ladder.Approval, e ladder.AuditEntry) (ladder.Approval, bool, error) {
	if err := s.write(ctx); err != nil {
		return ladder.Approval{}, false, err
	}
	return s.next.CreateApproval(ctx, a, e)
}

// GetApproval implements ladder.Store.
func (s *Store) GetApproval(ctx context.Context, ws, id string) (ladder.Approval, error) {
	if err := s.read(ctx); err != nil {
		return ladder.Approval{}, err
	}
	return s.next.GetApproval(ctx, ws, id)
}

// ApprovalByKey implements ladder.Store.
func (s *Store) ApprovalByKey(ctx context.Context, ws, capability, key string) (ladder.Approval, error) {
	if err := s.read(ctx); err != nil {
		return ladder.Approval{}, err
	}
	return s.next.ApprovalByKey(ctx, ws, capability, key)
}

// ListApprovals implements ladder.Store.
func (s *Store) ListApprovals(ctx context.Context, q ladder.ApprovalQuery) ([]ladder.Approval, error) {
	if err := s.read(ctx); err != nil {
		return nil, err
	}
	return s.next.ListApprovals(ctx, q)
}

// UpdateApproval implements ladder.Store.
func (s *Store) UpdateApproval(ctx context.Context, a ladder.Approval, from ladder.ApprovalStatus, e []ladder.AuditEntry) (ladder.Approval, error) {
	if err := s.write(ctx); err != nil {
		return ladder.Approval{}, err
	}
	return faulted(s, "UpdateApproval", func() (ladder.Approval, error) { return s.next.UpdateApproval(ctx, a, from, e) })
}

// BeginCall implements ladder.Store.
func (s *Store) BeginCall(ctx context.Context, c ladder.Call, a ladder.AuditEntry) (ladder.Call, bool, error) {
	if err := s.write(ctx); err != nil {
		return ladder.Call{}, false, err
	}
	return s.next.BeginCall(ctx, c, a)
}

// RouteAndBeginCall implements ladder.Store.
func (s *Store) RouteAndBeginCall(ctx context.Context, r ladder.Route, ra ladder.AuditEntry, c ladder.Call, ca ladder.AuditEntry) (ladder.RouteCall, error) {
	if err := s.write(ctx); err != nil {
		return ladder.RouteCall{}, err
	}
	return s.next.RouteAndBeginCall(ctx, r, ra, c, ca)
}

// FinishCall implements ladder.Store.
func (s *Store) FinishCall(ctx context.Context, c ladder.Call, a ladder.AuditEntry) (ladder.Call, error) {
	if err := s.write(ctx); err != nil {
		return ladder.Call{}, err
	}
	return faulted(s, "FinishCall", func() (ladder.Call, error) { return s.next.FinishCall(ctx, c, a) })
}

// UpdateCall implements ladder.Store.
func (s *Store) UpdateCall(ctx context.Context, c ladder.Call, from ladder.CallStatus, a ladder.AuditEntry) (ladder.Call, error) {
	if err := s.write(ctx); err != nil {
		return ladder.Call{}, err
	}
	return faulted(s, "UpdateCall", func() (ladder.Call, error) { return s.next.UpdateCall(ctx, c, from, a) })
}

// StaleCalls implements ladder.Store.
func (s *Store) StaleCalls(ctx context.Context, minAge time.Duration, afterSeq int64, limit int) ([]ladder.Call, error) {
	if err := s.read(ctx); err != nil {
		return nil, err
	}
	return s.next.StaleCalls(ctx, minAge, afterSeq, limit)
}

// GetCall implements ladder.Store.
func (s *Store) GetCall(ctx context.Context, ws, id string) (ladder.Call, error) {
	if err := s.read(ctx); err != nil {
		return ladder.Call{}, err
	}
	return s.next.GetCall(ctx, ws, id)
}

// CallByKey implements ladder.Store.
func (s *Store) CallByKey(ctx context.Context, ws, capability, key string) (ladder.Call, error) {
	if err := s.read(ctx); err != nil {
		return ladder.Call{}, err
	}
	return s.next.CallByKey(ctx, ws, capability, key)
}

// CreateSession implements ladder.Store.
func (s *Store) CreateSession(ctx context.Context, se ladder.Session, a ladder.AuditEntry) error {
	if err := s.write(ctx); err != nil {
		return err
	}
	return s.next.CreateSession(ctx, se, a)
}

// GetSession implements ladder.Store.
func (s *Store) GetSession(ctx context.Context, idHash []byte) (ladder.Session, error) {
	if err := s.read(ctx); err != nil {
		return ladder.Session{}, err
	}
	return s.next.GetSession(ctx, idHash)
}

// RevokeSession implements ladder.Store.
func (s *Store) RevokeSession(ctx context.Context, idHash []byte, at time.Time, a ladder.AuditEntry) error {
	if err := s.write(ctx); err != nil {
		return err
	}
	return s.next.RevokeSession(ctx, idHash, at, a)
}

// DeleteExpiredSessions implements ladder.Store.
func (s *Store) DeleteExpiredSessions(ctx context.Context, before time.Time) (int, error) {
	if err := s.write(ctx); err != nil {
		return 0, err
	}
	return s.next.DeleteExpiredSessions(ctx, before)
}

// ImportRecords implements ladder.Store.
func (s *Store) ImportRecords(ctx context.Context, fn func(tx ladder.ImportTx) error) error {
	if err := s.write(ctx); err != nil {
		return err
	}
	return s.next.ImportRecords(ctx, fn)
}

// IntegrateTx implements ladder.Store.
func (s *Store) IntegrateTx(ctx context.Context, ws string, fn func(ladder.TlogTx) error) error {
	if err := s.write(ctx); err != nil {
		return err
	}
	return s.next.IntegrateTx(ctx, ws, fn)
}

// TlogHead implements ladder.Store.
func (s *Store) TlogHead(ctx context.Context, ws string) (int64, int64, error) {
	if err := s.read(ctx); err != nil {
		return 0, 0, err
	}
	return s.next.TlogHead(ctx, ws)
}

// TlogPending implements ladder.Store.
func (s *Store) TlogPending(ctx context.Context, ws string, from int64, limit int) ([]ladder.AuditRecord, error) {
	if err := s.read(ctx); err != nil {
		return nil, err
	}
	return s.next.TlogPending(ctx, ws, from, limit)
}

// TlogFed implements ladder.Store: the wrapped store's leaves, which are
// in memory, so no fault applies to them.
func (s *Store) TlogFed(ws string, from int64, limit int) []ladder.FedLeaf {
	return s.next.TlogFed(ws, from, limit)
}

// TlogHashes implements ladder.Store.
func (s *Store) TlogHashes(ctx context.Context, ws string, indexes []int64) ([][32]byte, error) {
	if err := s.read(ctx); err != nil {
		return nil, err
	}
	return s.next.TlogHashes(ctx, ws, indexes)
}

// TlogLeafOf implements ladder.Store.
func (s *Store) TlogLeafOf(ctx context.Context, ws string, seq int64) (int64, error) {
	if err := s.read(ctx); err != nil {
		return 0, err
	}
	return s.next.TlogLeafOf(ctx, ws, seq)
}

// TlogWorkspaces implements ladder.Store.
func (s *Store) TlogWorkspaces(ctx context.Context, pending bool) ([]string, error) {
	if err := s.read(ctx); err != nil {
		return nil, err
	}
	return s.next.TlogWorkspaces(ctx, pending)
}

// TlogMeta implements ladder.Store.
func (s *Store) TlogMeta(ctx context.Context) (ladder.TlogMeta, error) {
	if err := s.read(ctx); err != nil {
		return ladder.TlogMeta{}, err
	}
	return s.next.TlogMeta(ctx)
}

// TlogAdopt implements ladder.Store.
func (s *Store) TlogAdopt(ctx context.Context) (bool, error) {
	if err := s.write(ctx); err != nil {
		return false, err
	}
	return s.next.TlogAdopt(ctx)
}

// TlogUnadopt implements ladder.Store.
func (s *Store) TlogUnadopt(ctx context.Context) error {
	if err := s.write(ctx); err != nil {
		return err
	}
	return s.next.TlogUnadopt(ctx)
}

// SaveCheckpoint implements ladder.Store.
func (s *Store) SaveCheckpoint(ctx context.Context, c ladder.TlogCheckpoint) (ladder.TlogCheckpoint, error) {
	if err := s.write(ctx); err != nil {
		return ladder.TlogCheckpoint{}, err
	}
	return s.next.SaveCheckpoint(ctx, c)
}

// LatestCheckpoint implements ladder.Store.
func (s *Store) LatestCheckpoint(ctx context.Context, ws string) (ladder.TlogCheckpoint, error) {
	if err := s.read(ctx); err != nil {
		return ladder.TlogCheckpoint{}, err
	}
	return s.next.LatestCheckpoint(ctx, ws)
}

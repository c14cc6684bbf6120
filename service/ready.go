package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ladderhq/ladder"
)

// Readiness timing (DESIGN.md §8: /readyz reports the write path).
const (
	// readyTimeout bounds one readiness answer, the wait for a probe
	// another caller started included, so a store that hangs reads as not
	// ready instead of hanging the balancer's health check.
	readyTimeout = 2 * time.Second
	// okFresh is how long a durable write that succeeded answers for the
	// write path: within it Ready probes nothing, so /readyz polled however
	// often costs at most about one probe write a second.
	okFresh = time.Second
	// failHold is how long a write a caller saw fail with the store
	// unavailable keeps Ready answering not ready without probing. The
	// probe can succeed where callers' writes cannot (a one-row update fits
	// where a new route does not, a table's privilege was revoked), and a
	// replica should not flap back into rotation every second while its
	// callers are refused. A failed probe holds nothing: the next Ready
	// probes again (one at a time), so recovery is seen at once.
	failHold = 3 * time.Second
	// okGrain is how stale the last success's time may get before a write
	// stores it again: the hot path mostly only loads it.
	okGrain = 50 * time.Millisecond
)

// monoStart anchors mono: durations since it are monotonic.
var monoStart = time.Now()

// mono returns monotonic nanoseconds since monoStart, never 0 (0 means
// "never" in writePath).
func mono() int64 { return int64(time.Since(monoStart)) + 1 }

// writePath remembers how the store's durable writes have been going, for
// Ready. Every write the service makes reports to it (see observedStore):
// a success costs a time read and, at most every okGrain, an atomic store;
// only failures allocate.
type writePath struct {
	log  *slog.Logger
	okAt atomic.Int64 // mono time of the last durable write that succeeded
	// fail is the failure since the last success, nil while writes work.
	fail atomic.Pointer[writeFailure]
	// probing holds a token while a probe runs: one probe at a time.
	probing chan struct{}
	// since is the wall time (Unix ns) writes began failing, for the
	// audit.unavailable event; recovered, when set, is told of the outage
	// once writes work again.
	since     atomic.Int64
	recovered func(since time.Time)
}

type writeFailure struct {
	at   int64         // mono time
	hold time.Duration // how long it answers for the write path
	err  error
}

func newWritePath(log *slog.Logger) *writePath {
	return &writePath{log: log, probing: make(chan struct{}, 1)}
}

// note records a write's outcome: nil is a durable write, ErrUnavailable a
// write the store could not make. Other errors (a conflict, a lane that
// changed) are answers from a working store and say nothing either way.
func (p *writePath) note(err error) {
	switch {
	case err == nil:
		p.succeeded()
	case errors.Is(err, ladder.ErrUnavailable):
		p.failed(err, failHold)
	}
}

// succeeded records a durable write, which clears any failure.
func (p *writePath) succeeded() {
	p.markOK()
	if f := p.fail.Load(); f != nil {
		p.clear(f)
	}
}

// probed records a probe that wrote. It clears only the failure seen
// before the probe began (if any): a caller's write that failed meanwhile
// is newer evidence than the probe's.
func (p *writePath) probed(seen *writeFailure) {
	p.markOK()
	if seen != nil {
		p.clear(seen)
	}
}

func (p *writePath) markOK() {
	if now := mono(); now-p.okAt.Load() >= int64(okGrain) {
		p.okAt.Store(now)
	}
}

func (p *writePath) clear(f *writeFailure) {
	if p.fail.CompareAndSwap(f, nil) {
		p.log.Info("durable writes succeed again; /readyz answers ready")
		if p.recovered != nil {
			go p.recovered(time.Unix(0, p.since.Load()))
		}
	}
}

// failed records a write that could not be made, answering for hold.
func (p *writePath) failed(err error, hold time.Duration) {
	if p.fail.Swap(&writeFailure{at: mono(), hold: hold, err: err}) == nil {
		p.since.Store(time.Now().UnixNano())
		p.log.Error("durable writes are failing; /readyz answers not ready until one succeeds", "err", err)
	}
}

// known answers for the write path from what writes did recently, when
// that is fresh enough; ok is false when a probe must decide.
func (p *writePath) known() (err error, ok bool) {
	now := mono()
	if f := p.fail.Load(); f != nil {
		if now-f.at < int64(f.hold) {
			return notReady(f.err), true
		}
		return nil, false
	}
	if t := p.okAt.Load(); t != 0 && now-t < int64(okFresh) {
		return nil, true
	}
	return nil, false
}

// Ready reports whether durable writes work, for /readyz: nil, or a
// *ladder.Error whose Message and Hint say why not in words safe to show
// anyone (the cause itself goes to the log). It answers from the outcome
// of the service's recent writes when that is fresh, and otherwise probes
// with the store's Ping, a real durable write, one probe at a time. It
// answers within readyTimeout whatever the store does.
func (s *Service) Ready(ctx context.Context) error {
	p := s.writes
	if err, ok := p.known(); ok {
		return err
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	select {
	case p.probing <- struct{}{}:
	case <-ctx.Done():
		// Another caller's probe has not answered within our deadline.
		return notReady(fmt.Errorf("readiness probe: %w", errors.Join(ctx.Err(), ladder.ErrUnavailable)))
	}
	if err, ok := p.known(); ok { // the probe we waited for answered for us too
		<-p.probing
		return err
	}
	done := make(chan error, 1)
	go p.probe(context.WithoutCancel(ctx), s.store, done)
	select {
	case err := <-done:
		if err != nil {
			return notReady(err)
		}
		return nil
	case <-ctx.Done():
		err := fmt.Errorf("readiness probe: %w", errors.Join(ctx.Err(), ladder.ErrUnavailable))
		if parent.Err() == nil { // our deadline, not a caller that went away
			p.failed(err, 0)
		}
		return notReady(err)
	}
}

// probe runs one Ping, records its outcome, sends it on done and gives
// back the probing token. It runs apart from Ready's caller because a
// store's Ping can outlast any deadline: group commit answers an op only
// when its batch ends, and a batch stuck on a lock holds every op queued
// behind it. Keeping the token until Ping returns keeps that to one probe.
func (p *writePath) probe(ctx context.Context, store ladder.Store, done chan<- error) {
	defer func() { <-p.probing }()
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	seen := p.fail.Load()
	err := store.Ping(ctx)
	if err != nil {
		p.failed(err, 0)
	} else {
		p.probed(seen)
	}
	done <- err
}

// notReady is Ready's answer while durable writes fail.
func notReady(err error) *ladder.Error {
	return &ladder.Error{Code: ladder.CodeAuditUnavailable, Message: "Durable writes are failing: " + writeCause(err) + ".",
		Hint: "calls are refused with AUDIT_UNAVAILABLE until a write succeeds", Err: err}
}

// writeCause names why writes fail in a few fixed words: /readyz is public,
// and a driver's error may name hosts, users or paths. The patterns are
// what SQLite, PostgreSQL and pgx say; anything else is named generally.
func writeCause(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return "writes do not finish in time"
	}
	msg := strings.ToLower(err.Error())
	has := func(subs ...string) bool {
		for _, sub := range subs {
			if strings.Contains(msg, sub) {
				return true
			}
		}
		return false
	}
	switch {
	case has("disk is full", "no space left", "disk full", "disk_full"):
		return "the disk is full"
	case has("readonly", "read-only", "read only"):
		return "the database is read-only"
	case has("permission denied", "insufficient privilege"):
		return "the database refuses ladder's writes (permission denied)"
	case has("store closed"):
		return "the store is closed"
	case has("connect", "conn closed", "eof", "shutting down", "terminating connection"):
		return "the database cannot be reached"
	}
	return "the store cannot write"
}

// observedStore is the service's store: every write reports its outcome
// to the write path, and so does a failing GetKey. Other reads, and writes
// added to ladder.Store later, pass through untouched.
type observedStore struct {
	ladder.Store
	w *writePath
}

// GetKey implements ladder.Store. Every authenticated call reads its key
// first, so a database that went away is seen on the first call, before
// any write is tried; a read that works says nothing of writes.
func (o *observedStore) GetKey(ctx context.Context, id string) (ladder.Key, error) {
	k, err := o.Store.GetKey(ctx, id)
	if err != nil && errors.Is(err, ladder.ErrUnavailable) {
		o.w.failed(err, failHold)
	}
	return k, err
}

// CreateKey implements ladder.Store.
func (o *observedStore) CreateKey(ctx context.Context, k ladder.Key, a ladder.AuditEntry) error {
	err := o.Store.CreateKey(ctx, k, a)
	o.w.note(err)
	return err
}

// RevokeKey implements ladder.Store.
func (o *observedStore) RevokeKey(ctx context.Context, id string, at time.Time, a ladder.AuditEntry) error {
	err := o.Store.RevokeKey(ctx, id, at, a)
	o.w.note(err)
	return err
}

// AppendAudit implements ladder.Store.
func (o *observedStore) AppendAudit(ctx context.Context, e ...ladder.AuditEntry) ([]ladder.AuditRecord, error) {
	recs, err := o.Store.AppendAudit(ctx, e...)
	o.w.note(err)
	return recs, err
}

// EnsureSteps implements ladder.Store.
func (o *observedStore) EnsureSteps(ctx context.Context, st []ladder.StepState) error {
	err := o.Store.EnsureSteps(ctx, st)
	o.w.note(err)
	return err
}

// RecordRoute implements ladder.Store.
func (o *observedStore) RecordRoute(ctx context.Context, r ladder.Route, a ladder.AuditEntry) (ladder.Route, bool, error) {
	got, created, err := o.Store.RecordRoute(ctx, r, a)
	o.w.note(err)
	return got, created, err
}

// RecordReview implements ladder.Store.
func (o *observedStore) RecordReview(ctx context.Context, w ladder.ReviewWrite) (ladder.StepState, *ladder.LaneChange, error) {
	st, ch, err := o.Store.RecordReview(ctx, w)
	o.w.note(err)
	return st, ch, err
}

// SetLane implements ladder.Store.
func (o *observedStore) SetLane(ctx context.Context, w ladder.LaneWrite) (ladder.StepState, error) {
	st, err := o.Store.SetLane(ctx, w)
	o.w.note(err)
	return st, err
}

// RecordOutcome implements ladder.Store.
func (o *observedStore) RecordOutcome(ctx context.Context, out ladder.Outcome, a ladder.AuditEntry) error {
	err := o.Store.RecordOutcome(ctx, out, a)
	o.w.note(err)
	return err
}

// ImportRecords implements ladder.Store.
func (o *observedStore) ImportRecords(ctx context.Context, fn func(tx ladder.ImportTx) error) error {
	err := o.Store.ImportRecords(ctx, fn)
	o.w.note(err)
	return err
}

// RecordGateDecision implements ladder.Store.
func (o *observedStore) RecordGateDecision(ctx context.Context, d ladder.GateDecisionRecord, a ladder.AuditEntry) (ladder.GateDecisionRecord, error) {
	got, err := o.Store.RecordGateDecision(ctx, d, a)
	o.w.note(err)
	return got, err
}

// CreateApproval implements ladder.Store.
func (o *observedStore) CreateApproval(ctx context.Context, a ladder.Approval, e ladder.AuditEntry) (ladder.Approval, bool, error) {
	got, created, err := o.Store.CreateApproval(ctx, a, e)
	o.w.note(err)
	return got, created, err
}

// UpdateApproval implements ladder.Store.
func (o *observedStore) UpdateApproval(ctx context.Context, a ladder.Approval, from ladder.ApprovalStatus, e []ladder.AuditEntry) (ladder.Approval, error) {
	got, err := o.Store.UpdateApproval(ctx, a, from, e)
	o.w.note(err)
	return got, err
}

// BeginCall implements ladder.Store.
func (o *observedStore) BeginCall(ctx context.Context, c ladder.Call, a ladder.AuditEntry) (ladder.Call, bool, error) {
	got, created, err := o.Store.BeginCall(ctx, c, a)
	o.w.note(err)
	return got, created, err
}

// RouteAndBeginCall implements ladder.Store.
func (o *observedStore) RouteAndBeginCall(ctx context.Context, r ladder.Route, ra ladder.AuditEntry, c ladder.Call, ca ladder.AuditEntry) (ladder.RouteCall, error) {
	got, err := o.Store.RouteAndBeginCall(ctx, r, ra, c, ca)
	o.w.note(err)
	return got, err
}

// CreateSession implements ladder.Store.
func (o *observedStore) CreateSession(ctx context.Context, se ladder.Session, a ladder.AuditEntry) error {
	err := o.Store.CreateSession(ctx, se, a)
	o.w.note(err)
	return err
}

// RevokeSession implements ladder.Store.
func (o *observedStore) RevokeSession(ctx context.Context, idHash []byte, at time.Time, a ladder.AuditEntry) error {
	err := o.Store.RevokeSession(ctx, idHash, at, a)
	o.w.note(err)
	return err
}

// FinishCall implements ladder.Store.
func (o *observedStore) FinishCall(ctx context.Context, c ladder.Call, a ladder.AuditEntry) (ladder.Call, error) {
	got, err := o.Store.FinishCall(ctx, c, a)
	o.w.note(err)
	return got, err
}

// UpdateCall implements ladder.Store.
func (o *observedStore) UpdateCall(ctx context.Context, c ladder.Call, from ladder.CallStatus, a ladder.AuditEntry) (ladder.Call, error) {
	got, err := o.Store.UpdateCall(ctx, c, from, a)
	o.w.note(err)
	return got, err
}

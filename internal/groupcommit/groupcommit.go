// Package groupcommit batches concurrent writes into one transaction.
//
// Durable writes are bounded by fsync, not by the work each write does: a
// database that syncs once per transaction can only commit a few hundred
// transactions a second, however small they are. A Batcher lets many callers
// share one sync. Callers hand it an Op; a single writer goroutine takes every
// op waiting (up to Options.MaxBatch), runs them in one transaction through
// the backend's run function, and answers each caller only after the commit.
// While one batch syncs, the next one queues up, so the batch size grows with
// the load by itself. Options.Linger adds a short, guarded wait for more ops
// where a load keeps batches small (see there); a lone caller never waits
// on a timer.
//
// The package knows nothing about SQL: the backend (sqlite, postgres) begins
// the transaction, runs each op inside a savepoint so that one failing op
// does not sink the others (see Savepoints), and commits. If the commit
// fails, every op of the batch fails with that error: none of them was
// acknowledged, so none may be relied upon.
package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ladderhq/ladder/internal/tracing"
)

// ErrClosed is returned by Do once Close has been called.
var ErrClosed = errors.New("group commit: closed")

// Op is one unit of work run inside a batch's transaction. It must do all
// its work through tx and return an error to have its effects rolled back.
// An op's results (ids, rows read) may be captured by the closure, but the
// caller may rely on them only when Do returns nil: a failed commit undoes
// an op that itself succeeded.
type Op[T any] func(tx T) error

// RunFunc runs a batch of ops in one transaction and returns one error per
// op (nil for an op that committed). When the transaction cannot begin or
// commit it returns that error for every op.
type RunFunc[T any] func(ctx context.Context, ops []Op[T]) []error

// Options configure a Batcher.
type Options struct {
	// MaxBatch caps how many ops share one transaction, which bounds how
	// long one transaction holds the write lock. Zero means 256.
	MaxBatch int
	// QueueSize is how many ops may wait for the writer before Do blocks
	// (back-pressure). Zero means 4 × MaxBatch.
	QueueSize int
	// Linger lets the writer wait up to this long for more ops before it
	// runs a small batch, as PostgreSQL's commit_delay does. A commit
	// writes every page its ops dirtied and syncs once, and a load whose
	// callers spend most of their time elsewhere (a proxied call waits on
	// its upstream between its two writes) arrives a few ops at a time:
	// each op then pays for most of a commit alone. The wait is guarded
	// as commit_siblings guards commit_delay: the writer lingers only
	// after a batch of more than one op (other callers are in flight), and
	// only until the batch is one op larger than the last one or holds
	// LingerBatch ops, so a lone caller never waits and the batch grows
	// only as far as ops keep arriving; a linger the timer ends makes the
	// writer commit the next batches at once, 2, 4 … 64 of them as such
	// lingers repeat, so a steady load of a few callers, all in the batch
	// already, does not wait on every commit. Zero never lingers.
	Linger time.Duration
	// LingerBatch is the batch size at which the writer stops lingering.
	// Zero means 16.
	LingerBatch int
	// Expect, when set, says how many writes the backend knows are still
	// to come: the SQLite store's calls running, each of which writes its
	// result when its upstream answers. While it reports LingerBatch or
	// more, the writer lingers until the batch holds that many ops (at
	// most MaxBatch) or ExpectLinger has passed, and a linger the timer
	// ends does not back off: so many callers arrive at random, not all
	// at once (64 clients of proxied calls made 5 writes a commit, and the
	// back-off left 2% of commits lingering; BENCHMARKS.md, issue 22,
	// session 33), and a batch that stopped at LingerBatch, or at one more
	// than the last, left most of them to a commit of their own (7–9
	// writes a commit; 12–14 waiting for them all; session 34). Below that
	// it is the few steady callers the back-off is for, and a longer wait
	// costs them throughput.
	Expect func() int
	// ExpectLinger is the linger while Expect reports LingerBatch or
	// more writes to come, for a batch of ops passed to DoPatient. A batch
	// holding an op passed to Do waits no longer than Linger from the
	// start of the wait, as it would with nothing expected: the long wait
	// is for the expected writes and their kin, whose callers wait on
	// something slower anyway, not for every write that shares their
	// writer. Zero means Linger.
	ExpectLinger time.Duration
}

// Stats counts what a Batcher did, for metrics and tests.
type Stats struct {
	Batches int64 // transactions run
	Ops     int64 // ops run in them
	Lingers int64 // waits for more ops (Options.Linger)
	Expired int64 // of them, those the timer ended
	Grown   int64 // of them, those ended by ops arriving (or the queue closing)
}

// Batcher is a group-commit queue with one writer goroutine. Its methods
// are safe for concurrent use.
type Batcher[T any] struct {
	run          RunFunc[T]
	maxBatch     int
	linger       time.Duration
	lingerBatch  int
	expect       func() int
	expectLinger time.Duration
	reqs         chan *request[T]

	// mu guards closed and the send on reqs, so Close cannot close the
	// channel while a Do is sending on it.
	mu     sync.RWMutex
	closed bool
	done   chan struct{}

	batches atomic.Int64
	ops     atomic.Int64
	lingers atomic.Int64
	expired atomic.Int64
	grown   atomic.Int64
}

type request[T any] struct {
	ctx  context.Context
	op   Op[T]
	done chan error
	// patient says the op came through DoPatient, so its batch may wait
	// the whole ExpectLinger.
	patient bool
	// batch is how many ops shared the transaction, written before done
	// is sent (for the caller's span).
	batch int
}

// New starts a Batcher whose writer goroutine runs batches with run. Call
// Close to stop it.
func New[T any](run RunFunc[T], opts Options) *Batcher[T] {
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 256
	}
	if opts.QueueSize <= 0 {
		opts.QueueSize = 4 * opts.MaxBatch
	}
	if opts.LingerBatch <= 0 {
		opts.LingerBatch = 16
	}
	b := &Batcher[T]{
		run:          run,
		maxBatch:     opts.MaxBatch,
		linger:       opts.Linger,
		expect:       opts.Expect,
		expectLinger: opts.ExpectLinger,
		lingerBatch:  min(opts.LingerBatch, opts.MaxBatch),
		reqs:         make(chan *request[T], opts.QueueSize),
		done:         make(chan struct{}),
	}
	go b.loop()
	return b
}

// Do enqueues op and waits until the batch holding it has committed (nil) or
// failed (the op's error, or the transaction's).
//
// If ctx ends before the writer takes the op, the op is skipped and Do
// returns ctx.Err(). Once the op is in a running batch Do waits for the
// commit regardless of ctx, so that a nil error always means durable and a
// non-nil error from a started batch reflects what really happened.
func (b *Batcher[T]) Do(ctx context.Context, op Op[T]) error {
	return b.do(ctx, op, false)
}

// DoPatient is Do for an op whose caller can wait for company the whole
// ExpectLinger: one of the writes Options.Expect counts, or one that
// starts such a write (a proxied call's begin and result, whose caller
// waits on its upstream as well). A batch of such ops alone may linger the
// whole ExpectLinger; one op passed to Do cuts it to Linger.
func (b *Batcher[T]) DoPatient(ctx context.Context, op Op[T]) error {
	return b.do(ctx, op, true)
}

func (b *Batcher[T]) do(ctx context.Context, op Op[T], patient bool) (err error) {
	if err := ctx.Err(); err != nil {
		return err
	}
	// The wait for the shared commit is a span of the caller's trace, when
	// the caller's span records: queueing plus the batch's transaction.
	_, sp := tracing.Child(ctx, tracing.SpanGroupCommit)
	req := &request[T]{ctx: ctx, op: op, done: make(chan error, 1), patient: patient}
	if sp.Recording() {
		defer func() {
			sp.Set(tracing.BatchSize.Int(req.batch))
			sp.End(err)
		}()
	}
	b.mu.RLock()
	if b.closed {
		b.mu.RUnlock()
		return ErrClosed
	}
	select {
	case b.reqs <- req:
	case <-ctx.Done():
		b.mu.RUnlock()
		return ctx.Err()
	}
	b.mu.RUnlock()
	return <-req.done
}

// Close stops accepting ops, runs every op already queued, and returns when
// the writer goroutine has stopped. It is safe to call more than once.
func (b *Batcher[T]) Close() error {
	b.mu.Lock()
	if !b.closed {
		b.closed = true
		close(b.reqs)
	}
	b.mu.Unlock()
	<-b.done
	return nil
}

// Stats returns how many batches and ops the Batcher has run so far.
func (b *Batcher[T]) Stats() Stats {
	return Stats{Batches: b.batches.Load(), Ops: b.ops.Load(), Lingers: b.lingers.Load(), Expired: b.expired.Load(), Grown: b.grown.Load()}
}

// Queued returns how many ops wait in the queue for the writer to take
// them: a caller that holds the writer with an op of its own can know when
// the ops it sent meanwhile will share the next batch.
func (b *Batcher[T]) Queued() int {
	return len(b.reqs)
}

// loop is the writer goroutine: block for one op, take whatever else is
// already waiting, linger for more when Options.Linger allows it, and run
// it all as one batch.
func (b *Batcher[T]) loop() {
	defer close(b.done)
	batch := make([]*request[T], 0, b.maxBatch)
	var timer *time.Timer
	last := 0 // the previous batch's size
	// A linger the timer ended found no op to grow the batch by: when
	// every caller of a steady load is in the batch already (a few clients
	// that each write and wait), the op it waits for cannot come, and each
	// commit would wait the whole linger. So after idle such lingers in a
	// row the writer commits the next 2^idle batches at once (up to 64)
	// before it lingers again.
	idle, skip := 0, 0
	for {
		req, ok := <-b.reqs
		if !ok {
			return
		}
		batch = append(batch[:0], req)
		open := b.take(&batch)
		// Many writes known to be coming: wait longer, for all of them,
		// and never take a timer's end for a sign that nobody is.
		coming := 0
		if b.expect != nil {
			coming = b.expect()
		}
		expecting := coming >= b.lingerBatch
		want := min(last+1, b.lingerBatch)
		if expecting {
			want = min(coming, b.maxBatch)
		}
		if open && b.linger > 0 && last > 1 && len(batch) < want {
			if skip > 0 && !expecting {
				skip--
			} else {
				d := b.linger
				// Only a batch of patient ops waits longer than Linger;
				// lingerFor cuts the wait when an impatient op joins.
				long := expecting && b.expectLinger > d && allPatient(batch)
				if long {
					d = b.expectLinger
				}
				if timer == nil {
					timer = time.NewTimer(d)
				} else {
					timer.Reset(d)
				}
				b.lingers.Add(1)
				if b.lingerFor(&batch, want, timer, long) {
					b.grown.Add(1)
					idle = 0
				} else {
					b.expired.Add(1)
					if !expecting {
						idle = min(idle+1, maxIdle)
						skip = 1 << idle
					}
				}
				timer.Stop()
				b.take(&batch)
			}
		}
		last = len(batch)
		b.runBatch(batch)
	}
}

// maxIdle caps the linger's back-off at 2^6 = 64 batches.
const maxIdle = 6

// take appends the ops already waiting to batch, up to MaxBatch, without
// blocking. It reports false once the queue is closed.
func (b *Batcher[T]) take(batch *[]*request[T]) (open bool) {
	for len(*batch) < b.maxBatch {
		select {
		case r, ok := <-b.reqs:
			if !ok {
				return false // closed: run this batch; the next receive ends the loop
			}
			*batch = append(*batch, r)
		default:
			return true
		}
	}
	return true
}

// lingerFor waits for ops until batch holds want of them, the timer fires
// or the queue closes; it reports false when the timer ended it. long says
// the timer was set to ExpectLinger for a batch of patient ops: an op that
// is not patient joining it brings the end forward to Linger after the
// wait began, or ends the wait at once if that has passed.
func (b *Batcher[T]) lingerFor(batch *[]*request[T], want int, timer *time.Timer, long bool) bool {
	var start time.Time
	if long {
		start = time.Now()
	}
	for len(*batch) < want {
		select {
		case r, ok := <-b.reqs:
			if !ok {
				return true
			}
			*batch = append(*batch, r)
			if long && !r.patient {
				long = false
				left := b.linger - time.Since(start)
				if left <= 0 {
					return false
				}
				// Since Go 1.23 a Reset timer never delivers the old
				// deadline's value.
				timer.Reset(left)
			}
		case <-timer.C:
			return false
		}
	}
	return true
}

// allPatient reports whether every op of batch came through DoPatient.
func allPatient[T any](batch []*request[T]) bool {
	for _, r := range batch {
		if !r.patient {
			return false
		}
	}
	return true
}

func (b *Batcher[T]) runBatch(batch []*request[T]) {
	// Skip ops whose callers gave up before the batch started: nobody
	// would learn of their outcome.
	live := batch[:0:0]
	ops := make([]Op[T], 0, len(batch))
	ctxs := make([]context.Context, 0, len(batch))
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.done <- err
			continue
		}
		live = append(live, r)
		ops = append(ops, r.op)
		ctxs = append(ctxs, r.ctx)
	}
	if len(ops) == 0 {
		return
	}
	// The batch runs under its own context: one caller cancelling must not
	// abort a transaction other callers share.
	errs := b.run(context.WithValue(context.Background(), opContextsKey{}, ctxs), ops)
	b.batches.Add(1)
	b.ops.Add(int64(len(ops)))
	if len(errs) != len(ops) {
		err := fmt.Errorf("group commit: run returned %d results for %d ops", len(errs), len(ops))
		for _, r := range live {
			r.done <- err
		}
		return
	}
	for i, r := range live {
		r.batch = len(ops)
		r.done <- errs[i]
	}
}

type opContextsKey struct{}

// OpContexts returns, inside a run function, the contexts its ops' callers
// passed to Do, in the order of the ops; nil elsewhere. They are for the
// values the callers' contexts carry (what an op is about, which a run
// function may read for all its ops before it runs the first), not for
// cancellation: a batch does not end with one of its callers (see Do).
func OpContexts(ctx context.Context) []context.Context {
	ctxs, _ := ctx.Value(opContextsKey{}).([]context.Context)
	return ctxs
}

// Fail returns n copies of err: the answer of a run function whose
// transaction could not begin or commit.
func Fail(n int, err error) []error {
	errs := make([]error, n)
	for i := range errs {
		errs[i] = err
	}
	return errs
}

// Savepoints runs ops one after another inside an open transaction, each in
// its own savepoint, so a failing op is rolled back alone and the rest of
// the batch still commits. exec runs one SQL statement in the transaction.
//
// It returns each op's error. A non-nil fatal error means the transaction
// itself is broken (a savepoint could not be set, released or rolled back,
// as when the database is full and SQLite has rolled everything back): the
// caller must roll back and fail the whole batch with it.
func Savepoints[T any](tx T, ops []Op[T], exec func(stmt string) error) (errs []error, fatal error) {
	errs = make([]error, len(ops))
	for i, op := range ops {
		if err := exec("SAVEPOINT gc_op"); err != nil {
			return nil, fmt.Errorf("savepoint: %w", err)
		}
		if err := op(tx); err != nil {
			errs[i] = err
			// ROLLBACK TO keeps the savepoint on the stack; RELEASE pops it.
			if rerr := exec("ROLLBACK TO SAVEPOINT gc_op"); rerr != nil {
				// Keep both causes: the op's error usually says why
				// (disk full), the rollback's that the transaction is gone.
				return nil, fmt.Errorf("%w (rollback to savepoint: %w)", err, rerr)
			}
		}
		if err := exec("RELEASE SAVEPOINT gc_op"); err != nil {
			return nil, fmt.Errorf("release savepoint: %w", err)
		}
	}
	return errs, nil
}

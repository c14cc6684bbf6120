package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fakeTx is a transaction of the fake backend: a list of writes with
// savepoint semantics, so tests can see what committed.
type fakeTx struct {
	writes []string
	marks  []int
}

func (tx *fakeTx) exec(stmt string) error {
	switch {
	case strings.HasPrefix(stmt, "SAVEPOINT"):
		tx.marks = append(tx.marks, len(tx.writes))
	case strings.HasPrefix(stmt, "ROLLBACK TO"):
		tx.writes = tx.writes[:tx.marks[len(tx.marks)-1]]
	case strings.HasPrefix(stmt, "RELEASE"):
		tx.marks = tx.marks[:len(tx.marks)-1]
	default:
		return fmt.Errorf("fake: unknown statement %q", stmt)
	}
	return nil
}

// fakeDB is the backend: committed writes, the size of every transaction,
// and a simulated fsync delay.
type fakeDB struct {
	mu        sync.Mutex
	committed []string
	txSizes   []int
	syncDelay time.Duration // simulated fsync
}

func (db *fakeDB) run(ctx context.Context, ops []Op[*fakeTx]) []error {
	tx := &fakeTx{}
	errs, fatal := Savepoints(tx, ops, tx.exec)
	if fatal != nil {
		return Fail(len(ops), fatal)
	}
	time.Sleep(db.syncDelay)
	db.mu.Lock()
	defer db.mu.Unlock()
	db.txSizes = append(db.txSizes, len(ops))
	db.committed = append(db.committed, tx.writes...)
	return errs
}

func (db *fakeDB) snapshot() (committed []string, txSizes []int) {
	db.mu.Lock()
	defer db.mu.Unlock()
	return append([]string(nil), db.committed...), append([]int(nil), db.txSizes...)
}

func write(s string) Op[*fakeTx] {
	return func(tx *fakeTx) error { tx.writes = append(tx.writes, s); return nil }
}

// blockWriter runs an op that holds the writer goroutine until the returned
// function is called, so a test can queue ops deterministically behind it.
func blockWriter(t *testing.T, b *Batcher[*fakeTx]) (release func()) {
	t.Helper()
	started, unblock := make(chan struct{}), make(chan struct{})
	go func() {
		_ = b.Do(context.Background(), func(tx *fakeTx) error {
			close(started)
			<-unblock
			return nil
		})
	}()
	<-started
	return func() { close(unblock) }
}

// waitQueued waits until n ops wait in b's queue.
func waitQueued(t *testing.T, b *Batcher[*fakeTx], n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for b.Queued() < n {
		if time.Now().After(deadline) {
			t.Fatalf("queue holds %d ops, want %d", b.Queued(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestDoCommits(t *testing.T) {
	db := &fakeDB{}
	b := New(db.run, Options{})
	defer b.Close()
	if err := b.Do(context.Background(), write("a")); err != nil {
		t.Fatalf("Do: %v", err)
	}
	committed, _ := db.snapshot()
	if diff := cmp.Diff([]string{"a"}, committed); diff != "" {
		t.Errorf("committed (-want +got):\n%s", diff)
	}
}

func TestConcurrentCallersShareTransactions(t *testing.T) {
	db := &fakeDB{syncDelay: 2 * time.Millisecond}
	b := New(db.run, Options{MaxBatch: 16})
	defer b.Close()

	const callers = 200
	var wg sync.WaitGroup
	errs := make([]error, callers)
	for i := range callers {
		wg.Go(func() { errs[i] = b.Do(context.Background(), write(fmt.Sprint(i))) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("caller %d: %v", i, err)
		}
	}
	committed, sizes := db.snapshot()
	if len(committed) != callers {
		t.Errorf("committed %d writes, want %d", len(committed), callers)
	}
	if len(sizes) >= callers {
		t.Errorf("ran %d transactions for %d ops; want fewer (batching)", len(sizes), callers)
	}
	for _, n := range sizes {
		if n > 16 {
			t.Errorf("a transaction held %d ops, over MaxBatch 16", n)
		}
	}
	if got := b.Stats(); got.Ops != callers || got.Batches != int64(len(sizes)) {
		t.Errorf("Stats = %+v, want %d ops in %d batches", got, callers, len(sizes))
	}
	t.Logf("%d ops in %d transactions", callers, len(sizes))
}

func TestErrorsArePerOp(t *testing.T) {
	db := &fakeDB{}
	b := New(db.run, Options{})
	defer b.Close()

	release := blockWriter(t, b)
	boom := errors.New("boom")
	ops := []Op[*fakeTx]{
		write("a"),
		func(tx *fakeTx) error { tx.writes = append(tx.writes, "half-done"); return boom },
		write("c"),
	}
	errs := make([]error, len(ops))
	var wg sync.WaitGroup
	for i, op := range ops {
		wg.Go(func() { errs[i] = b.Do(context.Background(), op) })
		waitQueued(t, b, i+1) // keep the queue order a, fail, c
	}
	release()
	wg.Wait()

	if diff := cmp.Diff([]error{nil, boom, nil}, errs, cmp.Comparer(func(x, y error) bool { return errors.Is(x, y) })); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
	committed, sizes := db.snapshot()
	if diff := cmp.Diff([]string{"a", "c"}, committed); diff != "" {
		t.Errorf("committed (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{1, 3}, sizes); diff != "" {
		t.Errorf("transaction sizes (-want +got):\n%s", diff)
	}
}

func TestFailedCommitFailsWholeBatch(t *testing.T) {
	diskFull := errors.New("disk full")
	var calls int
	run := func(ctx context.Context, ops []Op[*fakeTx]) []error {
		calls++
		tx := &fakeTx{}
		if _, fatal := Savepoints(tx, ops, tx.exec); fatal != nil {
			return Fail(len(ops), fatal)
		}
		if calls == 2 {
			return Fail(len(ops), diskFull)
		}
		return make([]error, len(ops))
	}
	b := New(run, Options{})
	defer b.Close()

	release := blockWriter(t, b) // batch 1
	errs := make([]error, 5)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() { errs[i] = b.Do(context.Background(), write(fmt.Sprint(i))) })
	}
	waitQueued(t, b, len(errs))
	release() // batch 2 holds all five and fails to commit
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, diskFull) {
			t.Errorf("op %d: err = %v, want %v", i, err, diskFull)
		}
	}
}

func TestCloseDrains(t *testing.T) {
	db := &fakeDB{}
	b := New(db.run, Options{})
	release := blockWriter(t, b)
	errs := make([]error, 10)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() { errs[i] = b.Do(context.Background(), write(fmt.Sprint(i))) })
	}
	waitQueued(t, b, len(errs))
	closed := make(chan error)
	go func() { closed <- b.Close() }()
	release()
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("queued op %d: %v", i, err)
		}
	}
	if committed, _ := db.snapshot(); len(committed) != len(errs) {
		t.Errorf("committed %d queued writes, want %d", len(committed), len(errs))
	}
	if err := b.Do(context.Background(), write("late")); !errors.Is(err, ErrClosed) {
		t.Errorf("Do after Close: err = %v, want ErrClosed", err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestCancelledBeforeRunIsSkipped(t *testing.T) {
	db := &fakeDB{}
	b := New(db.run, Options{})
	defer b.Close()
	release := blockWriter(t, b)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- b.Do(ctx, write("skipped")) }()
	waitQueued(t, b, 1)
	cancel()
	release()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Do: err = %v, want context.Canceled", err)
	}
	if committed, _ := db.snapshot(); len(committed) != 0 {
		t.Errorf("committed %v; a cancelled op must not run", committed)
	}
}

// TestOpContexts: a run function sees each op's caller's context, in the
// order of its ops, without the callers that gave up before the batch.
func TestOpContexts(t *testing.T) {
	type name struct{}
	var got []string
	b := New(func(ctx context.Context, ops []Op[*fakeTx]) []error {
		got = got[:0]
		for _, c := range OpContexts(ctx) {
			n, _ := c.Value(name{}).(string)
			got = append(got, n)
		}
		if len(got) != len(ops) {
			t.Errorf("%d op contexts for %d ops", len(got), len(ops))
		}
		errs := make([]error, len(ops))
		for i, op := range ops {
			errs[i] = op(&fakeTx{})
		}
		return errs
	}, Options{})
	defer b.Close()
	release := blockWriter(t, b)
	gone, cancel := context.WithCancel(context.WithValue(t.Context(), name{}, "gone"))
	var wg sync.WaitGroup
	for i, n := range []string{"a", "gone", "b"} {
		ctx := context.WithValue(t.Context(), name{}, n)
		if n == "gone" {
			ctx = gone
		}
		wg.Go(func() { _ = b.Do(ctx, write(n)) })
		waitQueued(t, b, i+1)
	}
	cancel()
	release()
	wg.Wait()
	if !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("op contexts named %v, want [a b]", got)
	}
	if OpContexts(t.Context()) != nil {
		t.Error("OpContexts outside a batch is not nil")
	}
}

func TestSavepointsFatal(t *testing.T) {
	broken := errors.New("no transaction")
	boom := errors.New("boom")
	tx := &fakeTx{}
	exec := func(stmt string) error {
		if strings.HasPrefix(stmt, "ROLLBACK TO") {
			return broken
		}
		return tx.exec(stmt)
	}
	_, fatal := Savepoints(tx, []Op[*fakeTx]{func(*fakeTx) error { return boom }}, exec)
	if !errors.Is(fatal, boom) || !errors.Is(fatal, broken) {
		t.Errorf("fatal = %v, want it to wrap both the op's and the rollback's error", fatal)
	}
}

// twoBatch runs a batch of one (the blocker) and then a batch of two, so
// that the writer has seen other callers in flight: its next small batch
// may linger.
func twoBatch(t *testing.T, b *Batcher[*fakeTx]) {
	t.Helper()
	release := blockWriter(t, b)
	var wg sync.WaitGroup
	for _, s := range []string{"a", "b"} {
		wg.Go(func() {
			if err := b.Do(context.Background(), write(s)); err != nil {
				t.Errorf("Do(%s): %v", s, err)
			}
		})
	}
	waitQueued(t, b, 2)
	release()
	wg.Wait()
}

// doAsync runs Do in a goroutine and gives the writer a moment to take the
// op, so that the next op arrives while it lingers (what the tests assert
// does not depend on that moment: only the path taken does).
func doAsync(b *Batcher[*fakeTx], s string) <-chan error {
	return doAsyncWith(b.Do, s)
}

// doAsyncWith is doAsync through do (Do or DoPatient).
func doAsyncWith(do func(context.Context, Op[*fakeTx]) error, s string) <-chan error {
	done := make(chan error, 1)
	go func() { done <- do(context.Background(), write(s)) }()
	time.Sleep(10 * time.Millisecond)
	return done
}

func TestLingerGathersOneMoreThanLastBatch(t *testing.T) {
	db := &fakeDB{}
	// An hour: if the writer waited for the timer, the test would time out.
	b := New(db.run, Options{Linger: time.Hour})
	defer b.Close()
	twoBatch(t, b)
	// Three callers arriving one after another while the writer lingers:
	// it holds the first until the batch is one larger than the last (2).
	var dones []<-chan error
	for _, s := range []string{"c", "d", "e"} {
		dones = append(dones, doAsync(b, s))
	}
	for i, done := range dones {
		if err := within(t, done); err != nil {
			t.Errorf("op %d: %v", i, err)
		}
	}
	committed, sizes := db.snapshot()
	if diff := cmp.Diff([]int{1, 2, 3}, sizes); diff != "" {
		t.Errorf("transaction sizes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"a", "b", "c", "d", "e"}, sortedCopy(committed)); diff != "" {
		t.Errorf("committed (-want +got):\n%s", diff)
	}
	// One linger, ended by the batch growing (the timer is an hour).
	if st := b.Stats(); st.Lingers != 1 || st.Grown != 1 || st.Expired != 0 {
		t.Errorf("lingers %d, grown %d, expired %d; want 1, 1, 0", st.Lingers, st.Grown, st.Expired)
	}
}

// TestLingerWaitsForEveryExpectedWrite: while Expect reports LingerBatch
// or more writes to come, the writer holds the batch until it has that
// many (at most MaxBatch), not one more than the last batch: the results
// of that many running calls are coming, a few at a time.
func TestLingerWaitsForEveryExpectedWrite(t *testing.T) {
	for _, c := range []struct {
		name               string
		expected, maxBatch int
		want               int
	}{
		{"as many as expected", 6, 0, 6},
		{"at most MaxBatch", 100, 5, 5},
	} {
		t.Run(c.name, func(t *testing.T) {
			db := &fakeDB{}
			// An hour: if the writer waited for the timer, the test would
			// time out.
			b := New(db.run, Options{Linger: time.Hour, LingerBatch: 4, MaxBatch: c.maxBatch,
				Expect: func() int { return c.expected }})
			defer b.Close()
			twoBatch(t, b)
			var dones []<-chan error
			for i := range c.want {
				dones = append(dones, doAsync(b, fmt.Sprint(i)))
			}
			for i, done := range dones {
				if err := within(t, done); err != nil {
					t.Errorf("op %d: %v", i, err)
				}
			}
			if _, sizes := db.snapshot(); !cmp.Equal(sizes, []int{1, 2, c.want}) {
				t.Errorf("transaction sizes %v, want [1 2 %d]", sizes, c.want)
			}
		})
	}
}

// TestOnlyPatientOpsWaitTheExpectedLinger: while writes are expected, a
// batch of ops passed to DoPatient waits the whole ExpectLinger (an hour
// here), but a batch holding an op passed to Do waits no longer than
// Linger from the start of the wait, whether that op came first or joined
// the wait: a route beside many running calls is not held for their
// results.
func TestOnlyPatientOpsWaitTheExpectedLinger(t *testing.T) {
	const linger = 20 * time.Millisecond
	newBatcher := func() (*fakeDB, *Batcher[*fakeTx]) {
		db := &fakeDB{}
		b := New(db.run, Options{Linger: linger, ExpectLinger: time.Hour, LingerBatch: 4,
			Expect: func() int { return 10 }})
		twoBatch(t, b)
		return db, b
	}
	t.Run("an impatient op first", func(t *testing.T) {
		db, b := newBatcher()
		defer b.Close()
		// Nothing else comes: the timer of Linger ends the wait.
		if err := within(t, doAsync(b, "route")); err != nil {
			t.Fatalf("Do: %v", err)
		}
		if _, sizes := db.snapshot(); !cmp.Equal(sizes, []int{1, 2, 1}) {
			t.Errorf("transaction sizes %v, want [1 2 1]", sizes)
		}
	})
	t.Run("an impatient op joins", func(t *testing.T) {
		db, b := newBatcher()
		defer b.Close()
		result := doAsyncWith(b.DoPatient, "result")
		// Five times Linger: a patient batch is still waiting.
		time.Sleep(5 * linger)
		if _, sizes := db.snapshot(); !cmp.Equal(sizes, []int{1, 2}) {
			t.Fatalf("transaction sizes %v before the impatient op, want [1 2]: the patient op did not wait for the expected writes", sizes)
		}
		// Linger has passed since the wait began, so the route ends it.
		route := doAsync(b, "route")
		for name, done := range map[string]<-chan error{"result": result, "route": route} {
			if err := within(t, done); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
		committed, sizes := db.snapshot()
		if !cmp.Equal(sizes, []int{1, 2, 2}) || !cmp.Equal(sortedCopy(committed[len(committed)-2:]), []string{"result", "route"}) {
			t.Errorf("transactions %v committing %v, want the result and the route in the third", sizes, committed)
		}
		if st := b.Stats(); st.Expired != 1 {
			t.Errorf("%d lingers ended by a deadline, want 1 (the route's)", st.Expired)
		}
	})
}

func TestLoneCallerNeverLingers(t *testing.T) {
	db := &fakeDB{}
	b := New(db.run, Options{Linger: time.Hour})
	defer b.Close()
	// One caller at a time: every batch holds one op, so the writer never
	// sees a sibling and commits each at once (an hour's linger would time
	// the test out).
	for i := range 5 {
		done := make(chan error, 1)
		go func() { done <- b.Do(context.Background(), write(fmt.Sprint(i))) }()
		if err := within(t, done); err != nil {
			t.Fatalf("Do %d: %v", i, err)
		}
	}
	if _, sizes := db.snapshot(); !cmp.Equal(sizes, []int{1, 1, 1, 1, 1}) {
		t.Errorf("transaction sizes %v, want five of one", sizes)
	}
}

func TestLingerEndsWhenTheTimerFires(t *testing.T) {
	db := &fakeDB{}
	b := New(db.run, Options{Linger: 20 * time.Millisecond})
	defer b.Close()
	twoBatch(t, b)
	// After a batch of two the writer waits for a second op that never
	// comes, then commits the one it has.
	if err := b.Do(context.Background(), write("alone")); err != nil {
		t.Fatalf("Do: %v", err)
	}
	if _, sizes := db.snapshot(); !cmp.Equal(sizes, []int{1, 2, 1}) {
		t.Errorf("transaction sizes %v, want [1 2 1]", sizes)
	}
}

func TestCloseWhileLingering(t *testing.T) {
	db := &fakeDB{}
	b := New(db.run, Options{Linger: time.Hour})
	twoBatch(t, b)
	done := doAsync(b, "lingering")
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := <-done; err != nil {
		t.Errorf("the op the writer lingered over: %v", err)
	}
	if committed, _ := db.snapshot(); !cmp.Equal(sortedCopy(committed), []string{"a", "b", "lingering"}) {
		t.Errorf("committed %v", committed)
	}
}

// within waits for done; an op the writer keeps for its hour-long linger
// fails the test instead of timing it out.
func within(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("the writer is still holding the op: it lingered for its timer")
		return nil
	}
}

func sortedCopy(s []string) []string {
	c := append([]string(nil), s...)
	slices.Sort(c)
	return c
}

// TestLingerBacksOffForAFewSteadyCallers: four callers that each write
// and wait end up in every batch together, so the op a linger waits for
// (a fifth) never comes. The writer backs off after each linger the timer
// ends instead of waiting on every commit: 160 ops cost a handful of
// lingers, not one a batch.
func TestLingerBacksOffForAFewSteadyCallers(t *testing.T) {
	const callers = 4
	st := steadyCallers(t, Options{Linger: 5 * time.Millisecond}, callers, 40)
	// Every linger has ended, by the timer or by the batch growing.
	if st.Grown+st.Expired != st.Lingers {
		t.Errorf("%d lingers, %d ended by the timer and %d by ops arriving; want them to add up", st.Lingers, st.Expired, st.Grown)
	}
	// Without the back-off nearly every batch waits out the timer (38 of
	// 41 when this test was written); with it, at least two batches pass
	// between such waits.
	if st.Expired*4 > st.Batches {
		t.Errorf("%d lingers ended by the timer over %d batches of %d steady callers; want at most a quarter", st.Expired, st.Batches, callers)
	}
}

// TestLingerDoesNotBackOffWhileWritesAreExpected: the same steady callers
// as TestLingerBacksOffForAFewSteadyCallers, but the backend says many
// more writes are coming (Options.Expect at LingerBatch: that many calls
// running elsewhere): a linger the timer ends is then chance, not a sign
// that everyone is in the batch, so the writer keeps lingering on every
// small batch instead of backing off. Below LingerBatch it backs off as
// without Expect.
func TestLingerDoesNotBackOffWhileWritesAreExpected(t *testing.T) {
	for _, expected := range []int{16, 15} {
		t.Run(fmt.Sprint(expected), func(t *testing.T) { testLingerExpecting(t, expected) })
	}
}

func testLingerExpecting(t *testing.T, expected int) {
	st := steadyCallers(t, Options{Linger: 5 * time.Millisecond, Expect: func() int { return expected }}, 4, 20)
	// The back-off leaves at most a quarter of the batches lingering
	// (TestLingerBacksOffForAFewSteadyCallers); without it, nearly all do.
	if expected >= 16 && st.Lingers*2 < st.Batches {
		t.Errorf("%d lingers over %d batches with %d writes expected; want every small batch to linger", st.Lingers, st.Batches, expected)
	}
	if expected < 16 && st.Expired*4 > st.Batches {
		t.Errorf("%d lingers ended by the timer over %d batches with only %d writes expected; want the back-off", st.Expired, st.Batches, expected)
	}
}

// steadyCallers runs callers that each write and wait, each times, through
// a Batcher with opts whose commits take 2 ms (a simulated fsync: long
// enough for every caller to be queued for the next one), and returns its
// stats once every op has committed.
func steadyCallers(t *testing.T, opts Options, callers, each int) Stats {
	t.Helper()
	db := &fakeDB{syncDelay: 2 * time.Millisecond}
	b := New(db.run, opts)
	defer b.Close()
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			for i := range each {
				if err := b.Do(context.Background(), write(fmt.Sprintf("%d-%d", c, i))); err != nil {
					t.Errorf("Do: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	st := b.Stats()
	t.Logf("%d batches, %d lingers, %d ended by the timer", st.Batches, st.Lingers, st.Expired)
	if st.Ops != int64(callers*each) {
		t.Fatalf("%d ops run, want %d", st.Ops, callers*each)
	}
	return st
}

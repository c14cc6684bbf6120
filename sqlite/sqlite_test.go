package sqlite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/internal/groupcommit"
	"github.com/ladderhq/ladder/storetest"
)

// openTest opens a fresh database in a temporary directory.
func openTest(t testing.TB) *Store {
	t.Helper()
	return openPath(t, filepath.Join(t.TempDir(), "ladder.db"))
}

func openPath(t testing.TB, path string) *Store {
	t.Helper()
	s, err := Open(context.Background(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) ladder.Store { return openTest(t) })
}

var t0 = time.Date(2026, 8, 24, 9, 0, 0, 0, time.UTC)

func appendN(t *testing.T, s ladder.AuditStore, n int) {
	t.Helper()
	for i := range n {
		e, err := ladder.NewAuditEntry("ws-a", "system", ladder.AuditRoute, fmt.Sprint(i), t0.Add(time.Duration(i)*time.Second), map[string]int{"i": i})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.AppendAudit(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTamperedAuditIsNamed alters a stored record behind the store's back,
// as someone with the file could, and expects VerifyAudit to name it.
func TestTamperedAuditIsNamed(t *testing.T) {
	ctx := t.Context()
	s := openTest(t)
	defer s.Close()
	appendN(t, s, 5)
	if n, err := ladder.VerifyAudit(ctx, s); err != nil || n != 5 {
		t.Fatalf("VerifyAudit before tampering = %d, %v", n, err)
	}

	// The triggers keep the program itself from rewriting history…
	_, err := s.writer.ExecContext(ctx, `UPDATE audit SET actor = 'mallory' WHERE seq = 3`)
	if err == nil || !strings.Contains(err.Error(), "append-only") {
		t.Fatalf("UPDATE of an audit row: err = %v, want the append-only trigger to refuse", err)
	}
	// …but not someone with the file, which is what the chain is for.
	for _, stmt := range []string{
		`DROP TRIGGER audit_no_update`,
		`UPDATE audit SET data = CAST('{"i":999}' AS BLOB) WHERE seq = 3`,
	} {
		if _, err := s.writer.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	n, err := ladder.VerifyAudit(ctx, s)
	if err == nil || !strings.HasPrefix(err.Error(), "audit record 3:") || n != 2 {
		t.Errorf("VerifyAudit after tampering = %d, %v; want 2 verified and an error naming record 3", n, err)
	}
}

func TestOpenErrorsNameThePath(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(garbage, []byte(strings.Repeat("not a database. ", 512)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path string
		want       []string
	}{
		{"missing directory", filepath.Join(dir, "no", "such", "dir", "ladder.db"), []string{"open database", "no/such/dir/ladder.db", "is the directory writable?"}},
		{"not a database", garbage, []string{"database " + garbage, "is it a ladder database?"}},
		{"driver options in the path", filepath.Join(dir, "x.db?mode=ro"), []string{"open database", "x.db?mode=ro"}},
		{"empty path", "", []string{"no path"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Open(t.Context(), tc.path, Options{})
			if err == nil {
				s.Close()
				t.Fatalf("Open(%q) succeeded", tc.path)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Open(%q) error %q does not contain %q", tc.path, err, w)
				}
			}
		})
	}
}

func TestReopenKeepsDataAndMigratesOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ladder.db")
	s := openPath(t, path)
	appendN(t, s, 3)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	s = openPath(t, path)
	defer s.Close()
	if n, err := ladder.VerifyAudit(t.Context(), s); err != nil || n != 3 {
		t.Errorf("VerifyAudit after reopen = %d, %v; want 3", n, err)
	}
	ms, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := s.readers.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM schema_migrations`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != len(ms) {
		t.Errorf("schema_migrations has %d rows, want %d", n, len(ms))
	}
	var mode string
	if err := s.readers.QueryRowContext(t.Context(), `PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode = %q, %v; want wal", mode, err)
	}
}

// TestNewerSchemaRefused keeps an old binary from writing to a database a
// newer one has migrated.
func TestNewerSchemaRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ladder.db")
	s := openPath(t, path)
	if _, err := s.writer.ExecContext(t.Context(), `INSERT INTO schema_migrations VALUES (9999, '9999_future.sql', '')`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err := Open(t.Context(), path, Options{})
	if err == nil || !strings.Contains(err.Error(), "migrate database "+path) || !strings.Contains(err.Error(), "9999") {
		t.Errorf("Open of a newer schema: err = %v", err)
	}
}

// TestTwoProcessesShareTheChain opens the file twice, as `ladder serve` and
// a `ladder keys create` would, and appends from both at once: each append
// must read the chain's head from the table, not from memory, under the
// write lock.
func TestTwoProcessesShareTheChain(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ladder.db")
	server, cli := openPath(t, path), openPath(t, path)
	defer server.Close()
	defer cli.Close()
	var wg sync.WaitGroup
	for _, s := range []*Store{server, cli} {
		for range 4 {
			wg.Go(func() {
				for i := range 10 {
					e, _ := ladder.NewAuditEntry("ws-a", "system", ladder.AuditRoute, fmt.Sprint(i), t0, nil)
					if _, err := s.AppendAudit(context.Background(), e); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	if n, err := ladder.VerifyAudit(t.Context(), server); err != nil || n != 80 {
		t.Errorf("VerifyAudit = %d, %v; want 80", n, err)
	}
}

// TestDiskFullIsUnavailable caps the database's size, as a full disk would,
// and expects writes to fail with ErrUnavailable and leave the chain whole.
func TestDiskFullIsUnavailable(t *testing.T) {
	ctx := t.Context()
	s := openTest(t)
	defer s.Close()
	appendN(t, s, 3)
	setMaxPages := func(n string) {
		t.Helper()
		err := s.batch.Do(ctx, func(w *wtx) error {
			if n == "" {
				return w.queryRow(`PRAGMA page_count`).Scan(&n)
			}
			return nil
		})
		if err == nil {
			err = s.batch.Do(ctx, func(w *wtx) error {
				_, err := w.tx.ExecContext(w.ctx, "PRAGMA max_page_count = "+n)
				return err
			})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	setMaxPages("")

	big := map[string]string{"blob": strings.Repeat("x", 8000)}
	var err error
	for i := 0; i < 100 && err == nil; i++ {
		var e ladder.AuditEntry
		e, err = ladder.NewAuditEntry("ws-a", "system", ladder.AuditCall, fmt.Sprint(i), t0, big)
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.AppendAudit(ctx, e)
	}
	if !errors.Is(err, ladder.ErrUnavailable) {
		t.Fatalf("append on a full database: err = %v, want ErrUnavailable", err)
	}
	t.Logf("full: %v", err)
	if _, err := ladder.VerifyAudit(ctx, s); err != nil {
		t.Errorf("VerifyAudit after a failed append: %v", err)
	}
	setMaxPages("1073741823")
	appendN(t, s, 1)
	if _, err := ladder.VerifyAudit(ctx, s); err != nil {
		t.Errorf("VerifyAudit after space came back: %v", err)
	}
}

// TestCloseKeepsAcknowledgedWrites closes the store under load: every write
// that was acknowledged is in the file when it is opened again.
func TestCloseKeepsAcknowledgedWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ladder.db")
	s := openPath(t, path)
	var (
		mu    sync.Mutex
		acked []string
		wg    sync.WaitGroup
	)
	for g := range 16 {
		wg.Go(func() {
			for i := 0; ; i++ {
				r := ladder.Route{ID: fmt.Sprintf("rt_%d_%d", g, i), Workspace: "ws-a", Queue: "bills", Step: "post_tms",
					Item: fmt.Sprintf("bill-%d-%d", g, i), Decision: ladder.DecisionActAlone, Lane: ladder.LaneAuto, At: t0}
				e, _ := ladder.NewAuditEntry("ws-a", "k1", ladder.AuditRoute, r.ID, t0, nil)
				if _, _, err := s.RecordRoute(context.Background(), r, e); err != nil {
					if !errors.Is(err, ladder.ErrUnavailable) {
						t.Errorf("RecordRoute while closing: %v, want ErrUnavailable", err)
					}
					return
				}
				mu.Lock()
				acked = append(acked, r.ID)
				mu.Unlock()
			}
		})
	}
	time.Sleep(100 * time.Millisecond)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()

	s = openPath(t, path)
	defer s.Close()
	for _, id := range acked {
		if _, err := s.GetRoute(t.Context(), "ws-a", id); err != nil {
			t.Fatalf("acknowledged route %s: %v", id, err)
		}
	}
	n, err := ladder.VerifyAudit(t.Context(), s)
	if err != nil || n < int64(len(acked)) {
		t.Errorf("VerifyAudit = %d, %v; want at least the %d acknowledged routes", n, err, len(acked))
	}
	t.Logf("%d routes acknowledged before Close", len(acked))
}

func TestClosedIsUnavailable(t *testing.T) {
	s := openTest(t)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	e, _ := ladder.NewAuditEntry("ws-a", "system", ladder.AuditRoute, "x", t0, nil)
	_, err := s.AppendAudit(ctx, e)
	if !errors.Is(err, ladder.ErrUnavailable) {
		t.Errorf("AppendAudit after Close: err = %v, want ErrUnavailable", err)
	}
	_, err = s.ListAudit(ctx, ladder.AuditQuery{})
	if !errors.Is(err, ladder.ErrUnavailable) {
		t.Errorf("ListAudit after Close: err = %v, want ErrUnavailable", err)
	}
	if err := s.Ping(ctx); !errors.Is(err, ladder.ErrUnavailable) {
		t.Errorf("Ping after Close: err = %v, want ErrUnavailable", err)
	}
}

// BenchmarkRecordRouteParallel measures durable routes per second through
// group commit: every call is on disk (synchronous=FULL) when it returns.
func BenchmarkRecordRouteParallel(b *testing.B) {
	s := openTest(b)
	defer s.Close()
	ctx := context.Background()
	if err := s.EnsureSteps(ctx, []ladder.StepState{{Workspace: "ws-a", Queue: "bills", Step: "post_tms", Lane: ladder.LaneAuto}}); err != nil {
		b.Fatal(err)
	}
	var next atomic.Int64
	b.SetParallelism(16) // 16 × GOMAXPROCS concurrent callers, as under load
	b.ResetTimer()
	start := s.batch.Stats()
	cpu0 := processCPU(b)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := next.Add(1)
			r := ladder.Route{ID: ladder.NewID("rt"), Workspace: "ws-a", Queue: "bills", Step: "post_tms",
				Item: fmt.Sprintf("bill-%d", i), Decision: ladder.DecisionActAlone, Lane: ladder.LaneAuto,
				AuditRate: 0.05, Reason: "auto", KeyID: "k1", At: time.Now()}
			e, err := ladder.NewAuditEntry(r.Workspace, r.KeyID, ladder.AuditRoute, r.ID, r.At, map[string]any{"item": r.Item, "decision": r.Decision})
			if err != nil {
				b.Error(err)
				return
			}
			if _, _, err := s.RecordRoute(ctx, r, e); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	// CPU, the kernel's included, is what a route costs the machine: the
	// WAL's writes and syncs are mostly kernel time.
	b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
	end := s.batch.Stats()
	if batches := end.Batches - start.Batches; batches > 0 {
		b.ReportMetric(float64(end.Ops-start.Ops)/float64(batches), "ops/batch")
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "routes/s")
}

// TestFailedOpLeavesTheChainWhole runs one batch whose middle op appends
// to the audit chain and then fails: its savepoint is rolled back, and the
// ops after it must chain onto the record before it, not onto the record
// that no longer exists.
func TestFailedOpLeavesTheChainWhole(t *testing.T) {
	ctx := t.Context()
	s := openTest(t)
	defer s.Close()
	appendN(t, s, 2)
	entry := func(i int) ladder.AuditEntry {
		e, err := ladder.NewAuditEntry("ws-a", "system", ladder.AuditRoute, fmt.Sprint(i), t0.Add(time.Duration(i)*time.Second), map[string]int{"i": i})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	boom := errors.New("boom")
	errs := s.runBatch(ctx, []groupcommit.Op[*wtx]{
		func(w *wtx) error { _, err := w.appendAudit(entry(10)); return err },
		func(w *wtx) error {
			if _, err := w.appendAudit(entry(11), entry(12)); err != nil {
				return err
			}
			return boom
		},
		func(w *wtx) error { _, err := w.appendAudit(entry(13)); return err },
	})
	if errs[0] != nil || !errors.Is(errs[1], boom) || errs[2] != nil {
		t.Fatalf("batch errors = %v, want nil, boom, nil", errs)
	}
	n, err := ladder.VerifyAudit(ctx, s)
	if err != nil || n != 4 {
		t.Fatalf("VerifyAudit = %d, %v; want 4 records (2 + 10 + 13) and a whole chain", n, err)
	}
	recs, err := s.ListAudit(ctx, ladder.AuditQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if got := recs[3].Subject; got != "13" || recs[3].Seq != 4 {
		t.Errorf("last record = seq %d subject %q, want seq 4 subject 13", recs[3].Seq, got)
	}
}

// TestWALIsCheckpointedInTheBackground: the writer never checkpoints (so no
// commit waits on one), so the background checkpointer must keep the WAL
// from growing with everything ever written, and Close must leave the
// database whole without it.
func TestWALIsCheckpointedInTheBackground(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "ladder.db")
	s := openPath(t, path)
	pad := strings.Repeat("x", 1000)
	const rounds, perRound = 10, 500
	for r := range rounds {
		entries := make([]ladder.AuditEntry, perRound)
		for i := range entries {
			e, err := ladder.NewAuditEntry("ws-a", "system", ladder.AuditRoute, fmt.Sprint(r, i), t0, map[string]string{"pad": pad})
			if err != nil {
				t.Fatal(err)
			}
			entries[i] = e
		}
		if _, err := s.AppendAudit(ctx, entries...); err != nil {
			t.Fatal(err)
		}
		time.Sleep(checkpointEvery + 50*time.Millisecond)
	}
	written := int64(rounds * perRound * len(pad))
	fi, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > written/3 {
		t.Errorf("WAL is %d bytes after %d bytes of audit data: the background checkpointer is not keeping it short", fi.Size(), written)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path + "-wal"); err == nil && fi.Size() > 0 {
		t.Errorf("WAL is %d bytes after Close, want it copied in and truncated", fi.Size())
	}
	s = openPath(t, path)
	defer s.Close()
	if n, err := ladder.VerifyAudit(ctx, s); err != nil || n != rounds*perRound {
		t.Fatalf("VerifyAudit after reopening = %d, %v; want %d", n, err, rounds*perRound)
	}
}

// TestRunningCallsCount: the calls this process began and has not settled,
// which the group commit's linger waits for (Store.running): a call
// begun counts, a second begin with the same idempotency key or a call
// stored settled does not, a stored outcome takes it off, and a call
// begun before a restart and settled after it leaves the count at zero.
func TestRunningCallsCount(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "ladder.db")
	s := openPath(t, path)
	call := func(id string) ladder.Call {
		return ladder.Call{ID: id, Workspace: "ws-a", Capability: "tms:postBill", KeyID: "k_agent", IdempotencyKey: "key-" + id,
			Status: ladder.CallRunning, StartedAt: t0}
	}
	entry := func(id string) ladder.AuditEntry {
		e, err := ladder.NewAuditEntry("ws-a", "k_agent", ladder.AuditCall, id, t0, nil)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	begin := func(s *Store, id string) ladder.Call {
		c, _, err := s.BeginCall(ctx, call(id), entry(id))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a, b := begin(s, "cl_a"), begin(s, "cl_b")
	begin(s, "cl_a") // the same key: the first call, not a new one
	// A call stored already settled (the record of an approved call that
	// never began) is not running.
	tomb := call("cl_tomb")
	tomb.Status = ladder.CallFailed
	if _, _, err := s.BeginCall(ctx, tomb, entry(tomb.ID)); err != nil {
		t.Fatal(err)
	}
	if n := s.running.Load(); n != 2 {
		t.Fatalf("%d calls running after two begun (and one stored settled), want 2", n)
	}
	a.Status = ladder.CallOK
	if _, err := s.FinishCall(ctx, a, entry(a.ID)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.FinishCall(ctx, a, entry(a.ID)); !errors.Is(err, ladder.ErrConflict) {
		t.Fatalf("finishing a finished call: %v, want a conflict", err)
	}
	if n := s.running.Load(); n != 1 {
		t.Fatalf("%d calls running after one finished (and a refused second finish), want 1", n)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openPath(t, path)
	defer s.Close()
	b.Status = ladder.CallUnknown
	if _, err := s.UpdateCall(ctx, b, ladder.CallRunning, entry(b.ID)); err != nil {
		t.Fatal(err)
	}
	if n := s.running.Load(); n != 0 {
		t.Fatalf("%d calls running after a restart settled the call begun before it, want 0", n)
	}
}

package postgres

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/storetest"
)

// A batch's last statements (its audit, events and notifications) travel
// with its COMMIT in one round trip. These tests make each kind of failure
// there happen for real, with triggers, and check that nothing of the
// batch is committed, that the failure is retried only when running the
// batch again is safe, and that the connection goes back to the pool
// usable.

// writeRouteAudited is a batch's op that stores a route through a
// statement of its own (so the op has written something before the tail)
// and appends an audit record with subject.
func writeRouteAudited(t *testing.T, s *Store, id, subject string, runs *atomic.Int64) error {
	t.Helper()
	return s.write(t.Context(), func(w *wtx) error {
		runs.Add(1)
		q, args := insertRouteSQL(testRoute(id, id), "")
		if _, err := w.exec(q, args...); err != nil {
			return err
		}
		return w.appendAudit(nil, entry(t, ladder.AuditCall, subject, nil))
	})
}

// openWith opens a Store on a fresh schema after running ddl there (the
// test's triggers), returning both.
func openWith(t *testing.T, ddl string) (*Store, string) {
	t.Helper()
	schema := newSchema(t)
	s := openTest(t, schema)
	if _, err := adminConn(t, schema).Exec(t.Context(), ddl); err != nil {
		t.Fatal(err)
	}
	storetest.AskFed(s, "ws-a")
	return s, schema
}

func countRows(t *testing.T, schema, table string) int {
	t.Helper()
	var n int
	if err := adminConn(t, schema).QueryRow(t.Context(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// wantStored checks that the schema holds routes routes, the store's
// audit chain verifies with records records, and the store's feed holds
// the leaves of those records (storetest.CheckFed; the test asked for
// ws-a's, storetest.AskFed): a batch whose insert or COMMIT failed fed
// nothing, and a batch run again fed its leaves once.
func wantStored(t *testing.T, s *Store, schema string, routes int, records int64) {
	t.Helper()
	if n := countRows(t, schema, "routes"); n != routes {
		t.Errorf("%d routes stored, want %d", n, routes)
	}
	if n, err := ladder.VerifyAudit(t.Context(), s); err != nil || n != records {
		t.Errorf("VerifyAudit = %d, %v; want %d records", n, err, records)
	}
	storetest.CheckFed(t, s)
}

// TestTailStatementFails: the audit insert sent with the COMMIT fails, so
// the COMMIT is skipped: the op's route is not stored, the error names the
// audit, the batch is not run again, and the next batch commits.
func TestTailStatementFails(t *testing.T) {
	s, schema := openWith(t, `
		CREATE FUNCTION refuse_audit() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.subject = 'refused' THEN RAISE EXCEPTION 'audit refused by the test'; END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER refuse_audit BEFORE INSERT ON audit FOR EACH ROW EXECUTE FUNCTION refuse_audit();`)
	var runs atomic.Int64
	err := writeRouteAudited(t, s, "rt_refused", "refused", &runs)
	if err == nil || !strings.Contains(err.Error(), "insert audit") || !strings.Contains(err.Error(), "audit refused by the test") {
		t.Fatalf("write whose audit insert fails: %v, want the insert's error", err)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("the op ran %d times, want 1 (not a failure running again cures)", n)
	}
	if n := countRows(t, schema, "routes"); n != 0 {
		t.Errorf("%d routes stored by a batch whose audit failed, want 0", n)
	}
	// The connection went back idle: the next batches commit on it.
	for _, id := range []string{"rt_a", "rt_b"} {
		if err := writeRouteAudited(t, s, id, "fine", &runs); err != nil {
			t.Fatalf("write after the failed batch: %v", err)
		}
	}
	wantStored(t, s, schema, 2, 2)
}

// TestTailDeadlockRetried: the audit insert sent with the COMMIT fails as
// a deadlock victim does (40P01), once. Nothing was committed, so the
// batch runs again and the caller sees success, its route stored once.
func TestTailDeadlockRetried(t *testing.T) {
	s, schema := openWith(t, `
		CREATE SEQUENCE audit_fail_once;
		CREATE FUNCTION fail_once() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			-- nextval is not rolled back with the transaction: one failure.
			IF nextval('audit_fail_once') = 1 THEN
				RAISE EXCEPTION 'deadlock made by the test' USING ERRCODE = '40P01';
			END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER fail_once BEFORE INSERT ON audit FOR EACH ROW EXECUTE FUNCTION fail_once();`)
	var runs atomic.Int64
	if err := writeRouteAudited(t, s, "rt_retried", "retried", &runs); err != nil {
		t.Fatalf("write whose audit insert deadlocks once: %v, want it run again and committed", err)
	}
	if n := runs.Load(); n != 2 {
		t.Errorf("the op ran %d times, want 2", n)
	}
	wantStored(t, s, schema, 1, 1)
}

// TestCommitFailsNotRetried: the COMMIT itself fails (a deferred
// constraint trigger raising a serialization failure at commit). A failed
// COMMIT's outcome is not always known, so the batch is not run again even
// for an error that is otherwise retried; the caller gets the error, and
// here (PostgreSQL rolled it back) nothing is stored.
func TestCommitFailsNotRetried(t *testing.T) {
	s, schema := openWith(t, `
		CREATE FUNCTION fail_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.subject = 'doomed' THEN
				RAISE EXCEPTION 'commit refused by the test' USING ERRCODE = '40001';
			END IF;
			RETURN NULL;
		END $$;
		CREATE CONSTRAINT TRIGGER fail_at_commit AFTER INSERT ON audit
			DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION fail_at_commit();`)
	var runs atomic.Int64
	err := writeRouteAudited(t, s, "rt_doomed", "doomed", &runs)
	if err == nil || !errors.Is(err, errCommit) || !strings.Contains(err.Error(), "commit refused by the test") {
		t.Fatalf("write whose commit fails: %v, want the commit's error", err)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("the op ran %d times, want 1: a failed commit is not run again", n)
	}
	if n := countRows(t, schema, "routes"); n != 0 {
		t.Errorf("%d routes stored, want 0", n)
	}
	if err := writeRouteAudited(t, s, "rt_after", "fine", &runs); err != nil {
		t.Fatalf("write after the failed commit: %v", err)
	}
	wantStored(t, s, schema, 1, 1)
}

// TestFirstStatementFails: the batch's first statement, sent with its
// BEGIN, fails; the transaction is rolled back and the connection reused.
func TestFirstStatementFails(t *testing.T) {
	schema := newSchema(t)
	s := openTest(t, schema)
	storetest.AskFed(s, "ws-a")
	err := s.write(t.Context(), func(w *wtx) error {
		_, err := w.exec(`INSERT INTO no_such_table VALUES (1)`)
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "no_such_table") {
		t.Fatalf("write whose first statement fails: %v", err)
	}
	// Every connection of the pool, reused, is outside a transaction: a
	// write and a read in a fresh transaction each see only what committed.
	var runs atomic.Int64
	for _, id := range []string{"rt_1", "rt_2", "rt_3"} {
		if err := writeRouteAudited(t, s, id, "fine", &runs); err != nil {
			t.Fatalf("write after the failed first statement: %v", err)
		}
	}
	// pgxpool hands a released connection back to the pool from a
	// goroutine of its own when the pool has an AfterRelease hook (Open
	// sets one), so the count may lag the release by a moment.
	deadline := time.Now().Add(5 * time.Second)
	for s.pool.Stat().AcquiredConns() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := s.pool.Stat().AcquiredConns(); n != 0 {
		t.Errorf("%d connections still acquired 5 s after the batches, want 0", n)
	}
	wantStored(t, s, schema, 3, 3)
}

package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ladderhq/ladder"
)

// TestReadOnlyOpen opens a database read-only: a missing file is an error
// naming it and is not created; an existing one reads as the writer sees
// it, while the writer has it open, and refuses every write.
func TestReadOnlyOpen(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.db")
	_, err := Open(t.Context(), missing, Options{ReadOnly: true})
	if err == nil || !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing file: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("a read-only open of a missing file left %d files in the directory", len(entries))
	}

	path := filepath.Join(dir, "ladder.db")
	w := openPath(t, path)
	e, err := ladder.NewAuditEntry("ws", "k1", ladder.AuditRoute, "rt_1", time.Date(2026, 9, 1, 9, 0, 0, 0, time.UTC), map[string]any{"queue": "bills", "step": "post_tms"})
	if err != nil {
		t.Fatal(err)
	}
	want, err := w.AppendAudit(t.Context(), e, e)
	if err != nil {
		t.Fatal(err)
	}

	ro, err := Open(t.Context(), path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	got, err := ro.ListAudit(t.Context(), ladder.AuditQuery{Step: "post_tms", Queue: "bills"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("read-only list (-want +got):\n%s", diff)
	}
	if n, err := ladder.VerifyAudit(t.Context(), ro); err != nil || n != 2 {
		t.Errorf("read-only verify: %d, %v", n, err)
	}
	if _, err := ro.AppendAudit(t.Context(), e); !errors.Is(err, ladder.ErrUnavailable) {
		t.Errorf("append on a read-only store: %v, want ErrUnavailable", err)
	}
	// SQLite itself refuses a write on the readers (mode=ro), not only
	// the store's methods and the query_only pragma, which a statement
	// could turn off.
	conn, err := ro.readers.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(t.Context(), `PRAGMA query_only = 0`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(t.Context(), `INSERT INTO write_probe (id, at) VALUES (2, 'x')`); err == nil || !strings.Contains(err.Error(), "readonly") {
		t.Errorf("a write on a read-only connection: %v, want SQLite's readonly error", err)
	}
	conn.Close()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestReadOnlyOpenOfAnOldSchema reads a database that predates migration
// 0011 read-only: records verify and list, and the step filter, which
// needs the migration, says so instead of failing on a missing column.
func TestReadOnlyOpenOfAnOldSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ladder.db")
	w := openPath(t, path)
	e, _ := ladder.NewAuditEntry("ws", "k1", ladder.AuditRoute, "rt_1", time.Time{}, map[string]any{"queue": "bills", "step": "post_tms"})
	if _, err := w.AppendAudit(t.Context(), e); err != nil {
		t.Fatal(err)
	}
	w.Close()
	undo0011(t, path)

	ro, err := Open(t.Context(), path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if recs, err := ro.ListAudit(t.Context(), ladder.AuditQuery{Actor: "k1"}); err != nil || len(recs) != 1 {
		t.Errorf("list by actor: %d, %v", len(recs), err)
	}
	if _, err := ro.ListAudit(t.Context(), ladder.AuditQuery{Step: "post_tms"}); err == nil || !strings.Contains(err.Error(), "migration 0011") {
		t.Errorf("step filter on an old schema: %v", err)
	}
}

// undo0011 turns the database at path back into one that predates
// migration 0011, as a database written by an older ladder is.
func undo0011(t *testing.T, path string) {
	t.Helper()
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	for _, stmt := range []string{
		`DROP INDEX audit_by_workspace_kind`, `DROP INDEX audit_by_workspace_step`,
		`ALTER TABLE audit DROP COLUMN queue`, `ALTER TABLE audit DROP COLUMN step`,
		// Nor has it the migrations after 0011.
		`DROP INDEX audit_by_workspace_idx`, `ALTER TABLE audit DROP COLUMN ws_idx`, `DROP TABLE audit_ws_head`,
		`DROP TABLE tlog_head`, `DROP TABLE tlog_hash`, `DROP TABLE tlog_checkpoint`, `DROP TABLE tlog_meta`,
		`DROP TABLE deliveries`, `DROP TABLE outbox`,
		`CREATE INDEX audit_by_kind ON audit (kind, seq)`,
		`DELETE FROM schema_migrations WHERE version >= 11`,
	} {
		if _, err := raw.Exec(stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
}

// TestMigration0011Backfills opens a database written before migration
// 0011: the migration fills queue and step from each record's data as
// AuditStepOf reads it, the step filter finds the old records, the chain
// still verifies and appending works again.
func TestMigration0011Backfills(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ladder.db")
	w := openPath(t, path)
	at := time.Date(2026, 9, 1, 9, 0, 0, 0, time.UTC)
	var entries []ladder.AuditEntry
	for _, data := range []any{
		map[string]any{"queue": "bills", "step": "post_tms"},
		map[string]any{"step": "read_bill"},
		map[string]any{"queue": 3, "step": []int{1}},
		nil,
		[]string{"bills", "post_tms"},
		map[string]any{"queue": "loads", "step": "post_tms", "item": "x"},
	} {
		e, err := ladder.NewAuditEntry("ws", "k1", ladder.AuditRoute, "s", at, data)
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, e)
	}
	recs, err := w.AppendAudit(context.Background(), entries...)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	undo0011(t, path)

	s := openPath(t, path)
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	for _, r := range recs {
		var queue, step string
		if err := raw.QueryRow(`SELECT queue, step FROM audit WHERE seq = ?`, r.Seq).Scan(&queue, &step); err != nil {
			t.Fatal(err)
		}
		wq, ws := ladder.AuditStepOf(r.Data)
		if queue != wq || step != ws {
			t.Errorf("record %d (%s): backfilled %q/%q, AuditStepOf says %q/%q", r.Seq, r.Data, queue, step, wq, ws)
		}
	}
	got, err := s.ListAudit(t.Context(), ladder.AuditQuery{Step: "post_tms"})
	if err != nil || len(got) != 2 || got[0].Seq != 1 || got[1].Seq != 6 {
		t.Errorf("step filter after the backfill: %v, %v", got, err)
	}
	if _, err := s.AppendAudit(t.Context(), entries[0]); err != nil {
		t.Errorf("append after the migration (the trigger is back, the insert is not refused): %v", err)
	}
	if _, err := raw.Exec(`UPDATE audit SET actor = 'x' WHERE seq = 1`); err == nil || !strings.Contains(err.Error(), "append-only") {
		t.Errorf("the append-only trigger is not back after the migration: %v", err)
	}
	if n, err := ladder.VerifyAudit(t.Context(), s); err != nil || n != 7 {
		t.Errorf("verify after the migration: %d, %v", n, err)
	}
	// Migration 0012 notes the 6 records written before the logs, to be
	// verified before they become leaves.
	if m, err := s.TlogMeta(t.Context()); err != nil || m.LegacySeq != 6 || m.Adopted {
		t.Errorf("tlog meta after 0012 on 6 records: %+v, %v; want legacy_seq 6, not adopted", m, err)
	}
}

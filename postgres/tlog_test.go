package postgres

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/translog"
)

// undo0018 puts back migration 0012's tlog_leaf as the integrator kept it
// before migration 0018: a row per leaf, its index the record's position.
var undo0018 = []string{
	`CREATE TABLE tlog_leaf (workspace text NOT NULL, idx bigint NOT NULL, seq bigint NOT NULL UNIQUE, PRIMARY KEY (workspace, idx))`,
	`INSERT INTO tlog_leaf (workspace, idx, seq) SELECT a.workspace, a.ws_idx, a.seq FROM audit AS a JOIN tlog_head AS h ON h.workspace = a.workspace WHERE a.ws_idx < h.size`,
}

// TestMigration0018 opens schemas whose logs were integrated while
// tlog_leaf kept the leaves. Where the table agrees with the records'
// positions the migration drops it, every leaf keeps its index and the
// logs grow on from where they were; where it does not (the database was
// changed outside ladder), the migration stops, names the first leaf that
// disagrees, and leaves the schema as it was.
func TestMigration0018(t *testing.T) {
	ctx := t.Context()
	for _, tampered := range []bool{false, true} {
		schema := newSchema(t)
		s := openTest(t, schema)
		var entries []ladder.AuditEntry
		for i := range 12 {
			e, err := ladder.NewAuditEntry([]string{"ws-a", "ws-b", "ws-a"}[i%3], "k1", ladder.AuditRoute, fmt.Sprint("rt_", i), time.Date(2026, 8, 24, 9, 0, 0, 0, time.UTC), map[string]any{"i": i})
			if err != nil {
				t.Fatal(err)
			}
			entries = append(entries, e)
		}
		recs, err := s.AppendAudit(ctx, entries...)
		if err != nil {
			t.Fatal(err)
		}
		for _, ws := range []string{"ws-a", "ws-b"} {
			if _, err := translog.IntegrateAll(ctx, s, ws); err != nil {
				t.Fatal(err)
			}
		}
		leaves := map[int64]int64{} // by seq
		for _, r := range recs {
			idx, err := s.TlogLeafOf(ctx, r.Workspace, r.Seq)
			if err != nil {
				t.Fatal(err)
			}
			leaves[r.Seq] = idx
		}
		s.Close()

		conn := adminConn(t, schema)
		stmts := append(slices.Clone(undo0018), `DELETE FROM schema_migrations WHERE version >= 18`)
		if tampered {
			stmts = append(stmts, `UPDATE tlog_leaf SET idx = idx + 100 WHERE seq = (SELECT max(seq) FROM tlog_leaf WHERE workspace = 'ws-b')`)
		}
		for _, stmt := range stmts {
			if _, err := conn.Exec(ctx, stmt); err != nil {
				t.Fatalf("%s: %v", stmt, err)
			}
		}
		var rows int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM tlog_leaf`).Scan(&rows); err != nil || rows != len(recs) {
			t.Fatalf("tlog_leaf put back with %d rows (%v), want %d", rows, err, len(recs))
		}

		s, err = Open(ctx, testDSN(t), Options{Schema: schema})
		if tampered {
			if err == nil || !strings.Contains(err.Error(), "tlog_leaf disagrees with the audit records") || !strings.Contains(err.Error(), "workspace ws-b") || !strings.Contains(err.Error(), "restore it from a backup") {
				t.Errorf("tampered tlog_leaf: open error %v, want the migration stopped naming the leaf", err)
			}
			if err == nil {
				s.Close()
			}
			var version int
			if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM tlog_leaf), (SELECT max(version) FROM schema_migrations)`).Scan(&rows, &version); err != nil || version != 17 {
				t.Errorf("after the refused migration: tlog_leaf %v, schema version %d; want the table and version 17 left as they were", err, version)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = $1 AND tablename = 'tlog_leaf'`, schema).Scan(&rows); err != nil || rows != 0 {
			t.Errorf("tlog_leaf after migration 0018: %d (%v), want it dropped", rows, err)
		}
		for _, r := range recs {
			if idx, err := s.TlogLeafOf(ctx, r.Workspace, r.Seq); err != nil || idx != leaves[r.Seq] {
				t.Errorf("leaf of seq %d after migration 0018 = %d, %v; want %d", r.Seq, idx, err, leaves[r.Seq])
			}
		}
		more, err := s.AppendAudit(ctx, entries[:2]...)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := translog.IntegrateAll(ctx, s, "ws-a"); err != nil {
			t.Fatal(err)
		}
		if idx, err := s.TlogLeafOf(ctx, "ws-a", more[0].Seq); err != nil || idx != 8 {
			t.Errorf("leaf of the first record after migration 0018 = %d, %v; want 8 (ws-a had 8)", idx, err)
		}
		if _, err := s.TlogLeafOf(ctx, "ws-b", more[1].Seq); !errors.Is(err, ladder.ErrNotFound) {
			t.Errorf("leaf of a ws-b record not yet integrated: %v, want ErrNotFound", err)
		}
		s.Close()
	}
}

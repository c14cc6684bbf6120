package postgres

import (
	"slices"
	"strings"
	"testing"

	"github.com/ladderhq/ladder/storetest"
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
		before := storetest.LeafMigrationRecords(t, s)
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
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM tlog_leaf`).Scan(&rows); err != nil || rows != len(before.Records) {
			t.Fatalf("tlog_leaf put back with %d rows (%v), want %d", rows, err, len(before.Records))
		}

		s, err := Open(ctx, testDSN(t), Options{Schema: schema})
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
		before.CheckLeavesKept(t, s)
		s.Close()
	}
}

package sqlite

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/storetest"
)

// TestAuditStepFilterPlans checks the index each ListAudit filter reads:
// a step filter with its queue reads the partial step index (migration
// 0016), which SQLite uses only when the query names its step <> ” term.
// A step without its queue, or a queue alone, walks the workspace's
// records in seq order, as before migration 0016: with the queue between
// step and seq in the step index, SQLite (with no statistics) prefers not
// to sort.
func TestAuditStepFilterPlans(t *testing.T) {
	s := openPath(t, filepath.Join(t.TempDir(), "ladder.db"))
	defer s.Close()
	storetest.AuditPlanRecords(t, s)
	var def string
	if err := s.readers.QueryRowContext(t.Context(), `SELECT sql FROM sqlite_schema WHERE name = 'audit_by_workspace_step'`).Scan(&def); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(def, "WHERE step <> ''") {
		t.Errorf("audit_by_workspace_step is %q, want the partial index of migration 0016", def)
	}
	for _, tc := range []struct {
		q     ladder.AuditQuery
		index string
	}{
		{ladder.AuditQuery{Workspace: "ws-a", Queue: "bills", Step: "s0"}, "audit_by_workspace_step"},
		{ladder.AuditQuery{Workspace: "ws-a", Queue: "bills", Step: "s0", Desc: true}, "audit_by_workspace_step"},
		{ladder.AuditQuery{Workspace: "ws-a", Queue: "bills", Step: "s0", Desc: true, BeforeSeq: 2000}, "audit_by_workspace_step"},
		{ladder.AuditQuery{Workspace: "ws-a", Queue: "bills", Step: "s0", AfterSeq: 100, Limit: 5}, "audit_by_workspace_step"},
		{ladder.AuditQuery{Workspace: "ws-a", Step: "s0"}, "audit_by_workspace"},
		{ladder.AuditQuery{Workspace: "ws-a", Step: "s0", Desc: true, BeforeSeq: 2000}, "audit_by_workspace"},
		{ladder.AuditQuery{Workspace: "ws-a", Queue: "bills"}, "audit_by_workspace"},
		{ladder.AuditQuery{Workspace: "ws-a", Queue: "bills", Desc: true}, "audit_by_workspace"},
	} {
		if got := sqlitePlan(t, s.readers, tc.q); !strings.Contains(got, "USING INDEX "+tc.index+" (") {
			t.Errorf("ListAudit %s: plan %q, want it to read %s", describeQuery(tc.q), got, tc.index)
		}
	}
}

// sqlitePlan is SQLite's plan for ListAudit's query of q, its details on
// one line.
func sqlitePlan(t *testing.T, db *sql.DB, q ladder.AuditQuery) string {
	t.Helper()
	query, args := auditListQuery(q)
	rows, err := db.QueryContext(t.Context(), `EXPLAIN QUERY PLAN `+query, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var details []string
	for rows.Next() {
		var (
			id, parent, notUsed int
			detail              string
		)
		if err := rows.Scan(&id, &parent, &notUsed, &detail); err != nil {
			t.Fatal(err)
		}
		details = append(details, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(details, "; ")
}

// describeQuery names q's filters that are set.
func describeQuery(q ladder.AuditQuery) string {
	return fmt.Sprintf("workspace=%q queue=%q step=%q desc=%v before=%d after=%d", q.Workspace, q.Queue, q.Step, q.Desc, q.BeforeSeq, q.AfterSeq)
}

// TestMigration0016 opens a database whose step index still holds every
// record (before migration 0016): read-only, its step filters read it as
// they did; read-write, the migration makes it partial and the filters
// find the same records.
func TestMigration0016(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ladder.db")
	w := openPath(t, path)
	storetest.AuditPlanRecords(t, w)
	queries := storetest.StepFilterQueries()
	want := storetest.ListEach(t, w, queries)
	w.Close()
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	for _, stmt := range []string{
		`DROP INDEX audit_by_workspace_step`,
		`CREATE INDEX audit_by_workspace_step ON audit (workspace, step, queue, seq)`,
		`DELETE FROM schema_migrations WHERE version >= 16`,
	} {
		if _, err := raw.Exec(stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	ro, err := Open(t.Context(), path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	storetest.SameListings(t, ro, queries, want, "read-only before 0016")
	if got := sqlitePlan(t, ro.readers, queries[1]); !strings.Contains(got, "USING INDEX audit_by_workspace_step (") {
		t.Errorf("read-only before 0016: plan %q, want the full step index", got)
	}
	ro.Close()

	s := openPath(t, path)
	defer s.Close()
	storetest.SameListings(t, s, queries, want, "after 0016")
	var def string
	if err := raw.QueryRow(`SELECT sql FROM sqlite_schema WHERE name = 'audit_by_workspace_step'`).Scan(&def); err != nil || !strings.HasSuffix(def, "WHERE step <> ''") {
		t.Errorf("audit_by_workspace_step after 0016: %q, %v; want the partial index", def, err)
	}
}

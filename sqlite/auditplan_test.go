package sqlite

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

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

// TestAuditKindAcrossWorkspacesPlan checks that a kind filter across
// every workspace reads audit_by_workspace_kind once per workspace head
// (the correlated subquery of auditListQuery), the index migration 0017
// left it (it dropped audit_by_kind), and never walks the log: a rare kind
// in a large log would otherwise read every record.
func TestAuditKindAcrossWorkspacesPlan(t *testing.T) {
	s := openPath(t, filepath.Join(t.TempDir(), "ladder.db"))
	defer s.Close()
	storetest.AuditPlanRecords(t, s)
	var n int
	if err := s.readers.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM sqlite_schema WHERE name = 'audit_by_kind'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("audit_by_kind: %d, %v; migration 0017 drops it", n, err)
	}
	for _, q := range []ladder.AuditQuery{
		{Kind: ladder.AuditApproval},
		{Kind: ladder.AuditApproval, AfterSeq: 100, Limit: 5},
		{Kind: ladder.AuditApproval, Desc: true},
		{Kind: ladder.AuditApproval, Desc: true, BeforeSeq: 3000, Limit: 5},
		{Kind: ladder.AuditApproval, Actor: "k1", Step: "s5", Desc: true},
	} {
		if !kindAcrossWorkspaces(q) {
			t.Fatalf("%s is not a kind across workspaces", describeQuery(q))
		}
		got := sqlitePlan(t, s.readers, q)
		for _, want := range []string{"SCAN h", "INDEX audit_by_workspace_kind (workspace=? AND kind=?", "SEARCH audit USING INTEGER PRIMARY KEY (rowid=?)"} {
			if !strings.Contains(got, want) {
				t.Errorf("ListAudit %s: plan %q, want %q in it", describeQuery(q), got, want)
			}
		}
		if strings.Contains(got, "SCAN audit") || strings.Contains(got, "SCAN c") {
			t.Errorf("ListAudit %s: plan %q walks the log", describeQuery(q), got)
		}
		recs, err := s.ListAudit(t.Context(), q)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == 0 && q.Step == "" {
			t.Errorf("ListAudit %s: no records; the plan data has approvals in both workspaces", describeQuery(q))
		}
	}
}

// sqlitePlan is SQLite's plan for ListAudit's query of q, its details on
// one line.
func sqlitePlan(t *testing.T, db *sql.DB, q ladder.AuditQuery) string {
	t.Helper()
	query, args := auditListQuery(q, kindAcrossWorkspaces(q))
	return sqlitePlanOf(t, db, query, args)
}

// sqlitePlanOf is SQLite's plan for query, its details on one line.
func sqlitePlanOf(t *testing.T, db *sql.DB, query string, args []any) string {
	t.Helper()
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
	for _, stmt := range slices.Concat(undo0018, []string{
		`DROP INDEX audit_by_workspace_step`,
		`CREATE INDEX audit_by_workspace_step ON audit (workspace, step, queue, seq)`,
		`CREATE INDEX audit_by_kind ON audit (kind, seq)`,
		`DELETE FROM schema_migrations WHERE version >= 16`,
	}) {
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

// TestAuditKindAcrossWorkspacesIsOneSnapshot lists a kind across five
// workspaces while records of that kind are appended to each in turn, one
// commit at a time. Every record is of the kind, so a page after seq x is
// x+1, x+2, … with no gap: a workspace read before a commit and another
// read after it would leave one (a record the next page's cursor is
// already past), which auditListQuery's one statement rules out.
func TestAuditKindAcrossWorkspacesIsOneSnapshot(t *testing.T) {
	s := openPath(t, filepath.Join(t.TempDir(), "ladder.db"))
	defer s.Close()
	const appends = 400
	done := make(chan error, 1)
	go func() {
		for i := range appends {
			e, err := ladder.NewAuditEntry(fmt.Sprint("ws-", i%5), "k1", ladder.AuditReview, "x", time.Now(), nil)
			if err == nil {
				_, err = s.AppendAudit(t.Context(), e)
			}
			if err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	pages, grown := 0, 0
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			if pages < 50 || grown < 10 {
				t.Fatalf("%d pages read during the appends, %d of them with records appended after the head was read; too few to tell", pages, grown)
			}
			return
		default:
		}
		head, err := s.ListAudit(t.Context(), ladder.AuditQuery{Desc: true, Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(head) == 0 {
			continue
		}
		after := max(head[0].Seq-12, 0)
		recs, err := s.ListAudit(t.Context(), ladder.AuditQuery{Kind: ladder.AuditReview, AfterSeq: after, Limit: 20})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for i, r := range recs {
			if r.Seq != after+int64(i)+1 {
				t.Fatalf("page after %d: record %d at position %d, want %d: the page skipped a record", after, r.Seq, i, after+int64(i)+1)
			}
		}
		if len(recs) > 12 {
			grown++
		}
	}
}

// BenchmarkAuditKindAcrossWorkspaces lists the newest page of one kind
// across every workspace (an admin's audit page filtered by kind) in a
// log of 60,000 records over 200 workspaces: a common kind (routes, one
// record in two), a rare one (approvals, one in 500, so a page spans most
// of the log) and one no record has. Since migration 0017 each page reads
// every workspace's index range once (auditListQuery):
//
//	go test ./sqlite -run '^$' -bench BenchmarkAuditKindAcrossWorkspaces -benchmem
func BenchmarkAuditKindAcrossWorkspaces(b *testing.B) {
	s := openPath(b, filepath.Join(b.TempDir(), "ladder.db"))
	defer s.Close()
	const records, workspaces = 60000, 200
	entries := make([]ladder.AuditEntry, 0, 1000)
	for i := range records {
		kind := ladder.AuditCall
		switch {
		case i%500 == 7:
			kind = ladder.AuditApproval
		case i%2 == 0:
			kind = ladder.AuditRoute
		}
		e, err := ladder.NewAuditEntry(fmt.Sprint("ws-", i%workspaces), "k1", kind, "x", t0, map[string]any{"i": i})
		if err != nil {
			b.Fatal(err)
		}
		if entries = append(entries, e); len(entries) == cap(entries) {
			if _, err := s.AppendAudit(b.Context(), entries...); err != nil {
				b.Fatal(err)
			}
			entries = entries[:0]
		}
	}
	for _, kind := range []string{ladder.AuditRoute, ladder.AuditApproval, ladder.AuditKeyCreate} {
		b.Run(kind, func(b *testing.B) {
			for b.Loop() {
				if _, err := s.ListAudit(b.Context(), ladder.AuditQuery{Kind: kind, Desc: true, Limit: 50}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

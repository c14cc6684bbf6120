package postgres

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/storetest"
)

// TestAuditStepFilterPlans checks that ListAudit's step filters read the
// partial step index (migration 0016) in the generic plan, the one a
// prepared statement settles on: the planner cannot prove step = $1
// implies the index's step <> ”, so the query names that term itself. The
// records are as a server writes them: most name no step, one in ten one
// of many rare steps (auditPlanRecords).
func TestAuditStepFilterPlans(t *testing.T) {
	schema := newSchema(t)
	storetest.AuditPlanRecords(t, openTest(t, schema))
	conn := adminConn(t, schema)
	checkPartialStepIndex(t, conn, schema)
	for _, stmt := range []string{`ANALYZE audit`, `SET plan_cache_mode = force_generic_plan`} {
		if _, err := conn.Exec(t.Context(), stmt); err != nil {
			t.Fatal(err)
		}
	}
	for i, q := range []ladder.AuditQuery{
		{Workspace: "ws-a", Step: "s0"},
		{Workspace: "ws-a", Step: "s0", Desc: true},
		{Workspace: "ws-a", Step: "s0", Desc: true, BeforeSeq: 2000},
		{Workspace: "ws-a", Queue: "bills", Step: "s0"},
		{Workspace: "ws-a", Queue: "bills", Step: "s0", Desc: true, BeforeSeq: 2000},
		{Workspace: "ws-a", Queue: "bills", Step: "s0", AfterSeq: 100, Limit: 5},
	} {
		if plan := genericPlan(t, conn, fmt.Sprint("list_", i), q); !strings.Contains(plan, " on audit_by_workspace_step ") && !strings.Contains(plan, " using audit_by_workspace_step ") {
			t.Errorf("ListAudit workspace=%q queue=%q step=%q desc=%v before=%d after=%d: generic plan\n%s\nreads no audit_by_workspace_step",
				q.Workspace, q.Queue, q.Step, q.Desc, q.BeforeSeq, q.AfterSeq, plan)
		}
	}
}

// genericPlan is the plan PostgreSQL settles on for ListAudit's statement of
// q when prepared (the session forces generic plans), as name.
func genericPlan(t *testing.T, conn *pgx.Conn, name string, q ladder.AuditQuery) string {
	t.Helper()
	query, args := auditListQuery(q)
	if _, err := conn.Exec(t.Context(), fmt.Sprintf(`PREPARE %s AS %s`, name, query)); err != nil {
		t.Fatal(err)
	}
	params := make([]string, len(args))
	for j := range args {
		params[j] = fmt.Sprintf("$%d", j+1)
	}
	// The simple protocol sends the values inline: EXPLAIN EXECUTE
	// takes no parameters of its own.
	rows, err := conn.Query(t.Context(), fmt.Sprintf(`EXPLAIN EXECUTE %s(%s)`, name, strings.Join(params, ", ")),
		append([]any{pgx.QueryExecModeSimpleProtocol}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

// TestAuditKindAcrossWorkspacesPlan checks the plans of a kind filter
// across every workspace, now that migration 0017 dropped audit_by_kind:
// the LATERAL join of auditListQuery reads audit_by_workspace_kind once per
// workspace head for a rare kind, planned with its values as ListAudit
// sends it (the unnamed statement). The generic plan a prepared statement
// would settle on walks the log in seq order as if every kind were common
// (on this data; the test logs it if that changes), which is why ListAudit
// does not prepare this one.
func TestAuditKindAcrossWorkspacesPlan(t *testing.T) {
	schema := newSchema(t)
	s := openTest(t, schema)
	storetest.AuditPlanRecords(t, s)
	conn := adminConn(t, schema)
	var n int
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_indexes WHERE schemaname = $1 AND indexname = 'audit_by_kind'`, schema).Scan(&n); err != nil || n != 0 {
		t.Errorf("audit_by_kind: %d, %v; migration 0017 drops it", n, err)
	}
	for _, stmt := range []string{`ANALYZE audit`, `ANALYZE audit_ws_head`} {
		if _, err := conn.Exec(t.Context(), stmt); err != nil {
			t.Fatal(err)
		}
	}
	queries := []ladder.AuditQuery{
		{Kind: ladder.AuditApproval},
		{Kind: ladder.AuditApproval, AfterSeq: 100, Limit: 5},
		{Kind: ladder.AuditApproval, Desc: true},
		{Kind: ladder.AuditApproval, Desc: true, BeforeSeq: 3000, Limit: 5},
		{Kind: ladder.AuditApproval, Actor: "k1", Desc: true},
	}
	for _, q := range queries {
		if !kindAcrossWorkspaces(q) {
			t.Fatalf("%+v is not a kind across workspaces", q)
		}
		query, args := auditListQuery(q)
		// The simple protocol sends the values inline, so the plan is
		// made for them, as for the unnamed statement.
		rows, err := conn.Query(t.Context(), `EXPLAIN `+query, append([]any{pgx.QueryExecModeSimpleProtocol}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		plan := strings.Join(lines, "\n")
		if !strings.Contains(plan, " on audit_by_workspace_kind ") && !strings.Contains(plan, " using audit_by_workspace_kind ") || !strings.Contains(plan, " on audit_ws_head ") {
			t.Errorf("ListAudit kind=%q actor=%q desc=%v before=%d after=%d: plan\n%s\nwant audit_by_workspace_kind read per workspace head",
				q.Kind, q.Actor, q.Desc, q.BeforeSeq, q.AfterSeq, plan)
		}
		recs, err := s.ListAudit(t.Context(), q)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == 0 {
			t.Errorf("ListAudit kind=%q: no records; the plan data has approvals in both workspaces", q.Kind)
		}
	}
	if _, err := conn.Exec(t.Context(), `SET plan_cache_mode = force_generic_plan`); err != nil {
		t.Fatal(err)
	}
	if plan := genericPlan(t, conn, "kind_generic", queries[0]); strings.Contains(plan, "audit_by_workspace_kind") {
		t.Logf("the generic plan now reads audit_by_workspace_kind; ListAudit could prepare this statement again:\n%s", plan)
	}
}

// checkPartialStepIndex fails t unless schema's step index is migration
// 0016's partial one.
func checkPartialStepIndex(t *testing.T, conn *pgx.Conn, schema string) {
	t.Helper()
	var def string
	if err := conn.QueryRow(t.Context(), `SELECT indexdef FROM pg_indexes WHERE schemaname = $1 AND indexname = 'audit_by_workspace_step'`, schema).Scan(&def); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(def, "WHERE (step <> ''::text)") {
		t.Errorf("audit_by_workspace_step is %q, want the partial index of migration 0016", def)
	}
}

// TestMigration0016 opens a schema whose step index still holds every
// record (before migration 0016): read-only, its step and queue filters
// read it as they did; read-write, the migration makes it partial and the
// filters find the same records.
func TestMigration0016(t *testing.T) {
	schema := newSchema(t)
	s := openTest(t, schema)
	storetest.AuditPlanRecords(t, s)
	queries := storetest.StepFilterQueries()
	want := storetest.ListEach(t, s, queries)
	s.Close()
	conn := adminConn(t, schema)
	for _, stmt := range slices.Concat(undo0018, []string{
		`DROP INDEX audit_by_workspace_step`,
		`CREATE INDEX audit_by_workspace_step ON audit (workspace, step, queue, seq)`,
		`CREATE INDEX audit_by_kind ON audit (kind, seq)`,
		`DELETE FROM schema_migrations WHERE version >= 16`,
	}) {
		if _, err := conn.Exec(t.Context(), stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	ro, err := Open(t.Context(), testDSN(t), Options{Schema: schema, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	storetest.SameListings(t, ro, queries, want, "read-only before 0016")
	ro.Close()
	s = openTest(t, schema)
	storetest.SameListings(t, s, queries, want, "after 0016")
	checkPartialStepIndex(t, conn, schema)
}

// BenchmarkStepIndexWAL inserts b.N audit rows in one statement and
// reports the WAL PostgreSQL writes for them (EXPLAIN (ANALYZE, WAL)):
// heap and every index, with the step index as migration 0011 made it
// (full) and as 0016 does (partial), for rows that name no step and rows
// that do. Run with -benchtime=2000x: b.N rows go into one statement.
func BenchmarkStepIndexWAL(b *testing.B) {
	for _, index := range []string{"full", "partial"} {
		for _, step := range []string{"", "post_tms"} {
			name := "index=" + index + "/records=no-step"
			if step != "" {
				name = "index=" + index + "/records=step"
			}
			b.Run(name, func(b *testing.B) {
				schema := newSchema(b)
				openTest(b, schema).Close()
				conn := adminConn(b, schema)
				if index == "full" {
					for _, stmt := range []string{`DROP INDEX audit_by_workspace_step`, `CREATE INDEX audit_by_workspace_step ON audit (workspace, step, queue, seq)`} {
						if _, err := conn.Exec(b.Context(), stmt); err != nil {
							b.Fatal(err)
						}
					}
				}
				queue := ""
				if step != "" {
					queue = "bills"
				}
				b.ResetTimer()
				var out []byte
				if err := conn.QueryRow(b.Context(), `EXPLAIN (ANALYZE, WAL, FORMAT JSON)
					INSERT INTO audit (seq, workspace, actor, kind, subject, at, data, prev_hash, hash, queue, step, ws_idx)
					SELECT g, 'ws', 'k1', 'call', 'cl_1', now(), '\x7b7d', 'p', 'h', $1, $2, g FROM generate_series(1, $3::bigint) AS g`,
					queue, step, b.N).Scan(&out); err != nil {
					b.Fatal(err)
				}
				var plan []struct {
					Plan struct {
						Records float64 `json:"WAL Records"`
						Bytes   float64 `json:"WAL Bytes"`
					} `json:"Plan"`
				}
				if err := json.Unmarshal(out, &plan); err != nil || len(plan) != 1 {
					b.Fatalf("EXPLAIN: %s, %v", out, err)
				}
				b.ReportMetric(plan[0].Plan.Records/float64(b.N), "WAL-records/row")
				b.ReportMetric(plan[0].Plan.Bytes/float64(b.N), "WAL-bytes/row")
			})
		}
	}
}

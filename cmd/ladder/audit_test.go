package main

import (
	"bufio"
	"database/sql"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/internal/testenv"
)

// auditServer starts a seeded server on a SQLite file with some routes of
// two steps, and returns it and the file.
func auditServer(t *testing.T) (*testenv.Env, string) {
	t.Helper()
	db := filepath.Join(t.TempDir(), "ladder.db")
	e := testenv.StartWith(t, "", testenv.Options{Seed: true, DBPath: db})
	for i := range 12 {
		step := "post_tms"
		if i%3 == 0 {
			step = "read_bill"
		}
		if res := e.Do("POST", "/v1/route", e.Keys["vantrow-bills/agent"], map[string]any{"queue": "bills", "step": step, "item": fmt.Sprintf("CLI-%d", i)}); res.Status != http.StatusOK {
			t.Fatalf("route: %d %s", res.Status, res.Raw)
		}
	}
	return e, db
}

// TestAuditCLIServer runs ladder audit list|verify|export against a
// server, with flags and with LADDER_SERVER/LADDER_KEY.
func TestAuditCLIServer(t *testing.T) {
	e, _ := auditServer(t)
	human := map[string]string{"LADDER_SERVER": e.Server.URL, "LADDER_KEY": e.Keys["vantrow-bills/human"]}

	out, _, err := runCLI(t, human, "audit", "list", "--step", "bills/post_tms", "--kind", "route", "--limit", "3", "--json")
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	var page ladder.AuditPage
	if err := json.Unmarshal([]byte(out), &page); err != nil {
		t.Fatalf("list --json: %v\n%s", err, out)
	}
	if len(page.Records) != 3 || page.NextCursor == "" {
		t.Fatalf("list page: %d records, cursor %q", len(page.Records), page.NextCursor)
	}
	for _, r := range page.Records {
		if q, s := ladder.AuditStepOf(r.Data); r.Workspace != "vantrow-bills" || r.Kind != ladder.AuditRoute || q != "bills" || s != "post_tms" {
			t.Errorf("record %d does not match the filter: %s %s %s", r.Seq, r.Workspace, r.Kind, r.Data)
		}
	}
	out, _, err = runCLI(t, human, "audit", "list", "--step", "bills/post_tms", "--kind", "route", "--limit", "3", "--cursor", page.NextCursor)
	if err != nil || !strings.Contains(out, "SEQ") || strings.Count(out, "bills/post_tms") != 3 {
		t.Errorf("list table, second page: %v\n%s", err, out)
	}

	// The same through flags, not the environment.
	out, _, err = runCLI(t, nil, "audit", "verify", "--server", e.Server.URL, "--key", e.Keys["vantrow-bills/admin"])
	if err != nil || !strings.Contains(out, "audit chain intact") {
		t.Errorf("verify: %v\n%s", err, out)
	}
	out, _, err = runCLI(t, human, "audit", "export", "--format", "csv", "--step", "read_bill", "--kind", "route")
	if err != nil {
		t.Fatalf("export: %v", err)
	}
	rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil || len(rows) != 5 {
		t.Fatalf("csv export: %d rows, %v\n%s", len(rows), err, out)
	}
	if diff := cmp.Diff(ladder.AuditCSVHeader(), rows[0]); diff != "" {
		t.Errorf("csv header (-want +got):\n%s", diff)
	}
	for _, row := range rows[1:] {
		if row[2] != "vantrow-bills" || row[6] != "bills/read_bill" {
			t.Errorf("csv row %v", row)
		}
	}

	// Refusals print their name and exit 3.
	agent := map[string]string{"LADDER_SERVER": e.Server.URL, "LADDER_KEY": e.Keys["vantrow-bills/agent"]}
	if _, _, err := runCLI(t, agent, "audit", "list"); exitCode(err) != 3 || !strings.Contains(err.Error(), "AGENT_KEY_REFUSED") {
		t.Errorf("agent key: %v", err)
	}
	if _, _, err := runCLI(t, human, "audit", "list", "--since", "yesterday"); exitCode(err) != 3 || !strings.Contains(err.Error(), "INVALID_ARGUMENT") || !strings.Contains(err.Error(), "2026-09-01") {
		t.Errorf("bad since: %v", err)
	}
}

// TestAuditCLILocal reads the server's database file read-only while the
// server runs: a full export is the whole chain (it re-verifies record by
// record), filters work, a tampered record fails verify with exit 1, and
// a missing file is named and never created.
func TestAuditCLILocal(t *testing.T) {
	e, db := auditServer(t)
	out, _, err := runCLI(t, nil, "audit", "export", "--db", db)
	if err != nil {
		t.Fatalf("export: %v", err)
	}
	var v ladder.ChainVerifier
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 4<<20)
	workspaces := map[string]bool{}
	for sc.Scan() {
		var r ladder.AuditRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		if err := v.Check(r); err != nil {
			t.Fatalf("the exported chain does not verify: %v", err)
		}
		workspaces[r.Workspace] = true
	}
	total, err := ladder.VerifyAudit(t.Context(), e.Store)
	if err != nil || v.Count() != total || len(workspaces) < 3 {
		t.Errorf("export: %d records of %d workspaces, the store holds %d (%v)", v.Count(), len(workspaces), total, err)
	}

	out, _, err = runCLI(t, nil, "audit", "list", "--db", db, "--workspace", "vantrow-bills", "--step", "read_bill", "--kind", "route", "--json")
	var page ladder.AuditPage
	if err != nil || json.Unmarshal([]byte(out), &page) != nil || len(page.Records) != 4 {
		t.Errorf("local list: %v, %d records\n%s", err, len(page.Records), out)
	}
	if out, _, err := runCLI(t, nil, "audit", "verify", "--db", db, "--json"); err != nil || !strings.Contains(out, `"intact": true`) {
		t.Errorf("local verify: %v\n%s", err, out)
	}

	// --db with --key is ambiguous.
	if _, _, err := runCLI(t, nil, "audit", "list", "--db", db, "--key", "x"); exitCode(err) != 3 {
		t.Errorf("--db with --key: %v", err)
	}

	// Tamper with one record: local verify exits 1 naming it, as the
	// server's verify does.
	raw, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`DROP TRIGGER audit_no_update; UPDATE audit SET actor = 'mallory' WHERE seq = 7`); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	if _, _, err := runCLI(t, nil, "audit", "verify", "--db", db); exitCode(err) != 1 || !strings.Contains(err.Error(), "audit record 7") || !strings.Contains(err.Error(), "after 6 good records") {
		t.Errorf("tampered, local: exit %d, %v", exitCode(err), err)
	}
	human := map[string]string{"LADDER_SERVER": e.Server.URL, "LADDER_KEY": e.Keys["vantrow-bills/human"]}
	if _, _, err := runCLI(t, human, "audit", "verify"); exitCode(err) != 1 || !strings.Contains(err.Error(), "audit record 7") {
		t.Errorf("tampered, server: exit %d, %v", exitCode(err), err)
	}
}

// TestAuditCLIReadOnlyAndHelp checks that no audit command creates a
// database: a missing file is an error naming it, and -h prints the usage,
// exits 0 and touches nothing.
func TestAuditCLIReadOnlyAndHelp(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.db")
	for _, sub := range []string{"list", "verify", "export"} {
		_, _, err := runCLI(t, nil, "audit", sub, "--db", missing)
		if exitCode(err) != 3 || !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), "no such file") {
			t.Errorf("audit %s of a missing file: %v", sub, err)
		}
		out, _, err := runCLI(t, nil, "audit", sub, "-h", "--db", missing)
		if err != nil || !strings.Contains(out, "usage: ladder audit "+sub) || !strings.Contains(out, "-db") {
			t.Errorf("audit %s -h: %v\n%s", sub, err, out)
		}
	}
	out, _, err := runCLI(t, nil, "audit", "-h")
	if err != nil || !strings.Contains(out, "usage: ladder audit list|verify|export") {
		t.Errorf("audit -h: %v\n%s", err, out)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("audit commands left %d files behind", len(entries))
	}
	if _, _, err := runCLI(t, nil, "audit", "prune"); exitCode(err) != 3 {
		t.Errorf("unknown subcommand: %v", err)
	}
}

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ladderhq/ladder/internal/testenv"
)

const importCLIConfig = `
workspaces:
  - id: acme
    queues:
      - id: pay
        steps:
          - id: pay_invoice
            name: Pay the invoice
            lane: shadow
            rules: {propose_min_weeks: 1, propose_min_n: 20, propose_lower: 0.8, auto_min_weeks: 4, auto_min_n: 300, auto_lower: 0.95}
`

// TestImportCLI: ladder import loads a CSV history into a database and
// prints what it did per step; a file with bad rows prints them by line,
// exits 3 and imports nothing.
func TestImportCLI(t *testing.T) {
	dir := t.TempDir()
	cfg, db := filepath.Join(dir, "ladder.yaml"), filepath.Join(dir, "ladder.db")
	if err := os.WriteFile(cfg, []byte(importCLIConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	// 30 agreements over ten days of a step that has no record yet: it is
	// taken to be in shadow since the first row, so the week in shadow is
	// there and the step moves to propose.
	start := time.Date(2026, 6, 1, 9, 0, 0, 0, time.UTC)
	var b strings.Builder
	b.WriteString("type,at,step,item,lane,verdict,handled_by,ok\n")
	for i := range 30 {
		fmt.Fprintf(&b, "review,%s,pay_invoice,INV-%d,shadow,agree,,\n", start.Add(time.Duration(i)*8*time.Hour).Format(time.RFC3339), i)
	}
	fmt.Fprintf(&b, "outcome,%s,pay_invoice,INV-1,,,person,true\n", start.Add(24*time.Hour).Format(time.RFC3339))
	file := filepath.Join(dir, "history.csv")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, err := runCLI(t, nil, "import", "--config", cfg, "--db", db, file)
	if err != nil {
		t.Fatalf("import: %v\n%s", err, stderr)
	}
	want := "pay/pay_invoice: 30 reviews, 0 audits, 1 outcomes; lane changes: shadow→propose on 2026-06-08; now in propose.\n"
	if !strings.HasPrefix(out, "Imported 31 rows into acme") || !strings.HasSuffix(out, want) {
		t.Errorf("summary:\n%s\nwant it to end with:\n%s", out, want)
	}

	bad := filepath.Join(dir, "bad.jsonl")
	rows := `{"type":"review","at":"2026-07-01T09:00:00Z","step":"pay_invoice","item":"X","lane":"shadow","verdict":"agree"}
{"type":"review","at":"2026-07-01T10:00:00Z","step":"pay_invoice","item":"Y","lane":"auto","verdict":"agree"}
{"type":"outcome","at":"2026-07-01T11:00:00Z","step":"pay_invoice","item":"Y","handled_by":"robot"}
`
	if err := os.WriteFile(bad, []byte(rows), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, err = runCLI(t, nil, "import", "--config", cfg, "--db", db, bad)
	if exitCode(err) != 3 {
		t.Fatalf("bad rows: exit %d (%v)", exitCode(err), err)
	}
	for _, w := range []string{bad + ":2: lane: ", bad + ":3: handled_by: ", bad + ":3: ok: "} {
		if !strings.Contains(stderr, w) {
			t.Errorf("stderr lacks %q:\n%s", w, stderr)
		}
	}
	// Nothing of the bad file was written: importing its good row alone
	// still works (it is newer than the history).
	good := filepath.Join(dir, "good.jsonl")
	if err := os.WriteFile(good, []byte(strings.SplitN(rows, "\n", 2)[0]+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, err = runCLI(t, nil, "import", "--config", cfg, "--db", db, good, "--format", "jsonl")
	if err != nil || !strings.Contains(out, "pay/pay_invoice: 1 reviews") {
		t.Fatalf("good row after the refusal: %v\n%s%s", err, out, stderr)
	}
}

// TestImportCLIServer: with a key and no --db, ladder import sends the file
// to the server (POST /v1/import) and prints the same summary, or the
// server's bad rows by line.
func TestImportCLIServer(t *testing.T) {
	e := testenv.Start(t, "")
	dir := t.TempDir()
	file := filepath.Join(dir, "h.jsonl")
	good := `{"type":"review","at":"2026-09-02T10:00:00Z","step":"rate_check","item":"BILL-1","lane":"propose","verdict":"agree"}` + "\n"
	if err := os.WriteFile(file, []byte(good+`{"type":"review","at":"2026-09-02T11:00:00Z","step":"rate_check","item":"BILL-2","lane":"propose","verdict":"meh"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"import", "--server", e.Server.URL, "--key", e.Keys["vantrow-bills/admin"], file}
	_, stderr, err := runCLI(t, nil, args...)
	if exitCode(err) != 3 || !strings.Contains(stderr, file+":2: verdict: ") {
		t.Fatalf("bad row over REST: exit %d\n%s", exitCode(err), stderr)
	}
	if err := os.WriteFile(file, []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, err := runCLI(t, nil, args...)
	if err != nil || !strings.Contains(out, "bills/rate_check: 1 reviews, 0 audits, 0 outcomes; no lane changes; now in propose.") {
		t.Fatalf("import over REST: %v\n%s%s", err, out, stderr)
	}
}

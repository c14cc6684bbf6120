package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/ladderhq/ladder/config"
)

// runCLI runs the ladder command in-process and returns its output.
func runCLI(t *testing.T, env map[string]string, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	getenv := func(k string) string { return env[k] }
	err := run(context.Background(), args, getenv, strings.NewReader(""), &out, &errb)
	return out.String(), errb.String(), err
}

func exitCode(err error) int {
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if err != nil {
		return 3
	}
	return 0
}

func writeDemoConfig(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "ladder.yaml")
	if err := os.WriteFile(p, config.Demo(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestKeysAndAuditCLI(t *testing.T) {
	cfg := writeDemoConfig(t)
	db := filepath.Join(t.TempDir(), "ladder.db")
	out, _, err := runCLI(t, nil, "keys", "create", "--config", cfg, "--db", db, "--workspace", "vantrow-bills", "--kind", "agent", "--name", "billing", "--json")
	if err != nil {
		t.Fatalf("keys create: %v", err)
	}
	var created struct{ ID, Token string }
	if err := json.Unmarshal([]byte(out), &created); err != nil || !strings.HasPrefix(created.Token, "ldr_"+created.ID+"_") {
		t.Fatalf("keys create output %q", out)
	}
	if _, _, err := runCLI(t, nil, "keys", "create", "--config", cfg, "--db", db, "--workspace", "nope", "--kind", "agent"); exitCode(err) != 3 || !strings.Contains(err.Error(), "INVALID_ARGUMENT") {
		t.Fatalf("unknown workspace: %v", err)
	}
	if _, _, err := runCLI(t, nil, "keys", "create", "--config", cfg, "--db", db, "--workspace", "vantrow-bills", "--kind", "robot"); exitCode(err) != 3 {
		t.Fatalf("bad kind: %v", err)
	}
	out, _, err = runCLI(t, nil, "keys", "list", "--config", cfg, "--db", db)
	if err != nil || !strings.Contains(out, created.ID) || !strings.Contains(out, "active") || strings.Contains(out, created.Token) {
		t.Fatalf("keys list: %v\n%s", err, out)
	}
	if _, _, err := runCLI(t, nil, "keys", "revoke", "--config", cfg, "--db", db, created.ID); err != nil {
		t.Fatalf("revoke: %v", err)
	}
	out, _, _ = runCLI(t, nil, "keys", "list", "--config", cfg, "--db", db)
	if !strings.Contains(out, "revoked") {
		t.Fatalf("after revoke: %s", out)
	}

	out, _, err = runCLI(t, nil, "audit", "verify", "--db", db)
	if err != nil || !strings.Contains(out, "audit chain intact: 2 records verified") {
		t.Fatalf("audit verify: %v %s", err, out)
	}

	// Alter a stored record as someone with write access to the file would
	// (dropping the append-only trigger first): verify must fail and name it.
	raw, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`DROP TRIGGER audit_no_update; UPDATE audit SET actor = 'mallory' WHERE seq = 1`); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	_, _, err = runCLI(t, nil, "audit", "verify", "--db", db)
	if exitCode(err) != 1 || !strings.Contains(err.Error(), "audit record 1") {
		t.Fatalf("tampered log: exit %d, %v", exitCode(err), err)
	}
}

func TestStartupRefusals(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("workspaces:\n  - id: w\n    queues:\n      - id: q\n        steps:\n          - id: s\n            name: S\n            lane: autp\n"), 0o644)
	_, _, err := runCLI(t, nil, "serve", "--config", bad, "--db", filepath.Join(t.TempDir(), "x.db"), "--addr", "127.0.0.1:0")
	if err == nil || !strings.Contains(err.Error(), "bad.yaml:8") || !strings.Contains(err.Error(), "lane") {
		t.Fatalf("malformed config: %v", err)
	}
	cfg := writeDemoConfig(t)
	_, _, err = runCLI(t, nil, "serve", "--config", cfg, "--db", "/nonexistent-dir/sub/ladder.db", "--addr", "127.0.0.1:0")
	if err == nil || !strings.Contains(err.Error(), "/nonexistent-dir/sub/ladder.db") {
		t.Fatalf("unopenable database: %v", err)
	}
	if _, _, err := runCLI(t, nil, "frobnicate"); exitCode(err) != 3 {
		t.Fatalf("unknown command: %v", err)
	}
}

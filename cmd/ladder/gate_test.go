package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ladderhq/ladder/internal/testenv"
)

// runCLIStdin is runCLI with stdin.
func runCLIStdin(t *testing.T, env map[string]string, stdin string, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(context.Background(), args, func(k string) string { return env[k] }, strings.NewReader(stdin), &out, &errb)
	return out.String(), errb.String(), err
}

// TestGateCLI: ladder gate functions|authorize|history against a server,
// with authorize's exit codes PASS 0, ESCALATE 1, BYPASS_TO_HUMAN 2, error 3.
func TestGateCLI(t *testing.T) {
	e := testenv.Start(t, "")
	agent := map[string]string{"LADDER_SERVER": e.Server.URL, "LADDER_KEY": e.Keys["iia-gate/agent"]}

	out, _, err := runCLI(t, agent, "gate", "functions")
	if err != nil || !strings.Contains(out, "Gate cases: ai_investment.") || !strings.Contains(out, "score_invest_governance") || !strings.Contains(out, "filing_license_verified") {
		t.Fatalf("gate functions: %v\n%s", err, out)
	}
	out, _, err = runCLI(t, agent, "gate", "functions", "--case", "ai_investment", "--json")
	var v struct {
		CaseIDs []string `json:"case_ids"`
	}
	if err != nil || json.Unmarshal([]byte(out), &v) != nil || len(v.CaseIDs) != 1 {
		t.Fatalf("gate functions --json: %v\n%s", err, out)
	}

	pass := `{"filing_license_verified": true, "data_compliance_verified": true, "safety_certified": true, "controllability_data_present": true,
		"privacy_compliance_verified": true, "compliance_before_operations": true, "evidence_source_verified": true}`
	file := filepath.Join(t.TempDir(), "evidence.json")
	if err := os.WriteFile(file, []byte(pass), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		stdin    string
		args     []string
		code     int
		contains string
	}{
		{"PASS from a file", "", []string{"--case", "ai_investment", "--fn", "score_invest_governance", "--evidence", file}, 0, "gate_state PASS"},
		{"ESCALATE from stdin", `{"safety_certified": true}`, []string{"--case", "ai_investment", "--fn", "score_invest_governance", "--evidence", "-"}, 1, "gate_state ESCALATE"},
		{"BYPASS_TO_HUMAN", `{}`, []string{"--case", "ai_investment", "--fn", "team_capability", "--evidence", "-"}, 2, "BYPASS_TO_HUMAN"},
		{"unknown case", `{}`, []string{"--case", "nope", "--fn", "score_invest_governance", "--evidence", "-"}, 3, "UNKNOWN_CASE"},
		{"bad evidence", `{"safety_certified": "yes"}`, []string{"--case", "ai_investment", "--fn", "score_invest_governance", "--evidence", "-"}, 3, "EVIDENCE_INVALID"},
		{"evidence not JSON", `yes`, []string{"--case", "ai_investment", "--fn", "score_invest_governance", "--evidence", "-"}, 3, "not a JSON object"},
		{"missing flag", ``, []string{"--case", "ai_investment"}, 3, "usage"},
	}
	for _, tt := range tests {
		out, _, err := runCLIStdin(t, agent, tt.stdin, append([]string{"gate", "authorize"}, tt.args...)...)
		if got := exitCode(err); got != tt.code {
			t.Errorf("%s: exit %d, want %d (%v)\n%s", tt.name, got, tt.code, err, out)
		}
		msg := out
		if err != nil {
			msg += err.Error()
		}
		if !strings.Contains(msg, tt.contains) {
			t.Errorf("%s: output lacks %q:\n%s", tt.name, tt.contains, msg)
		}
	}

	out, _, err = runCLI(t, agent, "gate", "history", "--limit", "1")
	if err != nil || !strings.Contains(out, "team_capability") || !strings.Contains(out, "More decisions: --cursor") {
		t.Fatalf("gate history: %v\n%s", err, out)
	}
	out, _, err = runCLI(t, agent, "gate", "history", "--all", "--limit", "1", "--json")
	var page struct {
		Decisions []map[string]any `json:"decisions"`
	}
	if err != nil || json.Unmarshal([]byte(out), &page) != nil || len(page.Decisions) != 3 {
		t.Fatalf("gate history --all: %v\n%s", err, out)
	}
	out, _, err = runCLI(t, agent, "gate", "history", "--state", "PASS")
	if err != nil || strings.Count(out, "PASS_ABOVE_THRESHOLD") != 1 {
		t.Fatalf("gate history --state PASS: %v\n%s", err, out)
	}
	if _, _, err := runCLI(t, agent, "gate", "history", "--cursor", "junk"); exitCode(err) != 3 || !strings.Contains(err.Error(), "BAD_CURSOR") {
		t.Fatalf("bad cursor: %v", err)
	}
	if _, _, err := runCLI(t, agent, "gate"); exitCode(err) != 3 {
		t.Fatalf("gate without a subcommand: %v", err)
	}
}

package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ladderhq/ladder/internal/testenv"
)

func TestRemoteCLI(t *testing.T) {
	e := testenv.StartWith(t, "", testenv.Options{Seed: true})
	agent := map[string]string{"LADDER_SERVER": e.Server.URL, "LADDER_KEY": e.Keys["vantrow-bills/agent"]}
	human := map[string]string{"LADDER_SERVER": e.Server.URL, "LADDER_KEY": e.Keys["vantrow-bills/human"]}

	out, _, err := runCLI(t, agent, "steps")
	if err != nil || !strings.Contains(out, "Runs alone: Read the bill; Post to the TMS.") {
		t.Fatalf("steps: %v\n%s", err, out)
	}
	out, _, err = runCLI(t, agent, "evidence", "Decide", "hold", "or", "release")
	if err != nil || !strings.HasPrefix(out, "Decide hold or release (bills/decide_hold) is in shadow.") || !strings.Contains(out, "2026-W") {
		t.Fatalf("evidence: %v\n%s", err, out)
	}
	out, _, err = runCLI(t, agent, "route", "post_tms", "BILL-9", "--json")
	var rt struct {
		ID       string `json:"route_id"`
		Decision string `json:"decision"`
	}
	if err != nil || json.Unmarshal([]byte(out), &rt) != nil || rt.Decision != "act_alone" {
		t.Fatalf("route: %v\n%s", err, out)
	}
	out, _, err = runCLI(t, human, "review", rt.ID, "--agree")
	if err != nil || !strings.Contains(out, "Recorded review") {
		t.Fatalf("review: %v\n%s", err, out)
	}
	_, _, err = runCLI(t, human, "review", rt.ID, "--disagree", "--severity", "2")
	if exitCode(err) != 3 || !strings.Contains(err.Error(), "ALREADY_REVIEWED") {
		t.Fatalf("second review: %v", err)
	}
	_, _, err = runCLI(t, agent, "evidence", "Check the fuel surcharge")
	if exitCode(err) != 3 || !strings.Contains(err.Error(), "STEP_NOT_FOUND") || !strings.Contains(err.Error(), "Rate check") {
		t.Fatalf("unknown step: %v", err)
	}
	_, _, err = runCLI(t, map[string]string{"LADDER_SERVER": e.Server.URL}, "steps")
	if exitCode(err) != 3 || !strings.Contains(err.Error(), "--key") {
		t.Fatalf("no key: %v", err)
	}
}

// TestServerFlagErrors: a --server without a scheme is a client-side error
// naming the flag and showing the URL to give (before, an INTERNAL refusal
// telling the user to ask the operator), and a server that does not answer
// is SERVER_UNREACHABLE naming its URL (before, UPSTREAM_FAILED, which
// means a capability's upstream).
func TestServerFlagErrors(t *testing.T) {
	_, _, err := runCLI(t, nil, "steps", "--server", "127.0.0.1:8080", "--key", "ldr_x")
	if exitCode(err) != 3 || err == nil || !strings.Contains(err.Error(), "--server") || !strings.Contains(err.Error(), "http://127.0.0.1:8080") || strings.Contains(err.Error(), "INTERNAL") {
		t.Errorf("--server without a scheme: %v", err)
	}
	down := "http://" + freeAddr(t)
	_, _, err = runCLI(t, nil, "steps", "--server", down, "--key", "ldr_x")
	if exitCode(err) != 3 || err == nil || !strings.Contains(err.Error(), "SERVER_UNREACHABLE") || !strings.Contains(err.Error(), down) || strings.Contains(err.Error(), "UPSTREAM_FAILED") {
		t.Errorf("unreachable server: %v", err)
	}
}

// TestCLIHintsNameCLICommands: a refusal printed by the CLI names CLI
// commands and flags in its hint, not the MCP tools or REST fields the
// service's hint names for the other surfaces.
func TestCLIHintsNameCLICommands(t *testing.T) {
	e := testenv.Start(t, "")
	agent := map[string]string{"LADDER_SERVER": e.Server.URL, "LADDER_KEY": e.Keys["vantrow-bills/agent"]}
	human := map[string]string{"LADDER_SERVER": e.Server.URL, "LADDER_KEY": e.Keys["vantrow-bills/human"]}
	_, _, err := runCLI(t, agent, "evidence", "no_such_step")
	if err == nil || !strings.Contains(err.Error(), "hint: ladder steps lists every step") || strings.Contains(err.Error(), "which_steps_run_alone") || strings.Contains(err.Error(), "/v1/") {
		t.Errorf("unknown step: %v", err)
	}
	out, _, err := runCLI(t, agent, "route", "post_tms", "B-1", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		RouteID string `json:"route_id"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.RouteID == "" {
		t.Fatalf("route: %v %s", err, out)
	}
	if _, _, err := runCLI(t, human, "review", r.RouteID, "--agree"); err != nil {
		t.Fatal(err)
	}
	_, _, err = runCLI(t, human, "review", r.RouteID, "--agree")
	if err == nil || !strings.Contains(err.Error(), "ALREADY_REVIEWED") || !strings.Contains(err.Error(), "--adjudication") || strings.Contains(err.Error(), `"adjudication"`) {
		t.Errorf("second review: %v", err)
	}
}

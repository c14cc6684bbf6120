package main

import (
	"encoding/json"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ladderhq/ladder/client"
	"github.com/ladderhq/ladder/internal/testenv"
)

func TestApprovalsCLI(t *testing.T) {
	e := testenv.Start(t, "")
	agent := client.New(e.Server.URL, e.Keys["partner-programs/agent"])
	human := map[string]string{"LADDER_SERVER": e.Server.URL, "LADDER_KEY": e.Keys["partner-programs/human"]}
	args := map[string]any{"program": "partner-2027", "relationship": "relationship:partner-2027:creator-1", "payload": map[string]any{"commission_id": "c-1"}}
	first, err := agent.CallCapability(t.Context(), "ticket6:approveCommission", args)
	if err != nil || first.Status != "approval_requested" {
		t.Fatalf("call: %+v %v", first, err)
	}
	args["payload"] = map[string]any{"commission_id": "c-2"}
	second, err := agent.CallCapability(t.Context(), "ticket6:approveCommission", args)
	if err != nil {
		t.Fatal(err)
	}

	out, _, err := runCLI(t, human, "approvals", "list")
	if err != nil || !strings.Contains(out, first.ApprovalID) || !strings.Contains(out, second.ApprovalID) {
		t.Fatalf("list: %v\n%s", err, out)
	}
	// A page of one says how to get the next page of the same list.
	out, _, err = runCLI(t, human, "approvals", "list", "--status", "pending", "--limit", "1")
	if err != nil || !strings.Contains(out, second.ApprovalID) || !strings.Contains(out, `More: ladder approvals list --status "pending" --limit 1 --cursor `) {
		t.Fatalf("first page: %v\n%s", err, out)
	}
	next := strings.Fields(out[strings.Index(out, "More: ")+len("More: "):])
	for i, f := range next { // as a shell would read it
		if u, err := strconv.Unquote(f); err == nil {
			next[i] = u
		}
	}
	if out, _, err = runCLI(t, human, next[1:]...); err != nil || !strings.Contains(out, first.ApprovalID) || strings.Contains(out, second.ApprovalID) {
		t.Fatalf("the page the More line names: %v (%q)\n%s", err, next, out)
	}
	out, _, err = runCLI(t, human, "approvals", "approve", first.ApprovalID)
	if err != nil || !strings.Contains(out, "it ran") || !strings.Contains(out, `"approved":true`) {
		t.Fatalf("approve: %v\n%s", err, out)
	}
	if _, _, err := runCLI(t, human, "approvals", "approve", first.ApprovalID); exitCode(err) != 3 || !strings.Contains(err.Error(), "APPROVAL_CLOSED") {
		t.Fatalf("second approve: %v", err)
	}
	if _, _, err := runCLI(t, human, "approvals", "reject", second.ApprovalID); exitCode(err) != 3 || !strings.Contains(err.Error(), "--reason") {
		t.Fatalf("reject without reason: %v", err)
	}
	out, _, err = runCLI(t, human, "approvals", "reject", second.ApprovalID, "--reason", "duplicate")
	if err != nil || !strings.Contains(out, "Nothing ran") {
		t.Fatalf("reject: %v\n%s", err, out)
	}
	agentEnv := map[string]string{"LADDER_SERVER": e.Server.URL, "LADDER_KEY": e.Keys["partner-programs/agent"]}
	if _, _, err := runCLI(t, agentEnv, "approvals", "list"); exitCode(err) != 3 || !strings.Contains(err.Error(), "AGENT_KEY_REFUSED") {
		t.Fatalf("agent listing approvals: %v", err)
	}
}

// TestApprovalEditsCLI: an edit that fails the payload schema names the
// field and says an edit is the whole payload; approvals list shows what
// ran (the edited payload) beside what the agent proposed.
func TestApprovalEditsCLI(t *testing.T) {
	e := testenv.Start(t, "")
	agent := client.New(e.Server.URL, e.Keys["partner-programs/agent"])
	human := map[string]string{"LADDER_SERVER": e.Server.URL, "LADDER_KEY": e.Keys["partner-programs/human"]}
	args := map[string]any{"program": "partner-2027", "relationship": "relationship:partner-2027:creator-1", "payload": map[string]any{"commission_id": "c-1"}}
	call, err := agent.CallCapability(t.Context(), "ticket6:approveCommission", args)
	if err != nil || call.Status != "approval_requested" {
		t.Fatalf("call: %+v %v", call, err)
	}
	_, _, err = runCLI(t, human, "approvals", "approve", call.ApprovalID, "--payload", `{"note":"x"}`)
	if exitCode(err) != 3 || !strings.Contains(err.Error(), "payload.commission_id") || !strings.Contains(err.Error(), "an edit replaces the whole payload") {
		t.Fatalf("partial edit: %v", err)
	}
	if _, _, err := runCLI(t, human, "approvals", "approve", call.ApprovalID, "--payload", `{"commission_id":"c-9"}`); err != nil {
		t.Fatalf("edit then approve: %v", err)
	}
	out, _, err := runCLI(t, human, "approvals", "list", "--status", "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "PROPOSED") || !strings.Contains(out, "EXECUTED") || !strings.Contains(out, `{"commission_id":"c-1"}`) || !strings.Contains(out, `{"commission_id":"c-9"}`) {
		t.Errorf("approvals list does not show the proposed and the executed payload side by side:\n%s", out)
	}
}

// TestREADMEApproveExampleOnTheDemo runs the README's approve example on
// the demo: the agent's call it shows becomes an approval, and the edited
// payload it shows is accepted and runs.
func TestREADMEApproveExampleOnTheDemo(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	call := regexp.MustCompile(`-d '(\{"payload":[^']*)'\s*\\\s*\n\s*"\$LADDER_SERVER/v1/capabilities/([^/]+)/call"`).FindSubmatch(readme)
	edit := regexp.MustCompile(`ladder approvals approve --key "\$LADDER_DEMO_VANTROW_BILLS_HUMAN" AP_ID [^\n]*\\\s*\n\s*--payload '([^']*)'`).FindSubmatch(readme)
	if call == nil || edit == nil {
		t.Fatalf("the README's approve example is not where this test looks (call %q, edit %q)", call, edit)
	}
	e := testenv.StartWith(t, "", testenv.Options{Seed: true})
	var args map[string]any
	if err := json.Unmarshal(call[1], &args); err != nil {
		t.Fatalf("the README's call body: %v", err)
	}
	res, err := client.New(e.Server.URL, e.Keys["vantrow-bills/agent"]).CallCapability(t.Context(), string(call[2]), args)
	if err != nil || res.Status != "approval_requested" {
		t.Fatalf("the README's call: %+v %v", res, err)
	}
	human := map[string]string{"LADDER_SERVER": e.Server.URL, "LADDER_KEY": e.Keys["vantrow-bills/human"]}
	out, _, err := runCLI(t, human, "approvals", "approve", res.ApprovalID, "--reason", "surcharge per the rate confirmation", "--payload", string(edit[1]))
	if err != nil || !strings.Contains(out, "it ran") {
		t.Fatalf("the README's approve: %v\n%s", err, out)
	}
}

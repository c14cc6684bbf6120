package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestReference generates the reference page from the demo config and holds
// it to seed 004's page: its prose, a tools/list, a tools/call answered with
// the result in its text, a refusal, the count sentence, every human gate
// of the seed, the declared-but-not-served row, and a last line naming the
// commit and the command. docs/reference.md must be that page but for its
// last line (what CI's "generated files are current" check compares).
func TestReference(t *testing.T) {
	out := filepath.Join(t.TempDir(), "reference.md")
	if _, stderr, err := runCLI(t, nil, "reference", "--out", out); err != nil {
		t.Fatalf("ladder reference: %v: %s", err, stderr)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	page := string(data)
	for _, want := range []string{
		"A tool name is a capability id. Listing requires a valid key for a served workspace, so one definition and one key cover both calls. A human key is refused on the served surface.",
		`"method": "tools/list"`,
		`"method": "tools/call"`,
		`"name": "ticket6:readLedger"`,
		`"relationship": "relationship:partner-2027:creator-1"`,
		`ran (call cl_ID). Result: {\"balance\":80.5`,
		"A refusal comes back as a JSON-RPC error whose message and data.code are the same name the API and the CLI return",
		`"code": -32000,` + "\n    \"message\": \"WORKSPACE_REFUSED\"",
		"- An authentication failure uses code -32001.\n- An unknown capability uses code -32602.\n- Any other refusal uses code -32000.",
		"28 tools. 21 of the 22 capabilities on the mcp surface are human gates.\nAn agent that calls one creates an approval request and runs nothing. The tool is still listed, so the agent can see what it may ask for.",
		"- `ticket7:recordPayoutReceipt` (declared, not served)",
		"A row that is not served is declared in the config and not exposed by the runtime yet.",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	_, section, _ := strings.Cut(page, "## Workspace `partner-programs`")
	section, _, _ = strings.Cut(section, "\n### ")
	for _, g := range []string{
		"campaigns:approveCampaign", "campaigns:launchCampaign", "campaigns:setupAdapter",
		"partners:grantAccess", "runtime:closeHeldEvent", "runtime:replayHeldEvent",
		"ticket13:commitCutover", "ticket15:assignReferralCode", "ticket4:acceptStandardTerms",
		"ticket6:activatePartnerOverride", "ticket6:activateRulebookVersion", "ticket6:approveCommission",
		"ticket6:approveCommissions", "ticket6:configureCommissionPolicy", "ticket6:rejectCommission",
		"ticket6:rejectCommissions", "ticket7:createManualCorrection", "ticket7:recordCarriedDebtRecovery",
		"ticket7:recordDisputeTransition", "ticket7:recordPayoutReceipt", "ticket7:recordStatementPayout",
	} {
		if !strings.Contains(section, "- `"+g+"`") {
			t.Errorf("partner-programs does not list the human gate %s", g)
		}
	}
	lines := strings.Split(strings.TrimSuffix(page, "\n"), "\n")
	last := lines[len(lines)-1]
	if !regexp.MustCompile("^Generated from ladderhq/ladder at ([0-9a-f]{7,}|an unknown commit) by `go run \\./cmd/ladder reference`\\.$").MatchString(last) {
		t.Errorf("last line %q does not name the commit and the command", last)
	}

	committed, err := os.ReadFile(filepath.Join("..", "..", "docs", "reference.md"))
	if err != nil {
		t.Fatal(err)
	}
	cl := strings.Split(strings.TrimSuffix(string(committed), "\n"), "\n")
	if diff := cmp.Diff(cl[:len(cl)-1], lines[:len(lines)-1]); diff != "" {
		t.Errorf("docs/reference.md is stale, run go run ./cmd/ladder reference (-want +got):\n%s", diff)
	}
}

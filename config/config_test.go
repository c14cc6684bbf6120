package config

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/jsonschema-go/jsonschema"
	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/gate"
	"go.yaml.in/yaml/v3"
)

func demo(t *testing.T) *Config {
	t.Helper()
	c, err := Parse("demo.yaml", Demo())
	if err != nil {
		t.Fatalf("demo config: %v", err)
	}
	return c
}

// TestDemoNames checks the demo's workspaces, queues and steps against the
// live names of seed 000, which the Gateway asks by.
func TestDemoNames(t *testing.T) {
	c := demo(t)
	type step struct {
		ID, Name string
		Lane     ladder.Lane
		Money    bool
		Class    ladder.RiskClass
	}
	type queue struct {
		ID, Name string
		Steps    []step
	}
	type ws struct {
		ID     string
		Queues []queue
	}
	want := []ws{
		{"vantrow-bills", []queue{{"bills", "Freight bills", []step{
			{"read_bill", "Read the bill", ladder.LaneAuto, false, ladder.ClassB},
			{"match_load", "Match the bill to the load", ladder.LanePropose, false, ladder.ClassB},
			{"rate_check", "Rate check", ladder.LanePropose, true, ladder.ClassA},
			{"check_accessorials", "Check accessorials", ladder.LaneShadow, false, ladder.ClassB},
			{"decide_hold", "Decide hold or release", ladder.LaneShadow, true, ladder.ClassA},
			{"post_tms", "Post to the TMS", ladder.LaneAuto, true, ladder.ClassA},
			{"send_remittance", "Send the remittance", ladder.LaneHumanOnly, true, ladder.ClassA},
		}}}},
		{"checkcall-loads", []queue{{"check_calls", "Check calls", []step{
			{"capture_eta", "Capture the ETA", ladder.LaneAuto, false, ladder.ClassB},
			{"call_driver", "Call the driver", ladder.LanePropose, false, ladder.ClassB},
			{"flag_late", "Flag a late load", ladder.LaneShadow, false, ladder.ClassB},
			{"update_customer", "Update the customer", ladder.LanePropose, false, ladder.ClassB},
		}}}},
		{"iia-gate", []queue{{"iia_gate", "AI investment gate", []step{
			{"invest_decision", "Investment decision", ladder.LanePropose, true, ladder.ClassA},
			{"valuation", "Lock the valuation", ladder.LaneShadow, true, ladder.ClassA},
			{"team_capability", "Judge the team", ladder.LaneHumanOnly, false, ladder.ClassB},
		}}}},
		{"partner-programs", nil},
	}
	var got []ws
	for _, w := range c.Workspaces {
		g := ws{ID: w.ID}
		for _, q := range w.Queues {
			gq := queue{ID: q.ID, Name: q.Name}
			for _, s := range q.Steps {
				gq.Steps = append(gq.Steps, step{s.ID, s.Name, s.StartLane, s.MoneyMoving, s.Class})
				if s.Queue != q.ID {
					t.Errorf("step %s: Queue = %q, want %q", s.ID, s.Queue, q.ID)
				}
				if s.WeeklyVolume <= 0 {
					t.Errorf("step %s has no weekly_volume", s.ID)
				}
			}
			g.Queues = append(g.Queues, gq)
		}
		got = append(got, g)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("demo workspaces (-want +got):\n%s", diff)
	}

	bills, _ := c.Workspace("vantrow-bills")
	post, ok := bills.FindStep("bills", "post_tms")
	if !ok || post.AuditRate != 0.1 || post.WeeklyVolume != 400 {
		t.Errorf("post_tms = %+v, %v; want audit_rate 0.1, weekly_volume 400", post, ok)
	}
	rate, _ := bills.FindStep("", "rate_check")
	if !strings.Contains(rate.Description, "fuel surcharge") {
		t.Errorf("rate_check description %q does not say it includes the fuel surcharge check", rate.Description)
	}
	if s, ok := bills.FindStep("", "bills/decide_hold"); !ok || s.Name != "Decide hold or release" {
		t.Errorf(`FindStep("", "bills/decide_hold") = %+v, %v`, s, ok)
	}
	if _, ok := bills.FindStep("check_calls", "post_tms"); ok {
		t.Error("FindStep found post_tms in the wrong queue")
	}
	if steps := bills.Steps(); len(steps) != 7 || steps[6].ID != "send_remittance" || steps[6].Queue != "bills" {
		t.Errorf("Steps() = %+v", steps)
	}
	d := bills.Domain()
	if d.ID != "vantrow-bills" || len(d.Queues) != 1 || len(d.Queues[0].Steps) != 7 || d.Queues[0].Steps[4].Queue != "bills" || len(d.Capabilities) != 3 {
		t.Errorf("Domain() = %+v", d)
	}
	if _, ok := c.Workspace("nope"); ok {
		t.Error(`Workspace("nope") found something`)
	}
}

func TestDemoCapabilities(t *testing.T) {
	c := demo(t)
	bills, _ := c.Workspace("vantrow-bills")
	type capRow struct {
		ID, Step, Kind, URL, Tool string
		HumanGate, Served         bool
		Gate                      *ladder.CapabilityGate
		Timeout                   time.Duration
	}
	row := func(c ladder.Capability) capRow {
		return capRow{c.ID, c.Step, c.Executor.Kind, c.Executor.URL, c.Executor.Tool, c.HumanGate, c.Served, c.Gate, c.Executor.Timeout}
	}
	var got []capRow
	for _, cp := range bills.Capabilities {
		got = append(got, row(cp))
	}
	partners, _ := c.Workspace("partner-programs")
	for _, cp := range partners.Capabilities {
		got = append(got, row(cp))
	}
	want := []capRow{
		{"tms:postBill", "bills/post_tms", "http", "demo:tms", "", false, true, nil, 5 * time.Second},
		{"rates:approveRate", "rate_check", "http", "demo:rates", "", false, true, nil, DefaultTimeout},
		{"payments:releaseHold", "decide_hold", "http", "demo:payments", "", false, true, &ladder.CapabilityGate{Case: "release_payment", Fn: "score_release_hold", Bind: map[string]string{"bill_id": "bill_id"}}, DefaultTimeout},
		{"ticket6:readLedger", "", "mcp", "demo:ledger", "readLedger", false, true, nil, DefaultTimeout},
		{"ticket6:approveCommission", "", "mcp", "demo:ledger", "approveCommission", true, true, nil, DefaultTimeout},
	}
	// The other human gates of seed 004 are recorded only: no stand-in
	// system is behind them.
	for _, id := range seed004HumanGates {
		if id != "ticket6:approveCommission" && id != "ticket7:recordPayoutReceipt" {
			want = append(want, capRow{id, "", "record", "", "", true, true, nil, DefaultTimeout})
		}
	}
	want = append(want, capRow{"ticket7:recordPayoutReceipt", "", "record", "", "", true, false, nil, DefaultTimeout})
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("capabilities (-want +got):\n%s", diff)
	}
	var gates []string
	for _, cp := range partners.Capabilities {
		if cp.HumanGate {
			gates = append(gates, cp.ID)
			if cp.Description == "" || len(cp.Payload["properties"].(map[string]any)) == 0 {
				t.Errorf("human gate %s has no description or payload schema", cp.ID)
			}
		}
	}
	slices.Sort(gates)
	if diff := cmp.Diff(seed004HumanGates, gates); diff != "" {
		t.Errorf("partner-programs human gates vs seed 004 (-want +got):\n%s", diff)
	}
	wantScopes := map[string][]string{"program": {"partner-2027"}, "relationship": {"relationship:partner-2027:creator-1"}}
	if diff := cmp.Diff(wantScopes, partners.Scopes); diff != "" {
		t.Errorf("partner-programs scopes (-want +got):\n%s", diff)
	}
	if cp, ok := partners.Capability("ticket6:readLedger"); !ok || strings.Join(cp.ScopeFields, ",") != "program,relationship" {
		t.Errorf("readLedger scope fields = %v", cp.ScopeFields)
	}
}

// TestDemoGate checks the demo's gate cases: ai_investment is the gate
// package's fixture, and release_payment passes good evidence and holds a
// release with an open dispute however good the rest is (the floor on R).
func TestDemoGate(t *testing.T) {
	c := demo(t)
	iia, _ := c.Workspace("iia-gate")
	raw, err := os.ReadFile("../gate/testdata/ai_investment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var fixture gate.Case
	if err := yaml.Unmarshal(raw, &fixture); err != nil {
		t.Fatal(err)
	}
	if len(iia.GateCases) != 1 {
		t.Fatalf("iia-gate has %d gate cases, want 1", len(iia.GateCases))
	}
	if diff := cmp.Diff(fixture, iia.GateCases[0]); diff != "" {
		t.Errorf("iia-gate's ai_investment differs from gate/testdata/ai_investment.yaml (-want +got):\n%s", diff)
	}
	var fns []string
	for _, f := range mustFunctions(t, iia.Gate(), "ai_investment") {
		fns = append(fns, f.CommitID+"→"+f.PreconditionFn)
	}
	if diff := cmp.Diff([]string{"invest_decision→score_invest_governance", "valuation→score_landing_level"}, fns); diff != "" {
		t.Errorf("ai_investment functions (-want +got):\n%s", diff)
	}

	bills, _ := c.Workspace("vantrow-bills")
	good := map[string]any{
		"bill_id": "B-1", "pod_received": true, "invoice_matches_rate_con": true,
		"carrier_docs_verified": true, "dispute_open": false, "hold_reason_cleared_before_release": true,
	}
	d, err := bills.Gate().Authorize("release_payment", "score_release_hold", good)
	if err != nil || d.GateState != gate.StatePass {
		t.Errorf("good evidence: %+v, %v; want PASS", d, err)
	}
	disputed := map[string]any{}
	for k, v := range good {
		disputed[k] = v
	}
	disputed["dispute_open"] = true
	d, err = bills.Gate().Authorize("release_payment", "score_release_hold", disputed)
	if err != nil || d.GateState == gate.StatePass {
		t.Errorf("open dispute: %+v, %v; want not PASS", d, err)
	}
}

func mustFunctions(t *testing.T, g *gate.Gate, id string) []ladder.GateFunctionInfo {
	t.Helper()
	fns, err := g.Functions(id)
	if err != nil {
		t.Fatal(err)
	}
	return fns
}

func TestServerDefaults(t *testing.T) {
	c, err := Parse("t.yaml", []byte("workspaces: [{id: ws}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	s := c.Server
	if s.Listen != DefaultListen || s.PublicURL != "http://"+DefaultListen || s.ApprovalTTL != 72*time.Hour ||
		s.AuditSecretEnv != "LADDER_AUDIT_SECRET" || s.RatePerSecond != DefaultRatePerSecond || s.RateBurst != DefaultRateBurst ||
		s.MaxShadowProposals != DefaultMaxShadowProposals || s.WebhookRetention != 7*24*time.Hour {
		t.Errorf("defaults = %+v", s)
	}
}

func TestAuditSecret(t *testing.T) {
	parse := func(src string) *Config {
		t.Helper()
		c, err := Parse("t.yaml", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a := parse("workspaces: [{id: ws}]\n")
	a2 := parse("workspaces: [{id: ws}]\n")
	b := parse("server: {audit_secret_env: MY_SECRET}\nworkspaces: [{id: ws}]\n")
	noenv := func(string) string { return "" }

	s1, derived := a.Server.AuditSecret(noenv)
	s2, _ := a2.Server.AuditSecret(noenv)
	s3, _ := b.Server.AuditSecret(noenv)
	if !derived || len(s1) != 32 || string(s1) != string(s2) {
		t.Errorf("derived secret: %x (derived %v), same file gives %x; want a stable 32-byte secret", s1, derived, s2)
	}
	if string(s1) == string(s3) {
		t.Error("two different files derive the same secret")
	}
	env := func(k string) string {
		if k == "MY_SECRET" {
			return "s3cret"
		}
		return ""
	}
	if s, derived := b.Server.AuditSecret(env); derived || string(s) != "s3cret" {
		t.Errorf("AuditSecret with MY_SECRET set = %q, %v", s, derived)
	}
	if _, derived := a.Server.AuditSecret(env); !derived {
		t.Error("a file naming the default variable read MY_SECRET")
	}
}

func TestPosition(t *testing.T) {
	c := demo(t)
	src := strings.Split(string(Demo()), "\n")
	check := func(path, wantText string) {
		t.Helper()
		p := c.Position(path)
		if p.File != "demo.yaml" || p.Line < 1 || p.Line > len(src) || !strings.Contains(src[p.Line-1], wantText) {
			t.Errorf("Position(%q) = %v, want the line with %q", path, p, wantText)
		}
	}
	check("workspaces[0].queues[0].steps[5].lane", "lane: auto")
	check("workspaces[0].queues[0].steps[5]", "id: post_tms")
	check("workspaces[0].queues[0].steps[5].rules.auto_lower", "id: post_tms") // not spelled out: the step
	check("workspaces[3].scopes.relationship", "relationship:")
	if p := c.StepPosition("vantrow-bills", "decide_hold"); !strings.Contains(src[p.Line-1], "id: decide_hold") {
		t.Errorf("StepPosition(decide_hold) = %v", p)
	}
	if got := (Position{File: "a.yaml", Line: 3}).String(); got != "a.yaml:3" {
		t.Errorf("Position.String() = %q", got)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ladder.yaml")
	if err := os.WriteFile(path, Demo(), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.File != path || len(c.Workspaces) != 4 {
		t.Errorf("Load: File %q, %d workspaces", c.File, len(c.Workspaces))
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("workspaces:\n  - id: ws\n    lane: auto\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(bad); err == nil || !strings.HasPrefix(err.Error(), bad+":3: workspaces[0].lane: unknown field") {
		t.Errorf("Load(bad) = %v; want an error naming %s:3", err, bad)
	}
	if _, err := Load(filepath.Join(dir, "missing.yaml")); err == nil {
		t.Error("Load of a missing file succeeded")
	}
}

// TestYAMLRejectsDuplicateKeys pins the yaml.v3 behaviour the design leans
// on: decoding a node tree with a repeated mapping key fails, even without
// KnownFields. The walker reports duplicates first, with the field path.
func TestYAMLRejectsDuplicateKeys(t *testing.T) {
	var n yaml.Node
	if err := yaml.Unmarshal([]byte("a: 1\na: 2\n"), &n); err != nil {
		t.Fatalf("parsing into a node: %v", err)
	}
	var m map[string]int
	err := n.Decode(&m)
	if err == nil || !strings.Contains(err.Error(), `mapping key "a" already defined at line 1`) {
		t.Errorf("yaml.v3 decoding a duplicate key: %v; want an error", err)
	}
}

// TestSchemaCurrent checks that the committed ladder.schema.json is what
// Schema generates; run `go generate ./config` after changing the types.
func TestSchemaCurrent(t *testing.T) {
	want, err := Schema()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(SchemaFile)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s is stale; run go generate ./config (-want +got):\n%s", SchemaFile, diff)
	}
}

// TestSchemaValidatesDemo checks the demo against the committed schema, and
// that the schema rejects what Parse rejects for shape.
func TestSchemaValidatesDemo(t *testing.T) {
	raw, err := os.ReadFile(SchemaFile)
	if err != nil {
		t.Fatal(err)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := rs.Validate(yamlAsJSON(t, Demo())); err != nil {
		t.Errorf("demo.yaml does not validate against %s: %v", SchemaFile, err)
	}
	for name, src := range map[string]string{
		"bad lane":      "workspaces: [{id: ws, queues: [{id: q, steps: [{id: s, name: S, lane: autp}]}]}]",
		"unknown field": "workspaces: [{id: ws, colour: red}]",
		"case variant":  "workspaces: [{ID: ws}]",
		"bad kind":      "workspaces: [{id: ws, capabilities: [{id: a:b, title: T, description: D, executor: {kind: grpc}}]}]",
		"bad duration":  "server: {approval_ttl: 3 days}\nworkspaces: [{id: ws}]",
	} {
		if err := rs.Validate(yamlAsJSON(t, []byte(src))); err == nil {
			t.Errorf("%s: the schema accepts %s", name, src)
		}
	}
}

func yamlAsJSON(t *testing.T, src []byte) any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal(src, &v); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestTagsAgree checks that every field of the file types has the same name
// and optionality in its yaml tag (what Parse reads) and its json tag (what
// the schema is generated from).
func TestTagsAgree(t *testing.T) {
	seen := map[reflect.Type]bool{}
	var check func(rt reflect.Type)
	check = func(rt reflect.Type) {
		for rt.Kind() == reflect.Pointer || rt.Kind() == reflect.Slice || rt.Kind() == reflect.Map {
			rt = rt.Elem()
		}
		if rt.Kind() != reflect.Struct || seen[rt] {
			return
		}
		seen[rt] = true
		for i := 0; i < rt.NumField(); i++ {
			f := rt.Field(i)
			y, j := f.Tag.Get("yaml"), f.Tag.Get("json")
			if y != j {
				t.Errorf("%s.%s: yaml tag %q, json tag %q", rt, f.Name, y, j)
			}
			check(f.Type)
		}
	}
	check(typeOfFileConfig)
}

// TestAnchorsAndMerge checks that YAML anchors, aliases and merge keys work,
// and that merged keys are checked like written ones.
func TestAnchorsAndMerge(t *testing.T) {
	src := lines(
		"workspaces:",
		"  - id: ws",
		"    queues:",
		"      - id: q",
		"        steps:",
		"          - &money {id: a, name: A, money_moving: true, lane: propose}",
		"          - {<<: *money, id: b, name: B}",
	)
	c, err := Parse("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := c.Workspaces[0].FindStep("q", "b")
	if !b.MoneyMoving || b.StartLane != ladder.LanePropose || b.Name != "B" {
		t.Errorf("merged step = %+v", b)
	}
	bad := lines(
		"x: &bad {lanes: auto}",
		"workspaces: [{id: ws, queues: [{id: q, steps: [{<<: *bad, id: s, name: S}]}]}]",
	)
	got := parseErrs(t, bad)
	want := []string{
		`t.yaml:1: x: unknown field "x"; expected one of identity, server, workspaces`,
		`t.yaml:1: workspaces[0].queues[0].steps[0].lanes: unknown field "lanes"; did you mean "lane"?`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

// TestAliasBomb checks that a file whose aliases expand past the node budget
// is refused, quickly, rather than walked.
func TestAliasBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("workspaces:\n  - id: ws\n    capabilities:\n      - id: a:b\n        title: T\n        description: D\n        executor: {kind: record}\n        payload_schema:\n          type: object\n          x0: &x0 [a, a, a, a, a, a, a, a, a, a]\n")
	for i := 1; i < 9; i++ {
		fmt.Fprintf(&b, "          x%d: &x%d [*x%d, *x%d, *x%d, *x%d, *x%d, *x%d, *x%d, *x%d, *x%d, *x%d]\n", i, i, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1)
	}
	start := time.Now()
	got := parseErrs(t, b.String())
	if len(got) != 1 || !strings.Contains(got[0], "expands to more than") {
		t.Errorf("errors = %q; want one refusing the expansion", got)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("refusing took %v", d)
	}
}

// seed004HumanGates are the human gates seed 004's reference page lists,
// in its (sorted) order; the demo's partner-programs workspace declares
// them all.
var seed004HumanGates = []string{
	"campaigns:approveCampaign", "campaigns:launchCampaign", "campaigns:setupAdapter",
	"partners:grantAccess", "runtime:closeHeldEvent", "runtime:replayHeldEvent",
	"ticket13:commitCutover", "ticket15:assignReferralCode", "ticket4:acceptStandardTerms",
	"ticket6:activatePartnerOverride", "ticket6:activateRulebookVersion", "ticket6:approveCommission",
	"ticket6:approveCommissions", "ticket6:configureCommissionPolicy", "ticket6:rejectCommission",
	"ticket6:rejectCommissions", "ticket7:createManualCorrection", "ticket7:recordCarriedDebtRecovery",
	"ticket7:recordDisputeTransition", "ticket7:recordPayoutReceipt", "ticket7:recordStatementPayout",
}

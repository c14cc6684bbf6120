package gate_test

import (
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.yaml.in/yaml/v3"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/gate"
)

func compile(t testing.TB, cases ...gate.Case) *gate.Gate {
	t.Helper()
	g, err := gate.Compile(cases)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return g
}

func readYAML(t testing.TB, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestFixtureYAML checks that testdata/ai_investment.yaml, which the config
// package reuses, decodes through the yaml tags to the Go fixture.
func TestFixtureYAML(t *testing.T) {
	var got gate.Case
	readYAML(t, "testdata/ai_investment.yaml", &got)
	if diff := cmp.Diff(aiInvestment(), got); diff != "" {
		t.Errorf("ai_investment.yaml differs from aiInvestment() (-want +got):\n%s", diff)
	}
	compile(t, got)
}

// referenceCase is one row of testdata/ai_investment_cases.yaml.
type referenceCase struct {
	Name           string             `yaml:"name"`
	PreconditionFn string             `yaml:"precondition_fn"`
	Evidence       map[string]any     `yaml:"evidence"`
	GateState      string             `yaml:"gate_state"`
	ReasonCode     string             `yaml:"reason_code"`
	Q              float64            `yaml:"q"`
	Scores         map[string]float64 `yaml:"scores"`
	RepairAttempts int                `yaml:"repair_attempts"`
}

// outcome is the part of a Decision the table tests compare.
type outcome struct {
	GateState           string
	ReasonCode          string
	Q                   float64
	Scores              ladder.GateScores
	RepairAttempts      int
	AutoRepairAvailable bool
}

func outcomeOf(d gate.Decision) outcome {
	return outcome{d.GateState, d.ReasonCode, d.Q, d.Scores, d.RepairAttempts, d.AutoRepairAvailable}
}

// approx compares Q and the scores to 1e-9, as the design's contract does.
var approx = cmpopts.EquateApprox(0, 1e-9)

// TestReference replays the ai_investment table. The expected gate_state,
// reason_code, Q, scores and repair_attempts come from the independent Python
// reference, testdata/reference.py, which follows the routing loop of
// DESIGN.md §5 literally; regenerate the table with
// `python3 gate/testdata/reference.py > gate/testdata/ai_investment_cases.yaml`.
// The table includes exact ties at Q = 0.85 and Q = 0.5.
func TestReference(t *testing.T) {
	var table []referenceCase
	readYAML(t, "testdata/ai_investment_cases.yaml", &table)
	if len(table) < 30 {
		t.Fatalf("reference table has %d rows, want at least 30", len(table))
	}
	g := compile(t, aiInvestment())
	ties := map[float64]int{}
	for _, tc := range table {
		t.Run(tc.Name, func(t *testing.T) {
			d, err := g.Authorize("ai_investment", tc.PreconditionFn, tc.Evidence)
			if err != nil {
				t.Fatalf("Authorize: %v", err)
			}
			want := outcome{
				GateState:  tc.GateState,
				ReasonCode: tc.ReasonCode,
				Q:          tc.Q,
				Scores: ladder.GateScores{
					Relevance: tc.Scores["R"], Coverage: tc.Scores["C"],
					Ordering: tc.Scores["O"], Robustness: tc.Scores["Ro"],
				},
				RepairAttempts:      tc.RepairAttempts,
				AutoRepairAvailable: tc.RepairAttempts > 0,
			}
			if diff := cmp.Diff(want, outcomeOf(d), approx); diff != "" {
				t.Errorf("decision (-want +got):\n%s", diff)
			}
			if d.SchemaVersion != "1" {
				t.Errorf("SchemaVersion = %q, want \"1\"", d.SchemaVersion)
			}
		})
		if tc.RepairAttempts == 0 && (tc.Q == 0.85 || tc.Q == 0.5) {
			ties[tc.Q]++
		}
	}
	if ties[0.85] == 0 || ties[0.5] == 0 {
		t.Errorf("table lacks exact boundary ties without repair: %v", ties)
	}
}

func TestRepairResult(t *testing.T) {
	g := compile(t, aiInvestment())
	in := map[string]any{
		"safety_certified": true, "controllability_data_present": true,
		"privacy_compliance_verified": true, "compliance_before_operations": true,
	}
	before := maps(in)
	d, err := g.Authorize("ai_investment", "score_invest_governance", in)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, in); diff != "" {
		t.Errorf("Authorize modified the caller's evidence (-before +after):\n%s", diff)
	}
	want := map[string]any{
		"filing_license_verified": true, "data_compliance_verified": true, "safety_certified": true,
		"controllability_data_present": true, "privacy_compliance_verified": true,
		"cross_border_compliance_verified": false, "compliance_before_operations": true,
		"evidence_source_verified": true, "governance_gap_externally_verifiable": true,
	}
	if diff := cmp.Diff(want, d.Evidence); diff != "" {
		t.Errorf("final evidence (-want +got):\n%s", diff)
	}
	wantHead := "PASS: score_invest_governance scored Q=0.958 (R 1.00, C 0.83, O 1.00, Ro 1.00) after 1 repair attempt(s)"
	if !strings.HasPrefix(d.HumanReadable, wantHead) {
		t.Errorf("HumanReadable = %q, want prefix %q", d.HumanReadable, wantHead)
	}
}

func maps(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// TestReasonCodes drives the toy case, whose scores are read straight from
// the evidence, through every reason code and checks that none is left out.
func TestReasonCodes(t *testing.T) {
	g := compile(t, toy())
	type ev = map[string]any
	tests := []struct {
		name string
		fn   string
		ev   ev
		want outcome
		text string // substring of HumanReadable
	}{
		{"pass", "norepair", ev{"r": 1}, outcome{GateState: "PASS", ReasonCode: "PASS_ABOVE_THRESHOLD", Q: 1, Scores: sc(1, 1, 1, 1)}, "may proceed"},
		{"pass at exact tie 0.85", "norepair", ev{"r": 0.4}, outcome{GateState: "PASS", ReasonCode: "PASS_ABOVE_THRESHOLD", Q: 0.85, Scores: sc(0.4, 1, 1, 1)}, ""},
		{"below repair threshold", "repair", ev{"r": 0, "c": 0.5, "o": 0.5, "ro": 0.5}, outcome{GateState: "ESCALATE", ReasonCode: "QUALITY_BELOW_REPAIR_THRESHOLD", Q: 0.375, Scores: sc(0, 0.5, 0.5, 0.5)}, "too weak to repair"},
		{"exact tie 0.5 enters repair", "repair", ev{"r": 0, "c": 0}, outcome{GateState: "ESCALATE", ReasonCode: "AUTO_REPAIR_DRY_ROUNDS_EXHAUSTED", Q: 0.5, Scores: sc(0, 0, 1, 1), RepairAttempts: 3, AutoRepairAvailable: true}, "3 repair rounds"},
		{"gap not externally verifiable", "repair", ev{"r": 0.4, "c": 0.4, "v": false}, outcome{GateState: "ESCALATE", ReasonCode: "GAP_NOT_EXTERNALLY_VERIFIABLE", Q: 0.7, Scores: sc(0.4, 0.4, 1, 1)}, "cannot be verified externally"},
		{"no repair function", "norepair", ev{"r": 0.4, "c": 0.4}, outcome{GateState: "ESCALATE", ReasonCode: "AUTO_REPAIR_UNAVAILABLE_NO_REPAIR_FN", Q: 0.7, Scores: sc(0.4, 0.4, 1, 1)}, "declares no repair"},
		{"dry rounds exhausted", "repair", ev{"r": 0.2, "c": 0.2}, outcome{GateState: "ESCALATE", ReasonCode: "AUTO_REPAIR_DRY_ROUNDS_EXHAUSTED", Q: 0.6, Scores: sc(0.2, 0.2, 1, 1), RepairAttempts: 3, AutoRepairAvailable: true}, ""},
		{"repair to pass", "repair", ev{"r": 0.2, "c": 0.8, "bump": 0.3}, outcome{GateState: "PASS", ReasonCode: "PASS_ABOVE_THRESHOLD", Q: 0.9, Scores: sc(0.8, 0.8, 1, 1), RepairAttempts: 2, AutoRepairAvailable: true}, "after 2 repair attempt(s)"},
		{"floor on Ro", "floor", ev{"r": 1, "ro": 0.4}, outcome{GateState: "ESCALATE", ReasonCode: "DIMENSION_BELOW_FLOOR", Q: 0.85, Scores: sc(1, 1, 1, 0.4)}, "Ro is below its floor 0.50"},
		{"floor on R", "floor", ev{"r": 0.6}, outcome{GateState: "ESCALATE", ReasonCode: "DIMENSION_BELOW_FLOOR", Q: 0.9, Scores: sc(0.6, 1, 1, 1)}, "R is below its floor 0.70"},
		{"floor met at its value", "floor", ev{"r": 0.7}, outcome{GateState: "PASS", ReasonCode: "PASS_ABOVE_THRESHOLD", Q: 0.925, Scores: sc(0.7, 1, 1, 1)}, ""},
		{"soft commit without promise", "soft", ev{"r": 1}, outcome{GateState: "PASS", ReasonCode: "PASS_ABOVE_THRESHOLD", Q: 1, Scores: sc(1, 1, 1, 1)}, ""},
		{"soft commit promise supported", "soft", ev{"r": 1, "promise": true, "feasible": true}, outcome{GateState: "PASS", ReasonCode: "SOFT_COMMIT_PROMISE_SUPPORTED", Q: 1, Scores: sc(1, 1, 1, 1)}, "backed by feasibility"},
		{"soft commit promise unsupported", "soft", ev{"r": 1, "promise": true}, outcome{GateState: "ESCALATE", ReasonCode: "SOFT_COMMIT_PROMISE_UNSUPPORTED", Q: 1, Scores: sc(1, 1, 1, 1)}, "without feasibility"},
		{"soft commit below threshold", "soft", ev{"r": 0, "c": 0, "promise": true, "feasible": true}, outcome{GateState: "ESCALATE", ReasonCode: "AUTO_REPAIR_UNAVAILABLE_NO_REPAIR_FN", Q: 0.5, Scores: sc(0, 0, 1, 1)}, ""},
		{"ordering unmet over no repair", "norepair", ev{"r": 1, "o": 0}, outcome{GateState: "ESCALATE", ReasonCode: "ORDERING_PRECONDITION_UNMET", Q: 0.75, Scores: sc(1, 1, 0, 1)}, "O is 0"},
		{"ordering unmet over low quality", "repair", ev{"r": 0, "c": 0, "o": 0}, outcome{GateState: "ESCALATE", ReasonCode: "ORDERING_PRECONDITION_UNMET", Q: 0.25, Scores: sc(0, 0, 0, 1)}, ""},
		{"ordering unmet after dry repair", "repair", ev{"r": 0.5, "c": 1, "o": 0}, outcome{GateState: "ESCALATE", ReasonCode: "ORDERING_PRECONDITION_UNMET", Q: 0.625, Scores: sc(0.5, 1, 0, 1), RepairAttempts: 3, AutoRepairAvailable: true}, ""},
		{"fault: expression error", "err_expr", ev{"r": 1}, outcome{GateState: "BYPASS_TO_HUMAN", ReasonCode: "EVALUATOR_FAULT"}, "Evaluator fault in C of err_expr"},
		{"fault: missing non-boolean field", "non_number", ev{"r": 1}, outcome{GateState: "BYPASS_TO_HUMAN", ReasonCode: "EVALUATOR_FAULT"}, "Evaluator fault in R"},
		{"fault: out of range", "out_of_range", ev{"r": 0.9}, outcome{GateState: "BYPASS_TO_HUMAN", ReasonCode: "EVALUATOR_FAULT"}, "outside [0,1]"},
		{"fault: infinity", "infinite", ev{"r": 1}, outcome{GateState: "BYPASS_TO_HUMAN", ReasonCode: "EVALUATOR_FAULT"}, "+Inf, outside [0,1]"},
		{"fault: non-number", "non_number", ev{"r": 1, "name": "high"}, outcome{GateState: "BYPASS_TO_HUMAN", ReasonCode: "EVALUATOR_FAULT"}, "yields string, want a number"},
		{"fault: non-bool verifiable_ext", "non_bool", ev{"r": 1, "name": "yes"}, outcome{GateState: "BYPASS_TO_HUMAN", ReasonCode: "EVALUATOR_FAULT"}, "verifiable_ext"},
		{"fault: non-string notes", "notes_non_string", ev{"r": 1}, outcome{GateState: "BYPASS_TO_HUMAN", ReasonCode: "EVALUATOR_FAULT", Q: 1, Scores: sc(1, 1, 1, 1)}, "notes"},
		{"fault: repair breaks schema", "bad_repair", ev{"r": 0.4, "c": 0.4}, outcome{GateState: "BYPASS_TO_HUMAN", ReasonCode: "EVALUATOR_FAULT", Q: 0.7, Scores: sc(0.4, 0.4, 1, 1), RepairAttempts: 1, AutoRepairAvailable: true}, "repaired evidence breaks the schema"},
		{"fault: repair never settles", "cycling", ev{"r": 0.4, "c": 0.4}, outcome{GateState: "BYPASS_TO_HUMAN", ReasonCode: "EVALUATOR_FAULT", Q: 0.7, Scores: sc(0.4, 0.4, 1, 1), RepairAttempts: 64, AutoRepairAvailable: true}, "still changing the evidence"},
		{"fault: non-bool promise", "soft_fault", ev{"r": 1, "name": "x"}, outcome{GateState: "BYPASS_TO_HUMAN", ReasonCode: "EVALUATOR_FAULT", Q: 1, Scores: sc(1, 1, 1, 1)}, "promise"},
	}
	seen := map[string]bool{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := g.Authorize("toy", tt.fn, tt.ev)
			if err != nil {
				t.Fatalf("Authorize: %v", err)
			}
			if diff := cmp.Diff(tt.want, outcomeOf(d), approx); diff != "" {
				t.Errorf("decision (-want +got):\n%s", diff)
			}
			if !strings.Contains(d.HumanReadable, tt.text) {
				t.Errorf("HumanReadable = %q, want it to contain %q", d.HumanReadable, tt.text)
			}
			if d.Authorized() != (d.GateState == "PASS") {
				t.Errorf("Authorized() = %v for %s", d.Authorized(), d.GateState)
			}
			seen[d.ReasonCode] = true
		})
	}
	d, err := g.Authorize("toy", "c_person", nil)
	if !errors.Is(err, gate.ErrBypassToHuman) {
		t.Fatalf("Authorize(c_person) error = %v, want ErrBypassToHuman", err)
	}
	want := outcome{GateState: "BYPASS_TO_HUMAN", ReasonCode: "BYPASS_HUMAN_JUDGMENT_REQUIRED"}
	if diff := cmp.Diff(want, outcomeOf(d)); diff != "" {
		t.Errorf("bypass decision (-want +got):\n%s", diff)
	}
	seen[d.ReasonCode] = true

	// Evidence bound to an action: a bound field that names another value,
	// or none, is not scored; the matching one is scored as usual.
	for _, tt := range []struct {
		name  string
		ev    ev
		bound map[string]string
		want  outcome
	}{
		{"bound field differs", ev{"r": 1, "name": "GOOD-1"}, map[string]string{"name": "BAD-9"}, outcome{GateState: "ESCALATE", ReasonCode: "EVIDENCE_NOT_BOUND_TO_PAYLOAD"}},
		{"bound field absent", ev{"r": 1}, map[string]string{"name": "BAD-9"}, outcome{GateState: "ESCALATE", ReasonCode: "EVIDENCE_NOT_BOUND_TO_PAYLOAD"}},
		{"bound field matches", ev{"r": 1, "name": "GOOD-1"}, map[string]string{"name": "GOOD-1"}, outcome{GateState: "PASS", ReasonCode: "PASS_ABOVE_THRESHOLD", Q: 1, Scores: sc(1, 1, 1, 1)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d, err := g.AuthorizeBound("toy", "norepair", tt.ev, tt.bound)
			if err != nil {
				t.Fatalf("AuthorizeBound: %v", err)
			}
			if diff := cmp.Diff(tt.want, outcomeOf(d), approx); diff != "" {
				t.Errorf("decision (-want +got):\n%s", diff)
			}
			if tt.want.ReasonCode == "EVIDENCE_NOT_BOUND_TO_PAYLOAD" && !strings.Contains(d.HumanReadable, "BAD-9") {
				t.Errorf("HumanReadable = %q, want it to name the action's value", d.HumanReadable)
			}
			seen[d.ReasonCode] = true
		})
	}
	for _, code := range gate.ReasonCodes {
		if !seen[code] {
			t.Errorf("no test produced reason code %s", code)
		}
	}
}

func TestNotesRedacted(t *testing.T) {
	g := compile(t, toy())
	d, err := g.Authorize("toy", "notes", map[string]any{"r": 1, "secret": "password=hunter2 and key ldr_ab12_QWErty1234567890zzz"})
	if err != nil {
		t.Fatal(err)
	}
	want := "note: password=[REDACTED] and key ldr_[REDACTED]"
	if d.Notes != want {
		t.Errorf("Notes = %q, want %q", d.Notes, want)
	}
	d, err = g.Authorize("toy", "notes", map[string]any{"r": 1})
	if err != nil {
		t.Fatal(err)
	}
	if d.Notes != "no note" {
		t.Errorf("Notes = %q, want %q", d.Notes, "no note")
	}
}

func TestEvidenceErrors(t *testing.T) {
	g := compile(t, aiInvestment(), toy())
	tests := []struct {
		name, caseID, fn string
		ev               map[string]any
		want             gate.EvidenceError // Problem is a substring
	}{
		{"wrong type", "ai_investment", "score_invest_governance", map[string]any{"safety_certified": "yes"}, gate.EvidenceError{Field: "safety_certified", Problem: `want "boolean"`}},
		{"undeclared field", "ai_investment", "score_landing_level", map[string]any{"production_deployed": true, "revenue": 12}, gate.EvidenceError{Field: "revenue", Problem: "not declared"}},
		{"required field missing", "toy", "norepair", map[string]any{"c": 1}, gate.EvidenceError{Field: "r", Problem: "required but missing"}},
		{"required field missing from nil", "toy", "norepair", nil, gate.EvidenceError{Field: "r", Problem: "required but missing"}},
		{"number as string", "toy", "norepair", map[string]any{"r": "0.9"}, gate.EvidenceError{Field: "r", Problem: `want "number"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := g.Authorize(tt.caseID, tt.fn, tt.ev)
			var ee *gate.EvidenceError
			if !errors.As(err, &ee) {
				t.Fatalf("Authorize error = %v, want *EvidenceError", err)
			}
			if ee.Field != tt.want.Field || !strings.Contains(ee.Problem, tt.want.Problem) {
				t.Errorf("EvidenceError = %+v, want field %q and problem containing %q", *ee, tt.want.Field, tt.want.Problem)
			}
			if !strings.Contains(err.Error(), tt.want.Field) {
				t.Errorf("Error() = %q does not name the field", err.Error())
			}
		})
	}
}

func TestLookupErrors(t *testing.T) {
	g := compile(t, aiInvestment(), toy())
	tests := []struct {
		name       string
		caseID, fn string
		sentinel   error
		valid      []string
	}{
		{"unknown case", "ai_invest", "score_invest_governance", gate.ErrUnknownCase, []string{"ai_investment", "toy"}},
		{"unknown function", "ai_investment", "score_team", gate.ErrUnknownFunction, []string{"score_invest_governance", "score_landing_level"}},
		{"commit id is not a function name", "ai_investment", "invest_decision", gate.ErrUnknownFunction, []string{"score_invest_governance", "score_landing_level"}},
		{"bypass commit", "ai_investment", "team_capability", gate.ErrBypassToHuman, []string{"score_invest_governance", "score_landing_level"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := g.Authorize(tt.caseID, tt.fn, map[string]any{})
			if !errors.Is(err, tt.sentinel) {
				t.Fatalf("Authorize error = %v, want %v", err, tt.sentinel)
			}
			var le *gate.LookupError
			if !errors.As(err, &le) {
				t.Fatalf("Authorize error %T is not *LookupError", err)
			}
			if diff := cmp.Diff(tt.valid, le.Valid); diff != "" {
				t.Errorf("Valid (-want +got):\n%s", diff)
			}
			if le.Hint == "" {
				t.Error("Hint is empty")
			}
			for _, name := range tt.valid {
				if tt.sentinel != gate.ErrBypassToHuman && !strings.Contains(err.Error(), name) {
					t.Errorf("Error() = %q does not list %q", err.Error(), name)
				}
			}
			if tt.sentinel == gate.ErrBypassToHuman {
				if d.GateState != "BYPASS_TO_HUMAN" || d.ReasonCode != "BYPASS_HUMAN_JUDGMENT_REQUIRED" || d.CommitID != "team_capability" {
					t.Errorf("bypass decision = %+v", d)
				}
			}
		})
	}
	if _, err := g.Functions("nope"); !errors.Is(err, gate.ErrUnknownCase) {
		t.Errorf("Functions(nope) error = %v, want ErrUnknownCase", err)
	}
}

func TestListing(t *testing.T) {
	fx := aiInvestment()
	g := compile(t, fx)
	want := []ladder.GateFunctionInfo{
		{
			PreconditionFn: "score_invest_governance", CommitID: "invest_decision", CommitName: "Make the investment decision",
			HasAutoRepair: true, Doc: fx.Commits[0].Fn.Doc, EvidenceSchema: fx.Commits[0].Fn.Evidence,
		},
		{
			PreconditionFn: "score_landing_level", CommitID: "valuation", CommitName: "Set the valuation",
			HasAutoRepair: true, Doc: fx.Commits[1].Fn.Doc, EvidenceSchema: fx.Commits[1].Fn.Evidence,
		},
	}
	got, err := g.Functions("ai_investment")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Functions (-want +got):\n%s", diff)
	}
	wantCases := []ladder.GateCaseInfo{{ID: fx.ID, Name: fx.Name, Description: fx.Description, Functions: want}}
	if diff := cmp.Diff(wantCases, g.Cases()); diff != "" {
		t.Errorf("Cases (-want +got):\n%s", diff)
	}

	gt := compile(t, toy())
	fns, err := gt.Functions("toy")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fns {
		if f.CommitID == "c_person" {
			t.Error("bypass commit c_person is listed")
		}
		if f.PreconditionFn == "soft" && !f.SoftCommit {
			t.Error("soft is not listed as a soft commit")
		}
	}
}

// TestDecisionJSON pins the wire names of the authorize contract (DESIGN.md §5).
func TestDecisionJSON(t *testing.T) {
	g := compile(t, aiInvestment())
	d, err := g.Authorize("ai_investment", "score_landing_level", map[string]any{"production_deployed": true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	want := []string{"Q", "auto_repair_available", "case", "commit_id", "cq_scores", "evidence", "gate_state",
		"human_readable", "precondition_fn", "reason_code", "repair_attempts", "schema_version", "verifiable_ext"}
	if diff := cmp.Diff(want, keys); diff != "" {
		t.Errorf("Decision JSON keys (-want +got):\n%s", diff)
	}
	wantScores := map[string]any{"relevance": 0.2, "coverage": 0.2, "ordering": 0.4, "robustness": 0.3}
	if diff := cmp.Diff(wantScores, m["cq_scores"]); diff != "" {
		t.Errorf("cq_scores (-want +got):\n%s", diff)
	}
}

func TestCompileErrors(t *testing.T) {
	const gov = "score_invest_governance"
	tests := []struct {
		name   string
		mutate func(c *gate.Case)
		want   gate.CompileError // Err is compared as a substring of its message
		errHas string
	}{
		{"syntax error", func(c *gate.Case) { c.Commits[0].Fn.R = "evidence.filing_license_verified &&" },
			gate.CompileError{Case: "ai_investment", Function: gov, Field: "R", Expr: "evidence.filing_license_verified &&"}, "Syntax error"},
		{"score is a string", func(c *gate.Case) { c.Commits[0].Fn.O = `"early"` },
			gate.CompileError{Case: "ai_investment", Function: gov, Field: "O", Expr: `"early"`}, "want a number"},
		{"empty score", func(c *gate.Case) { c.Commits[0].Fn.Ro = "" },
			gate.CompileError{Case: "ai_investment", Function: gov, Field: "Ro"}, "empty"},
		{"verifiable_ext is a number", func(c *gate.Case) { c.Commits[0].Fn.VerifiableExt = "1.0" },
			gate.CompileError{Case: "ai_investment", Function: gov, Field: "verifiable_ext", Expr: "1.0"}, "want a bool"},
		{"notes is a bool", func(c *gate.Case) { c.Commits[0].Fn.Notes = "true" },
			gate.CompileError{Case: "ai_investment", Function: gov, Field: "notes", Expr: "true"}, "want a string"},
		{"unknown variable", func(c *gate.Case) { c.Commits[1].Fn.C = "evidnce.x" },
			gate.CompileError{Case: "ai_investment", Function: "score_landing_level", Field: "C", Expr: "evidnce.x"}, "undeclared reference"},
		{"repair error", func(c *gate.Case) { c.Commits[0].Fn.Repair["data_compliance_verified"] = "tru" },
			gate.CompileError{Case: "ai_investment", Function: gov, Field: "repair.data_compliance_verified", Expr: "tru"}, "undeclared reference"},
		{"property without description", func(c *gate.Case) {
			delete(c.Commits[0].Fn.Evidence["properties"].(map[string]any)["safety_certified"].(map[string]any), "description")
		}, gate.CompileError{Case: "ai_investment", Function: gov, Field: "evidence.properties.safety_certified.description"}, "no description"},
		{"property without type", func(c *gate.Case) {
			delete(c.Commits[1].Fn.Evidence["properties"].(map[string]any)["repeat_orders"].(map[string]any), "type")
		}, gate.CompileError{Case: "ai_investment", Function: "score_landing_level", Field: "evidence.properties.repeat_orders.type"}, "no type"},
		{"schema not an object", func(c *gate.Case) { c.Commits[0].Fn.Evidence["type"] = "array" },
			gate.CompileError{Case: "ai_investment", Function: gov, Field: "evidence.type"}, `want "object"`},
		{"unknown floor", func(c *gate.Case) { c.Commits[0].Fn.Min = map[string]float64{"Q": 0.5} },
			gate.CompileError{Case: "ai_investment", Function: gov, Field: "min.Q"}, "unknown dimension"},
		{"floor out of range", func(c *gate.Case) { c.Commits[0].Fn.Min = map[string]float64{"R": 1.5} },
			gate.CompileError{Case: "ai_investment", Function: gov, Field: "min.R"}, "outside [0,1]"},
		{"bypass commit with a function", func(c *gate.Case) { c.Commits[2].Fn = aiInvestment().Commits[0].Fn },
			gate.CompileError{Case: "ai_investment", Field: "commits[2].precondition_fn"}, "must not declare"},
		{"commit without a function", func(c *gate.Case) { c.Commits[1].Fn = nil },
			gate.CompileError{Case: "ai_investment", Field: "commits[1].precondition_fn"}, "no precondition function"},
		{"duplicate function", func(c *gate.Case) { c.Commits[1].Fn.Name = gov },
			gate.CompileError{Case: "ai_investment", Function: gov, Field: "name"}, "two commits"},
		{"duplicate commit", func(c *gate.Case) { c.Commits[1].ID = "invest_decision" },
			gate.CompileError{Case: "ai_investment", Field: "commits[1].id"}, "duplicate commit id"},
		{"weights do not sum to 1", func(c *gate.Case) { c.Weights = &gate.Weights{R: 0.3, C: 0.3, O: 0.3, Ro: 0.3} },
			gate.CompileError{Case: "ai_investment", Field: "weights"}, "sum to"},
		{"negative weight", func(c *gate.Case) { c.Weights = &gate.Weights{R: -0.5, C: 0.5, O: 0.5, Ro: 0.5} },
			gate.CompileError{Case: "ai_investment", Field: "weights.R"}, "outside [0,1]"},
		{"tau_repair above tau_pass", func(c *gate.Case) { c.TauRepair = ptr(0.9) },
			gate.CompileError{Case: "ai_investment", Field: "tau_repair"}, "outside [0, tau_pass"},
		{"k_dry zero", func(c *gate.Case) { c.KDry = ptr(0) },
			gate.CompileError{Case: "ai_investment", Field: "k_dry"}, "below 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := aiInvestment()
			tt.mutate(&c)
			_, err := gate.Compile([]gate.Case{c})
			var ce *gate.CompileError
			if !errors.As(err, &ce) {
				t.Fatalf("Compile error = %v, want *CompileError", err)
			}
			if diff := cmp.Diff(tt.want, *ce, cmpopts.IgnoreFields(gate.CompileError{}, "Err")); diff != "" {
				t.Errorf("CompileError (-want +got):\n%s", diff)
			}
			if !strings.Contains(ce.Err.Error(), tt.errHas) {
				t.Errorf("Err = %q, want it to contain %q", ce.Err, tt.errHas)
			}
		})
	}
	t.Run("duplicate case", func(t *testing.T) {
		_, err := gate.Compile([]gate.Case{aiInvestment(), aiInvestment()})
		var ce *gate.CompileError
		if !errors.As(err, &ce) || ce.Field != "id" {
			t.Errorf("Compile error = %v, want a CompileError on id", err)
		}
	})
}

func sc(r, c, o, ro float64) ladder.GateScores {
	return ladder.GateScores{Relevance: r, Coverage: c, Ordering: o, Robustness: ro}
}

func ptr[T any](v T) *T { return &v }

// TestCustomThresholds checks that weights, τ and k_dry from the case are used.
func TestCustomThresholds(t *testing.T) {
	c := toy()
	c.Weights = &gate.Weights{R: 1}
	c.TauPass, c.TauRepair, c.KDry = ptr(0.9), ptr(0.3), ptr(1)
	g := compile(t, c)
	tests := []struct {
		name string
		ev   map[string]any
		want outcome
	}{
		{"only R counts", map[string]any{"r": 0.9, "c": 0, "o": 0.1, "ro": 0}, outcome{GateState: "PASS", ReasonCode: "PASS_ABOVE_THRESHOLD", Q: 0.9, Scores: sc(0.9, 0, 0.1, 0)}},
		{"one dry round is enough", map[string]any{"r": 0.3}, outcome{GateState: "ESCALATE", ReasonCode: "AUTO_REPAIR_DRY_ROUNDS_EXHAUSTED", Q: 0.3, Scores: sc(0.3, 1, 1, 1), RepairAttempts: 1, AutoRepairAvailable: true}},
		{"below custom tau_repair", map[string]any{"r": 0.29}, outcome{GateState: "ESCALATE", ReasonCode: "QUALITY_BELOW_REPAIR_THRESHOLD", Q: 0.29, Scores: sc(0.29, 1, 1, 1)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := g.Authorize("toy", "repair", tt.ev)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, outcomeOf(d), approx); diff != "" {
				t.Errorf("decision (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRedact(t *testing.T) {
	tests := []struct{ in, want string }{
		{"nothing secret here", "nothing secret here"},
		{"key ldr_k1x9_Zq8vN2mLp0aB7cD4eF6gH1 used", "key ldr_[REDACTED] used"},
		{"openai sk-proj-abcDEF1234567890xyz", "openai sk-[REDACTED]"},
		{"Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.abc", "Authorization: Bearer [REDACTED]"},
		{"password=hunter2, user=bob", "password=[REDACTED], user=bob"},
		{`api_key: "s3cr3t value"`, `api_key: [REDACTED]`},
		{"sha 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 end", "sha [REDACTED] end"},
		{"blob QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo0NTY3ODk= end", "blob [REDACTED] end"},
		{"field contract_evidence_verified_third_party stays", "field contract_evidence_verified_third_party stays"},
		{"short hex deadbeef stays", "short hex deadbeef stays"},
		{"end of sentence ldr_a1_b2.", "end of sentence ldr_[REDACTED]."},
		{"ldr_id_secret but not ldr_x", "ldr_[REDACTED] but not ldr_x"},
		{"token : abc123;next", "token : [REDACTED];next"},
		{"PWD='two words' left", "PWD=[REDACTED] left"},
		{"see https://example.com/docs/page.html", "see https://example.com/docs/page.html"},
		{"bearer", "bearer"},
		{"password=", "password="},
		{"x " + strings.Repeat("Ab1", 12) + "==.tail", "x [REDACTED].tail"},
		{"Q=0.958 (R 1.00, C 0.83)", "Q=0.958 (R 1.00, C 0.83)"},
	}
	for _, tt := range tests {
		if got := gate.Redact(tt.in); got != tt.want {
			t.Errorf("Redact(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// BenchmarkAuthorize measures one authorize call that passes on the first
// scoring: schema validation, default filling, four CEL scores,
// verifiable_ext, notes and the human-readable sentence. No I/O.
func BenchmarkAuthorize(b *testing.B) {
	g := compile(b, aiInvestment())
	ev := map[string]any{
		"filing_license_verified": true, "data_compliance_verified": true, "safety_certified": true,
		"controllability_data_present": true, "privacy_compliance_verified": true,
		"cross_border_compliance_verified": false, "compliance_before_operations": true,
		"evidence_source_verified": true,
	}
	b.ReportAllocs()
	for b.Loop() {
		d, err := g.Authorize("ai_investment", "score_invest_governance", ev)
		if err != nil || d.GateState != gate.StatePass {
			b.Fatalf("Authorize = %v, %v", d.GateState, err)
		}
	}
}

// BenchmarkAuthorizeRepair measures a call that repairs once and passes.
func BenchmarkAuthorizeRepair(b *testing.B) {
	g := compile(b, aiInvestment())
	ev := map[string]any{
		"safety_certified": true, "controllability_data_present": true,
		"privacy_compliance_verified": true, "compliance_before_operations": true,
	}
	b.ReportAllocs()
	for b.Loop() {
		d, err := g.Authorize("ai_investment", "score_invest_governance", ev)
		if err != nil || d.GateState != gate.StatePass {
			b.Fatalf("Authorize = %v, %v", d.GateState, err)
		}
	}
}

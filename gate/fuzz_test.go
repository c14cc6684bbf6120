package gate_test

import (
	"encoding/json"
	"testing"

	"github.com/ladderhq/ladder/gate"
)

// FuzzAuthorizeEvidence sends arbitrary evidence objects to Authorize: it
// never panics, every answer is a refusal or one of the three gate states,
// and only PASS authorizes.
func FuzzAuthorizeEvidence(f *testing.F) {
	for _, s := range []string{
		`{}`,
		`{"filing_license_verified":true,"data_compliance_verified":true,"safety_certified":true}`,
		`{"filing_license_verified":"yes"}`,
		`{"filing_license_verified":1}`,
		`{"analyst_note":"sk-live-0123456789abcdef0123456789"}`,
		`{"unknown_field":true}`,
		`{"filing_license_verified":null,"compliance_before_operations":[true]}`,
		`{"governance_gap_externally_verifiable":false,"evidence_source_verified":{"a":1}}`,
	} {
		f.Add(s)
	}
	g := compile(f, aiInvestment())
	f.Fuzz(func(t *testing.T, raw string) {
		var ev map[string]any
		if json.Unmarshal([]byte(raw), &ev) != nil {
			return
		}
		d, err := g.Authorize("ai_investment", "score_invest_governance", ev)
		if err != nil {
			return
		}
		switch d.GateState {
		case "PASS", "ESCALATE", "BYPASS_TO_HUMAN":
		default:
			t.Fatalf("gate state %q for %s", d.GateState, raw)
		}
	})
}

// FuzzCELExpression compiles a precondition function whose R expression is
// arbitrary text (an operator's config) and evaluates it on fixed and on
// empty evidence: compiling refuses or succeeds, evaluating never panics
// and never runs away (the gate's cost limit).
func FuzzCELExpression(f *testing.F) {
	for _, s := range []string{
		`1.0`,
		`evidence.ok ? 1.0 : 0.0`,
		`evidence.n / 0.0`,
		`double(evidence.n) * 2.0`,
		`[1,2,3].map(x, [1,2,3].map(y, x*y)).size() > 0 ? 1.0 : 0.0`,
		`evidence.missing.deeper ? 1.0 : 0.0`,
		`"a" + evidence.s == "ab" ? 1.0 : 0.0`,
		`int(evidence.n) / 0 == 1 ? 1.0 : 0.0`,
		`size(evidence.s) > 3 ? 0.5 : 0.1`,
		`has(evidence.ok) ? 1.0 : 0.0`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		c := gate.Case{ID: "c", Name: "C", Commits: []gate.Commit{{ID: "x", Name: "X", Fn: &gate.Function{
			Name: "f", Doc: "Fuzzed.",
			Evidence: object(map[string]any{
				"ok": boolProp("A flag."),
				"n":  map[string]any{"type": "number", "description": "A number."},
				"s":  map[string]any{"type": "string", "description": "A string."},
			}),
			R: expr, C: "1.0", O: "1.0", Ro: "1.0",
		}}}}
		g, err := gate.Compile([]gate.Case{c})
		if err != nil {
			return
		}
		for _, ev := range []map[string]any{{}, {"ok": true, "n": 2.0, "s": "b"}} {
			d, err := g.Authorize("c", "f", ev)
			if err == nil && d.GateState != "PASS" && d.GateState != "ESCALATE" && d.GateState != "BYPASS_TO_HUMAN" {
				t.Fatalf("gate state %q for %q", d.GateState, expr)
			}
		}
	})
}

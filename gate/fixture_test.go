package gate_test

import (
	"github.com/ladderhq/ladder/gate"
)

// aiInvestment is the ai_investment case as a Go literal. It must equal
// testdata/ai_investment.yaml (TestFixtureYAML checks), which the config
// package reuses.
func aiInvestment() gate.Case {
	return gate.Case{
		ID:          "ai_investment",
		Name:        "AI investment due diligence",
		Description: "Governance and landing evidence an agent must show before it commits an investment decision or a valuation; the team judgement is always a person's.",
		Commits: []gate.Commit{
			{
				ID:   "invest_decision",
				Name: "Make the investment decision",
				Fn: &gate.Function{
					Name: "score_invest_governance",
					Doc:  "Scores the target's AI governance: filing and licence, data compliance, safety certification, controllability data, privacy and cross-border compliance. Send each check as a boolean; an absent check counts as not done.",
					Evidence: object(map[string]any{
						"filing_license_verified":              boolProp("The algorithm filing and operating licence were checked against the regulator's register."),
						"data_compliance_verified":             boolProp("Training and operating data were checked for lawful sourcing."),
						"safety_certified":                     boolProp("The product holds a current safety assessment or certification."),
						"controllability_data_present":         boolProp("Evidence of human oversight and shutdown controls was provided."),
						"privacy_compliance_verified":          boolProp("Personal-data handling was checked against privacy law."),
						"cross_border_compliance_verified":     boolProp("Cross-border data transfers were checked, or none occur."),
						"compliance_before_operations":         boolProp("Compliance was in place before the product went into operation (the ordering precondition)."),
						"evidence_source_verified":             boolProp("The documents behind these checks come from a verified primary source."),
						"governance_gap_externally_verifiable": defaultTrue(boolProp("Any remaining gap can be closed by outside verification (default true).")),
						"analyst_note":                         noteProp(),
					}),
					R: "evidence.filing_license_verified && evidence.data_compliance_verified ? 1.0 : 0.2",
					C: "((evidence.filing_license_verified ? 1.0 : 0.0) + " +
						"(evidence.data_compliance_verified ? 1.0 : 0.0) + " +
						"(evidence.safety_certified ? 1.0 : 0.0) + " +
						"(evidence.controllability_data_present ? 1.0 : 0.0) + " +
						"(evidence.privacy_compliance_verified ? 1.0 : 0.0) + " +
						"(evidence.cross_border_compliance_verified ? 1.0 : 0.0)) / 6.0",
					O:             "evidence.compliance_before_operations ? 1.0 : 0.4",
					Ro:            "evidence.evidence_source_verified ? 1.0 : 0.3",
					VerifiableExt: "evidence.governance_gap_externally_verifiable",
					Notes:         `has(evidence.analyst_note) ? evidence.analyst_note : ""`,
					Repair: map[string]string{
						"filing_license_verified":  "true",
						"data_compliance_verified": "true",
						"evidence_source_verified": "true",
					},
				},
			},
			{
				ID:   "valuation",
				Name: "Set the valuation",
				Fn: &gate.Function{
					Name: "score_landing_level",
					Doc:  "Scores how far the target's AI has landed in real business: production deployment, paying contracts, industry embedding, quantified economic value and repeat orders. Send each as a boolean; an absent one counts as not shown.",
					Evidence: object(map[string]any{
						"production_deployed":                    boolProp("The product runs in production at a customer, not only in pilots."),
						"paying_contracts_verified":              boolProp("Paying customer contracts were seen and checked."),
						"industry_embedded":                      boolProp("The product is embedded in an industry workflow."),
						"economic_value_quantified":              boolProp("The customer's economic benefit is quantified with figures."),
						"repeat_orders":                          boolProp("At least one customer has ordered again."),
						"delivery_before_repeat_claim":           boolProp("Delivery happened before repeat orders were claimed (the ordering precondition)."),
						"contract_evidence_verified_third_party": boolProp("A third party confirmed the contract evidence."),
						"landing_gap_externally_verifiable":      defaultTrue(boolProp("Any remaining gap can be closed by outside verification (default true).")),
						"analyst_note":                           noteProp(),
					}),
					R: "evidence.production_deployed && evidence.paying_contracts_verified ? 1.0 : 0.2",
					C: "((evidence.production_deployed ? 1.0 : 0.0) + " +
						"(evidence.paying_contracts_verified ? 1.0 : 0.0) + " +
						"(evidence.industry_embedded ? 1.0 : 0.0) + " +
						"(evidence.economic_value_quantified ? 1.0 : 0.0) + " +
						"(evidence.repeat_orders ? 1.0 : 0.0)) / 5.0",
					O:             "evidence.delivery_before_repeat_claim ? 1.0 : 0.4",
					Ro:            "evidence.contract_evidence_verified_third_party ? 1.0 : 0.3",
					VerifiableExt: "evidence.landing_gap_externally_verifiable",
					Notes:         `has(evidence.analyst_note) ? evidence.analyst_note : ""`,
					Repair: map[string]string{
						"paying_contracts_verified":              "true",
						"contract_evidence_verified_third_party": "true",
					},
				},
			},
			{ID: "team_capability", Name: "Judge the team's capability", BypassToHuman: true},
		},
	}
}

func object(props map[string]any) map[string]any {
	return map[string]any{"type": "object", "additionalProperties": false, "properties": props}
}

func boolProp(desc string) map[string]any {
	return map[string]any{"type": "boolean", "description": desc}
}

func defaultTrue(p map[string]any) map[string]any {
	p["default"] = true
	return p
}

func noteProp() map[string]any {
	return map[string]any{"type": "string", "description": "Free-text note from the analyst, shown with the decision (secrets are redacted)."}
}

func numProp(desc string) map[string]any {
	return map[string]any{"type": "number", "description": desc}
}

// toy is a case whose scores are read straight from the evidence, so a test
// can put Q exactly where it wants and reach every reason code. Each function
// has a commit of its own; c_soft is a soft commit.
func toy() gate.Case {
	schema := func() map[string]any {
		return map[string]any{
			"type":     "object",
			"required": []any{"r"},
			"properties": map[string]any{
				"r":        numProp("Relevance score to report."),
				"c":        numProp("Coverage score to report."),
				"o":        numProp("Ordering score to report."),
				"ro":       numProp("Robustness score to report."),
				"bump":     numProp("What one repair round adds to r."),
				"v":        defaultTrue(boolProp("Whether the gap is externally verifiable.")),
				"promise":  boolProp("The commit contains a promise."),
				"feasible": boolProp("The promise has feasibility evidence."),
				"flag":     boolProp("A flag the cycling repair toggles."),
				"name":     map[string]any{"type": "string", "description": "A string, to feed expressions the wrong type."},
				"secret":   map[string]any{"type": "string", "description": "Text the notes echo, to test redaction."},
			},
		}
	}
	direct := func(name string) *gate.Function {
		return &gate.Function{
			Name: name, Doc: "Reports the scores it is sent.", Evidence: schema(),
			R: "evidence.r", C: `has(evidence.c) ? evidence.c : 1.0`,
			O: `has(evidence.o) ? evidence.o : 1.0`, Ro: `has(evidence.ro) ? evidence.ro : 1.0`,
			VerifiableExt: "evidence.v",
		}
	}
	withRepair := func(f *gate.Function) *gate.Function {
		f.Repair = map[string]string{"r": "math.least(1.0, evidence.r + (has(evidence.bump) ? evidence.bump : 0.0))"}
		return f
	}
	commit := func(f *gate.Function) gate.Commit {
		return gate.Commit{ID: "c_" + f.Name, Name: "commit " + f.Name, Fn: f}
	}

	floor := withRepair(direct("floor"))
	floor.Min = map[string]float64{"R": 0.7, "Ro": 0.5}
	soft := direct("soft")
	soft.Promise, soft.Feasibility = "evidence.promise", "evidence.feasible"
	notes := direct("notes")
	notes.Notes = `has(evidence.secret) ? "note: " + evidence.secret : "no note"`

	errExpr := direct("err_expr")
	errExpr.C = "evidence.not_declared + 1.0" // no such key
	outOfRange := direct("out_of_range")
	outOfRange.O = "evidence.r * 2.0"
	infinite := direct("infinite")
	infinite.Ro = "evidence.r / 0.0"
	nonNumber := direct("non_number")
	nonNumber.R = "evidence.name"
	nonBool := direct("non_bool")
	nonBool.VerifiableExt = "evidence.name"
	notesNonString := direct("notes_non_string")
	notesNonString.Notes = "evidence.r"
	badRepair := direct("bad_repair")
	badRepair.Repair = map[string]string{"r": `"high"`}
	cycling := direct("cycling")
	cycling.Repair = map[string]string{"flag": "!evidence.flag"}
	softFault := direct("soft_fault")
	softFault.Promise = "evidence.name"

	c := gate.Case{ID: "toy", Name: "Toy", Description: "Scores read from the evidence."}
	for _, f := range []*gate.Function{
		withRepair(direct("repair")), direct("norepair"), floor, notes,
		errExpr, outOfRange, infinite, nonNumber, nonBool, notesNonString, badRepair, cycling,
	} {
		c.Commits = append(c.Commits, commit(f))
	}
	c.Commits = append(c.Commits,
		gate.Commit{ID: "c_soft", Name: "commit soft", SoftCommit: true, Fn: soft},
		gate.Commit{ID: "c_soft_fault", Name: "commit soft_fault", SoftCommit: true, Fn: softFault},
		gate.Commit{ID: "c_person", Name: "commit person", BypassToHuman: true},
	)
	return c
}

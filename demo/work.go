package demo

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/service"
)

// Work counts what SeedWork left for people to do.
type Work struct {
	Approvals int // pending approvals: human-gate requests and proposals
	Shadows   int // shadow proposals waiting for a comparison
	Audits    int // sampled audits of items the agent handled alone
	Gate      int // gate decisions recorded
}

// sampledWanted is how many sampled audits SeedWork tries to leave per
// auto step it routes; sampleTries bounds the items it routes for them.
const (
	sampledWanted = 2
	sampleTries   = 80
)

// SeedWork leaves work waiting for the people of every demo workspace, made
// through the service exactly as an agent makes it (so each piece is
// decided by the step's lane, checked, audited and real): capability calls
// of human gates and of steps in propose become pending approvals, calls
// of steps in shadow become shadow proposals, items of steps in auto are
// routed until some are sampled for audit (carrying the agent's output),
// and the evidence gate of every gated workspace scores a few submissions.
// Each workspace gets an agent key of its own, named "demo agent (seeded
// work)", so the audit log says who asked. Items carry business ids
// (BILL-771, LOAD-4410, COMM-1042). Call it after Seed: the lanes Seed
// leaves decide what each call becomes.
func SeedWork(ctx context.Context, svc *service.Service) (Work, error) {
	var w Work
	for _, ws := range svc.WorkspaceIDs() {
		_, tok, err := svc.CreateKey(ctx, "demo", ladder.KeyRequest{Workspace: ws, Kind: ladder.KeyAgent, Name: "demo agent (seeded work)"})
		if err != nil {
			return w, fmt.Errorf("seed work: agent key for %s: %w", ws, err)
		}
		p, err := svc.Authenticate(ctx, tok)
		if err != nil {
			return w, fmt.Errorf("seed work: agent key for %s: %w", ws, err)
		}
		s := seeder{ctx: ctx, svc: svc, p: p, w: &w}
		switch ws {
		case "vantrow-bills":
			s.bills()
		case "checkcall-loads":
			s.checkCalls()
		case "iia-gate":
			s.investments()
		case "partner-programs":
			s.partners()
		}
		if s.err != nil {
			return w, fmt.Errorf("seed work in %s: %w", ws, s.err)
		}
	}
	return w, nil
}

// seeder makes one workspace's work; the first unexpected error stops it.
type seeder struct {
	ctx context.Context
	svc *service.Service
	p   ladder.Principal
	w   *Work
	err error
}

// call calls a capability with args and counts what it became. A refusal
// a person must handle (STEP_NEEDS_PERSON with a shadow record, GATE_HELD)
// is an expected answer, not an error.
func (s *seeder) call(capability string, args map[string]any) ladder.CallResult {
	if s.err != nil {
		return ladder.CallResult{}
	}
	raw, err := json.Marshal(args)
	if err != nil {
		s.err = err
		return ladder.CallResult{}
	}
	res, err := s.svc.CallCapability(s.ctx, s.p, capability, raw)
	if err != nil {
		e := ladder.AsError(err)
		switch e.Code {
		case ladder.CodeStepNeedsPerson:
			if id, _ := e.Data["proposal_id"].(string); id != "" {
				s.w.Shadows++
			}
			return res
		case ladder.CodeGateHeld:
			return res
		}
		s.err = fmt.Errorf("%s: %w", capability, err)
		return res
	}
	if res.ApprovalID != "" && res.Status == ladder.CallResultApprovalRequested {
		s.w.Approvals++
	}
	if res.RouteID != "" && res.Decision == string(ladder.DecisionActAlone) {
		if rt, err := s.svc.GetRoute(s.ctx, s.p, res.RouteID); err == nil && rt.Audit {
			s.w.Audits++
		}
	}
	return res
}

// route routes an item with the agent's output as features; it reports
// whether the route was sampled for audit.
func (s *seeder) route(step, item string, features map[string]any) bool {
	if s.err != nil {
		return false
	}
	raw, err := json.Marshal(features)
	if err != nil {
		s.err = err
		return false
	}
	rt, err := s.svc.Route(s.ctx, s.p, ladder.RouteRequest{Step: step, Item: item, Features: raw})
	if err != nil {
		s.err = fmt.Errorf("route %s %s: %w", step, item, err)
		return false
	}
	if rt.Audit {
		s.w.Audits++
	}
	return rt.Audit
}

// authorize asks the evidence gate; a refusal of the request itself is an
// error, any verdict is not.
func (s *seeder) authorize(gateCase, fn string, evidence map[string]any) {
	if s.err != nil {
		return
	}
	raw, err := json.Marshal(evidence)
	if err != nil {
		s.err = err
		return
	}
	if _, err := s.svc.Authorize(s.ctx, s.p, ladder.AuthorizeRequest{Case: gateCase, PreconditionFn: fn, Evidence: raw}); err != nil {
		s.err = fmt.Errorf("authorize %s/%s: %w", gateCase, fn, err)
		return
	}
	s.w.Gate++
}

// sampleAuto routes items of an auto step until sampledWanted of them are
// sampled for audit (or sampleTries items are routed): item(i) names the
// i-th item and out(i) is the agent's output for it.
func (s *seeder) sampleAuto(step string, item func(int) string, out func(int) map[string]any) {
	got := 0
	for i := 0; i < sampleTries && got < sampledWanted && s.err == nil; i++ {
		if s.route(step, item(i), out(i)) {
			got++
		}
	}
}

// bills: rate checks waiting for approval, releases of held payments in
// shadow, posted bills and read bills sampled for audit, and the
// release_payment gate scoring three releases.
func (s *seeder) bills() {
	rates := []struct {
		bill              string
		linehaul, surchge float64
	}{{"BILL-771", 2450.00, 318.50}, {"BILL-772", 1875.25, 244.10}, {"BILL-773", 3120.00, 405.60}}
	for _, r := range rates {
		s.call("rates:approveRate", map[string]any{"bill_id": r.bill, "linehaul_usd": r.linehaul, "fuel_surcharge_usd": r.surchge, "idempotency_key": "rate-" + r.bill})
	}
	holds := []struct {
		bill    string
		dispute bool
	}{{"BILL-781", false}, {"BILL-782", true}}
	for _, h := range holds {
		s.call("payments:releaseHold", map[string]any{"bill_id": h.bill, "idempotency_key": "release-" + h.bill, "evidence": map[string]any{
			"bill_id": h.bill, "pod_received": true, "invoice_matches_rate_con": true, "carrier_docs_verified": true,
			"dispute_open": h.dispute, "hold_reason_cleared_before_release": true}})
	}
	// post_tms runs alone; calls go on until some are sampled for audit.
	posted := 0
	for i := 0; i < sampleTries && posted < sampledWanted && s.err == nil; i++ {
		before := s.w.Audits
		bill := fmt.Sprintf("BILL-%d", 700+i)
		res := s.call("tms:postBill", map[string]any{"bill_id": bill, "amount_usd": 1200 + float64(i*37%900) + 0.75, "idempotency_key": "post-" + bill})
		if s.w.Audits > before {
			posted++
		}
		if res.Decision != "" && res.Decision != string(ladder.DecisionActAlone) {
			break // not in auto after all: one proposal is enough
		}
	}
	s.sampleAuto("read_bill", func(i int) string { return fmt.Sprintf("BILL-%d", 600+i) }, func(i int) map[string]any {
		return map[string]any{"carrier": []string{"Redline Freight", "Tallgrass Carriers", "Bluewater Logistics"}[i%3], "load_id": fmt.Sprintf("LOAD-%d", 4300+i),
			"linehaul_usd": 1500 + float64(i*53%1200), "fuel_surcharge_usd": 190 + float64(i*7%80), "total_usd": 1690 + float64(i*53%1200) + float64(i*7%80)}
	})
	for _, ev := range []map[string]any{
		{"bill_id": "BILL-781", "pod_received": true, "invoice_matches_rate_con": true, "carrier_docs_verified": true, "dispute_open": false, "hold_reason_cleared_before_release": true},
		{"bill_id": "BILL-782", "pod_received": true, "invoice_matches_rate_con": true, "carrier_docs_verified": true, "dispute_open": true, "hold_reason_cleared_before_release": true, "note": "Carrier disputes the detention charge."},
		{"bill_id": "BILL-783", "pod_received": true, "invoice_matches_rate_con": true, "carrier_docs_verified": false, "dispute_open": false, "hold_reason_cleared_before_release": false},
	} {
		s.authorize("release_payment", "score_release_hold", ev)
	}
}

// checkCalls: ETAs captured alone, some sampled for audit.
func (s *seeder) checkCalls() {
	cities := []string{"Joplin, MO", "Amarillo, TX", "Flagstaff, AZ", "Gallup, NM"}
	s.sampleAuto("capture_eta", func(i int) string { return fmt.Sprintf("LOAD-%d", 4410+i) }, func(i int) map[string]any {
		return map[string]any{"location": cities[i%len(cities)], "eta": fmt.Sprintf("2026-09-0%dT%02d:30:00Z", 2+i%3, 8+i%10), "source": []string{"tracking", "driver call"}[i%2]}
	})
}

// investments: the ai_investment gate scoring decisions and valuations.
func (s *seeder) investments() {
	for _, ev := range []map[string]any{
		{"filing_license_verified": true, "data_compliance_verified": true, "safety_certified": true, "controllability_data_present": true, "privacy_compliance_verified": true,
			"cross_border_compliance_verified": true, "compliance_before_operations": true, "evidence_source_verified": true},
		{"filing_license_verified": true, "data_compliance_verified": true, "safety_certified": false, "controllability_data_present": false, "privacy_compliance_verified": true,
			"cross_border_compliance_verified": false, "compliance_before_operations": false, "evidence_source_verified": true, "governance_gap_externally_verifiable": false},
	} {
		s.authorize("ai_investment", "score_invest_governance", ev)
	}
	for _, ev := range []map[string]any{
		{"production_deployed": true, "paying_contracts_verified": true, "industry_embedded": true, "economic_value_quantified": true, "repeat_orders": true,
			"delivery_before_repeat_claim": true, "contract_evidence_verified_third_party": true},
		{"production_deployed": true, "paying_contracts_verified": false, "industry_embedded": false, "economic_value_quantified": false, "repeat_orders": false,
			"delivery_before_repeat_claim": false, "landing_gap_externally_verifiable": false, "analyst_note": "Pilots only; no paying customer yet."},
	} {
		s.authorize("ai_investment", "score_landing_level", ev)
	}
}

// partners: human-gate requests waiting for a person.
func (s *seeder) partners() {
	scope := func(m map[string]any) map[string]any {
		m["program"], m["relationship"] = "partner-2027", "relationship:partner-2027:creator-1"
		return m
	}
	s.call("ticket6:approveCommission", scope(map[string]any{"commission_id": "COMM-1042", "note": "Order 88121 shipped and was not returned in 30 days.", "idempotency_key": "approve-COMM-1042"}))
	s.call("ticket6:approveCommission", scope(map[string]any{"commission_id": "COMM-1047", "note": "Second order of the same customer; within the rulebook.", "idempotency_key": "approve-COMM-1047"}))
	s.call("campaigns:approveCampaign", scope(map[string]any{"campaign_id": "CAMP-2027-SPRING", "note": "Spring launch with the creator's discount code.", "idempotency_key": "approve-CAMP-2027-SPRING"}))
}

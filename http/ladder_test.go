package http_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ladderhq/ladder/internal/testenv"
)

// climbConfig has small thresholds so a test can walk a step up the ladder
// with a few dozen reviews.
const climbConfig = `
workspaces:
  - id: acme
    queues:
      - id: pay
        steps:
          - id: pay_invoice
            name: Pay the invoice
            money_moving: true
            lane: shadow
            audit_rate: 1
            rules: {propose_min_weeks: 1, propose_min_n: 20, propose_lower: 0.8, auto_min_weeks: 1, auto_min_n: 30, auto_lower: 0.85}
          - id: file_invoice
            name: File the invoice
            lane: propose
  - id: other
    queues:
      - id: q
        steps:
          - id: s
            name: Some step
            lane: shadow
`

func TestRouteFollowsLaneAndIsIdempotent(t *testing.T) {
	e := testenv.Start(t, "")
	agent := e.Keys["vantrow-bills/agent"]
	tests := []struct{ step, decision, lane string }{
		{"post_tms", "act_alone", "auto"},
		{"Read the bill", "act_alone", "auto"},
		{"rate_check", "propose", "propose"},
		{"DECIDE hold-or-release!", "human_only", "shadow"},
		{"Send the remittance", "human_only", "human_only"},
	}
	for _, tt := range tests {
		r := e.Do("POST", "/v1/route", agent, map[string]any{"step": tt.step, "item": "BILL-1"})
		if r.Status != 200 || r.Body["decision"] != tt.decision || r.Body["lane"] != tt.lane {
			t.Errorf("%s: got %d %v/%v, want %s/%s (%s)", tt.step, r.Status, r.Body["decision"], r.Body["lane"], tt.decision, tt.lane, r.Raw)
		}
		for _, f := range []string{"decision", "lane", "audit", "audit_rate", "reason", "route_id"} {
			if _, ok := r.Body[f]; !ok {
				t.Errorf("%s: route answer lacks %q", tt.step, f)
			}
		}
	}
	first := e.Do("POST", "/v1/route", agent, map[string]any{"step": "post_tms", "item": "BILL-77"})
	again := e.Do("POST", "/v1/route", agent, map[string]any{"step": "Post to the TMS", "item": "BILL-77"})
	if first.Body["route_id"] != again.Body["route_id"] {
		t.Fatalf("repeated route got a new id: %v vs %v", first.Body["route_id"], again.Body["route_id"])
	}
	// Every route is in the audit log.
	recs, err := e.Store.ListAudit(t.Context(), auditQuery("vantrow-bills", "route"))
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(tests)+1 {
		t.Fatalf("audit has %d route records, want %d", len(recs), len(tests)+1)
	}
}

func TestAuditSamplingIsDeterministicAndNearTheRate(t *testing.T) {
	e := testenv.Start(t, "")
	agent := e.Keys["vantrow-bills/agent"]
	sampled := 0
	const n = 400
	for i := 0; i < n; i++ {
		r := e.Do("POST", "/v1/route", agent, map[string]any{"step": "post_tms", "item": fmt.Sprintf("BILL-%d", i)})
		if r.Body["audit"] == true {
			sampled++
		}
	}
	// post_tms audits at 0.1: 400 items give about 40 (binomial sd 6).
	if sampled < 16 || sampled > 64 {
		t.Fatalf("sampled %d of %d at rate 0.1", sampled, n)
	}
	// Same item, same answer, even from another service with the same secret.
	d1 := e.Svc.Decide("vantrow-bills", mustStep(t, e, "post_tms"), mustState(t, e, "bills", "post_tms"), "BILL-5")
	d2 := e.Svc.Decide("vantrow-bills", mustStep(t, e, "post_tms"), mustState(t, e, "bills", "post_tms"), "BILL-5")
	if d1.Audit != d2.Audit {
		t.Fatal("sampling is not deterministic")
	}
}

func TestRouteBadInput(t *testing.T) {
	e := testenv.Start(t, "")
	agent := e.Keys["vantrow-bills/agent"]
	r := e.Do("POST", "/v1/route", agent, map[string]any{"step": "Check the fuel surcharge", "item": "B"})
	if r.Status != 404 || r.ErrorCode() != "STEP_NOT_FOUND" || !strings.Contains(r.ErrorHint(), "GET /v1/steps") {
		t.Fatalf("unknown step: %d %s", r.Status, r.Raw)
	}
	r = e.Do("POST", "/v1/route", agent, map[string]any{"step": "post_tms"})
	if r.Status != 400 || !strings.Contains(string(r.Raw), `"field":"item"`) {
		t.Fatalf("missing item: %d %s", r.Status, r.Raw)
	}
}

func TestReviewRules(t *testing.T) {
	e := testenv.Start(t, climbConfig)
	agent, human := e.Keys["acme/agent"], e.Keys["acme/human"]
	rt := e.Do("POST", "/v1/route", agent, map[string]any{"step": "pay_invoice", "item": "I-1"})
	id := rt.Body["route_id"].(string)

	if r := e.Do("POST", "/v1/routes/"+id+"/review", human, map[string]any{"verdict": "maybe"}); r.Status != 400 || !strings.Contains(string(r.Raw), "agree, disagree") {
		t.Fatalf("bad verdict: %d %s", r.Status, r.Raw)
	}
	if r := e.Do("POST", "/v1/routes/rt_nope/review", human, map[string]any{"verdict": "agree"}); r.Status != 404 || r.ErrorCode() != "ROUTE_NOT_FOUND" {
		t.Fatalf("unknown route: %d %s", r.Status, r.Raw)
	}
	if r := e.Do("POST", "/v1/routes/"+id+"/review", e.Keys["other/human"], map[string]any{"verdict": "agree"}); r.Status != 404 || r.ErrorCode() != "ROUTE_NOT_FOUND" {
		t.Fatalf("another workspace's route: %d %s (must look like an unknown route)", r.Status, r.Raw)
	}
	if r := e.Do("POST", "/v1/routes/"+id+"/review", agent, map[string]any{"verdict": "agree"}); r.Status != 403 || r.ErrorCode() != "AGENT_KEY_REFUSED" {
		t.Fatalf("agent reviewing: %d %s", r.Status, r.Raw)
	}
	if r := e.Do("POST", "/v1/routes/"+id+"/review", human, map[string]any{"verdict": "agree"}); r.Status != 201 {
		t.Fatalf("review: %d %s", r.Status, r.Raw)
	}
	if r := e.Do("POST", "/v1/routes/"+id+"/review", human, map[string]any{"verdict": "disagree"}); r.Status != 409 || r.ErrorCode() != "ALREADY_REVIEWED" {
		t.Fatalf("second review: %d %s", r.Status, r.Raw)
	}
	if r := e.Do("POST", "/v1/routes/"+id+"/review", human, map[string]any{"verdict": "disagree", "severity": 3, "adjudication": true}); r.Status != 201 {
		t.Fatalf("adjudication: %d %s", r.Status, r.Raw)
	}
	pack := e.Do("GET", "/v1/steps/pay/pay_invoice/evidence", human, nil)
	w := pack.Body["figures"].(map[string]any)["weekly"].([]any)
	if row := w[len(w)-1].(map[string]any); row["n"] != 1.0 || row["agreements"] != 0.0 {
		t.Fatalf("adjudication must replace the first verdict, not add one: %v", row)
	}
}

// TestClimbAndDropBack takes a step from shadow to auto by posting reviews
// through the API, checks each lane change in the pack, then sees a
// severity-1 audit failure drop it back to propose.
func TestClimbAndDropBack(t *testing.T) {
	e := testenv.Start(t, climbConfig)
	agent, human := e.Keys["acme/agent"], e.Keys["acme/human"]
	item := 0
	reviewOne := func(body map[string]any) map[string]any {
		t.Helper()
		item++
		rt := e.Do("POST", "/v1/route", agent, map[string]any{"step": "pay_invoice", "item": fmt.Sprintf("I-%d", item)})
		if rt.Status != 200 {
			t.Fatalf("route: %d %s", rt.Status, rt.Raw)
		}
		r := e.Do("POST", "/v1/routes/"+rt.Body["route_id"].(string)+"/review", human, body)
		if r.Status != 201 {
			t.Fatalf("review: %d %s", r.Status, r.Raw)
		}
		return r.Body
	}
	lane := func() string {
		return e.Do("GET", "/v1/steps/pay/pay_invoice/evidence", agent, nil).Body["lane"].(string)
	}

	// Shadow: one week in the lane, then 20 agreements reach the propose bar.
	e.Clock.Advance(8 * 24 * time.Hour)
	for i := 0; i < 19; i++ {
		if res := reviewOne(map[string]any{"verdict": "agree"}); res["lane_change"] != nil {
			t.Fatalf("promoted too early, after %d reviews", i+1)
		}
	}
	res := reviewOne(map[string]any{"verdict": "agree", "operator_error": false})
	if res["lane"] != "propose" || res["lane_change"] == nil {
		t.Fatalf("20th review: want a move to propose, got %v", res)
	}

	// Propose: a week later, with operator-error data, 30 reviews reach auto.
	e.Clock.Advance(8 * 24 * time.Hour)
	for i := 0; i < 9; i++ {
		reviewOne(map[string]any{"verdict": "agree", "operator_error": i == 0})
	}
	if l := lane(); l != "propose" {
		t.Fatalf("lane %s before the auto bar", l)
	}
	for lane() != "auto" && item < 200 {
		reviewOne(map[string]any{"verdict": "agree"})
	}
	if lane() != "auto" {
		t.Fatal("never reached auto")
	}

	// Auto: every item is audited (audit_rate 1); a severity-1 failure drops
	// a money-moving step back to propose.
	rt := e.Do("POST", "/v1/route", agent, map[string]any{"step": "pay_invoice", "item": "I-bad"})
	if rt.Body["decision"] != "act_alone" || rt.Body["audit"] != true {
		t.Fatalf("auto route: %s", rt.Raw)
	}
	r := e.Do("POST", "/v1/routes/"+rt.Body["route_id"].(string)+"/review", human, map[string]any{"verdict": "disagree", "severity": 1, "note": "paid twice"})
	if r.Body["lane"] != "propose" {
		t.Fatalf("after a severity-1 audit failure: %s", r.Raw)
	}

	pack := e.Do("GET", "/v1/steps/pay/pay_invoice/evidence", human, nil)
	changes := pack.Body["lane_changes"].([]any)
	wantRules := []string{"shadow_to_propose", "propose_to_auto", "auto_to_propose_sev1_audit_failure"}
	if len(changes) != len(wantRules) {
		t.Fatalf("lane changes: %v", changes)
	}
	for i, c := range changes {
		c := c.(map[string]any)
		if c["rule"] != wantRules[i] {
			t.Errorf("change %d rule %v, want %s", i, c["rule"], wantRules[i])
		}
		if nums, _ := c["numbers"].(map[string]any); len(nums) == 0 && i < 2 {
			t.Errorf("change %d records no numbers", i)
		}
		if c["actor"] == "" {
			t.Errorf("change %d has no actor", i)
		}
	}
	if len(pack.Body["recent_disagreements"].([]any)) != 1 || len(pack.Body["recent_audits"].([]any)) == 0 {
		t.Errorf("recent disagreements/audits: %v / %v", pack.Body["recent_disagreements"], pack.Body["recent_audits"])
	}
	if n, err := verifyAudit(e); err != nil || n == 0 {
		t.Fatalf("audit chain: %d %v", n, err)
	}
}

func TestPinUnpin(t *testing.T) {
	e := testenv.Start(t, climbConfig)
	human := e.Keys["acme/human"]
	if r := e.Do("POST", "/v1/steps/pay/pay_invoice/pin", human, map[string]any{"lane": "human_only"}); r.Status != 400 {
		t.Fatalf("pin without reason: %d %s", r.Status, r.Raw)
	}
	if r := e.Do("POST", "/v1/steps/pay/pay_invoice/pin", human, map[string]any{"lane": "human_only", "reason": "quarter close"}); r.Status != 200 {
		t.Fatalf("pin: %d %s", r.Status, r.Raw)
	}
	rt := e.Do("POST", "/v1/route", e.Keys["acme/agent"], map[string]any{"step": "pay_invoice", "item": "X"})
	if rt.Body["decision"] != "human_only" || rt.Body["lane"] != "human_only" {
		t.Fatalf("route of a pinned step: %s", rt.Raw)
	}
	if r := e.Do("POST", "/v1/steps/pay/pay_invoice/unpin", human, map[string]any{"reason": "close done"}); r.Status != 200 {
		t.Fatalf("unpin: %d %s", r.Status, r.Raw)
	}
	pack := e.Do("GET", "/v1/steps/pay/pay_invoice/evidence", human, nil)
	changes := pack.Body["lane_changes"].([]any)
	if len(changes) != 2 || changes[0].(map[string]any)["reason"] != "quarter close" {
		t.Fatalf("pin and unpin must show as lane changes: %v", changes)
	}
}

func TestOutcomes(t *testing.T) {
	e := testenv.Start(t, climbConfig)
	agent := e.Keys["acme/agent"]
	if r := e.Do("POST", "/v1/outcomes", agent, map[string]any{"step": "pay_invoice", "item": "I", "handled_by": "robot", "ok": true}); r.Status != 400 {
		t.Fatalf("bad handled_by: %d", r.Status)
	}
	for i := 0; i < 40; i++ {
		for _, by := range []string{"agent", "person"} {
			if r := e.Do("POST", "/v1/outcomes", agent, map[string]any{"step": "pay_invoice", "item": fmt.Sprint(i), "handled_by": by, "ok": true}); r.Status != 201 {
				t.Fatalf("outcome: %d %s", r.Status, r.Raw)
			}
		}
	}
	ot := e.Do("GET", "/v1/steps/pay/pay_invoice/evidence", agent, nil).Body["outcome_test"].(map[string]any)
	if ot["state"] != "PASS" {
		t.Fatalf("40 clean outcomes each: outcome test %v", ot)
	}
}

package http_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/internal/testenv"
)

// goodRelease is release_payment evidence that passes.
func goodRelease(bill string) map[string]any {
	return map[string]any{"bill_id": bill, "pod_received": true, "invoice_matches_rate_con": true, "carrier_docs_verified": true,
		"dispute_open": false, "hold_reason_cleared_before_release": true}
}

func authorizeBody(caseID, fn string, ev map[string]any) map[string]any {
	return map[string]any{"case": caseID, "precondition_fn": fn, "evidence": ev}
}

func TestGateREST(t *testing.T) {
	e := testenv.Start(t, "")
	agent, human, admin := e.Keys["vantrow-bills/agent"], e.Keys["vantrow-bills/human"], e.Keys["vantrow-bills/admin"]

	t.Run("functions", func(t *testing.T) {
		for _, key := range []string{agent, human} {
			r := e.Do("GET", "/v1/gate/functions", key, nil)
			if r.Status != 200 || !strings.Contains(string(r.Raw), `"case_ids":["release_payment"]`) || !strings.Contains(string(r.Raw), `"precondition_fn":"score_release_hold"`) {
				t.Fatalf("functions: %d %s", r.Status, r.Raw)
			}
		}
		r := e.Do("GET", "/v1/gate/functions?case=release_payment", agent, nil)
		if r.Status != 200 || len(r.Body["cases"].([]any)) != 1 {
			t.Fatalf("functions?case: %d %s", r.Status, r.Raw)
		}
		r = e.Do("GET", "/v1/gate/functions?case=ai_investment", agent, nil) // another workspace's case
		if r.Status != 404 || r.ErrorCode() != "UNKNOWN_CASE" || !strings.Contains(r.ErrorHint(), "release_payment") || strings.Contains(string(r.Raw), "ai_investment\"]") {
			t.Fatalf("other workspace's case: %d %s", r.Status, r.Raw)
		}
		if r := e.Do("GET", "/v1/gate/functions", admin, nil); r.Status != 403 || r.ErrorCode() != "KEY_KIND_REFUSED" {
			t.Fatalf("admin key: %d %s", r.Status, r.Raw)
		}
		if r := e.Do("GET", "/v1/gate/functions", "", nil); r.Status != 401 {
			t.Fatalf("no key: %d %s", r.Status, r.Raw)
		}
	})

	var passID string
	t.Run("authorize", func(t *testing.T) {
		r := e.Do("POST", "/v1/gate/authorize", agent, authorizeBody("release_payment", "score_release_hold", goodRelease("B-1")))
		if r.Status != 200 || r.Body["gate_state"] != "PASS" || r.Body["authorized"] != true || r.Body["route"] != "PASS" || r.Body["schema_version"] != "1" {
			t.Fatalf("pass: %d %s", r.Status, r.Raw)
		}
		passID = r.Body["decision_id"].(string)
		// A verdict that is not PASS is still a 200 answer, not a refusal.
		ev := goodRelease("B-2")
		ev["dispute_open"] = true
		r = e.Do("POST", "/v1/gate/authorize", human, authorizeBody("release_payment", "score_release_hold", ev))
		if r.Status != 200 || r.Body["gate_state"] != "ESCALATE" || r.Body["reason_code"] != "DIMENSION_BELOW_FLOOR" || r.Body["authorized"] != false {
			t.Fatalf("floor: %d %s", r.Status, r.Raw)
		}
	})

	t.Run("refusals", func(t *testing.T) {
		tests := []struct {
			name   string
			body   any
			status int
			code   string
			field  string
			hint   string
		}{
			{"unknown case", authorizeBody("release", "score_release_hold", nil), 404, "UNKNOWN_CASE", "case", "valid cases: release_payment"},
			{"unknown function", authorizeBody("release_payment", "score", nil), 404, "UNKNOWN_FUNCTION", "precondition_fn", "score_release_hold"},
			{"missing required evidence field", authorizeBody("release_payment", "score_release_hold", map[string]any{"pod_received": true}), 400, "EVIDENCE_INVALID", "evidence.bill_id", "list_precondition_functions"},
			{"mistyped evidence field", authorizeBody("release_payment", "score_release_hold", map[string]any{"bill_id": 7, "pod_received": true, "invoice_matches_rate_con": true, "carrier_docs_verified": true, "dispute_open": false, "hold_reason_cleared_before_release": true}), 400, "EVIDENCE_INVALID", "evidence.bill_id", "fix evidence.bill_id"},
			{"evidence not an object", `{"case":"release_payment","precondition_fn":"score_release_hold","evidence":[1]}`, 400, "EVIDENCE_INVALID", "evidence", "object"},
			{"no evidence", `{"case":"release_payment","precondition_fn":"score_release_hold"}`, 400, "INVALID_ARGUMENT", "evidence", "list_precondition_functions"},
			{"null evidence", authorizeBody("release_payment", "score_release_hold", nil), 400, "INVALID_ARGUMENT", "evidence", "list_precondition_functions"},
			{"unknown body field", `{"case":"release_payment","precondition_fn":"score_release_hold","evidense":{}}`, 400, "INVALID_ARGUMENT", "evidense", ""},
		}
		for _, tt := range tests {
			r := e.Do("POST", "/v1/gate/authorize", agent, tt.body)
			data, _ := r.Body["error"].(map[string]any)["data"].(map[string]any)
			if r.Status != tt.status || r.ErrorCode() != tt.code || data["field"] != tt.field || !strings.Contains(r.ErrorHint(), tt.hint) {
				t.Errorf("%s: %d %s", tt.name, r.Status, r.Raw)
			}
		}
	})

	t.Run("bypass to human", func(t *testing.T) {
		iia := e.Keys["iia-gate/agent"]
		r := e.Do("POST", "/v1/gate/authorize", iia, authorizeBody("ai_investment", "team_capability", nil))
		data, _ := r.Body["error"].(map[string]any)["data"].(map[string]any)
		if r.Status != 403 || r.ErrorCode() != "BYPASS_TO_HUMAN" || data["reason_code"] != "BYPASS_HUMAN_JUDGMENT_REQUIRED" || data["authorized"] != false {
			t.Fatalf("bypass: %d %s", r.Status, r.Raw)
		}
		h := e.Do("GET", "/v1/gate/history?precondition_fn=team_capability", iia, nil)
		ds := h.Body["decisions"].([]any)
		if len(ds) != 1 || ds[0].(map[string]any)["decision_id"] != data["decision_id"] {
			t.Fatalf("recorded bypass: %s", h.Raw)
		}
	})

	t.Run("history", func(t *testing.T) {
		r := e.Do("GET", "/v1/gate/history", human, nil)
		ds := r.Body["decisions"].([]any)
		if r.Status != 200 || len(ds) != 2 || r.Body["has_more"] != false {
			t.Fatalf("history: %d %s", r.Status, r.Raw)
		}
		r = e.Do("GET", "/v1/gate/history?gate_state=PASS&case=release_payment&action_id=release_hold", agent, nil)
		ds = r.Body["decisions"].([]any)
		if len(ds) != 1 || ds[0].(map[string]any)["decision_id"] != passID {
			t.Fatalf("filtered: %s", r.Raw)
		}
		r = e.Do("GET", "/v1/gate/history?limit=1", agent, nil)
		next, _ := r.Body["next_cursor"].(string)
		if len(r.Body["decisions"].([]any)) != 1 || next == "" {
			t.Fatalf("limit 1: %s", r.Raw)
		}
		r = e.Do("GET", "/v1/gate/history?limit=1&cursor="+url.QueryEscape(next), agent, nil)
		if ds := r.Body["decisions"].([]any); len(ds) != 1 || ds[0].(map[string]any)["decision_id"] != passID || r.Body["next_cursor"] != nil {
			t.Fatalf("second page: %s", r.Raw)
		}
		since := e.Clock.Now().Add(1).Format("2006-01-02T15:04:05.999999999Z07:00")
		if r := e.Do("GET", "/v1/gate/history?since="+url.QueryEscape(since), agent, nil); len(r.Body["decisions"].([]any)) != 0 {
			t.Fatalf("since after every decision: %s", r.Raw)
		}
		for q, code := range map[string]string{
			"cursor=%21%21":  "BAD_CURSOR",
			"cursor=Z2gxOng": "BAD_CURSOR", // gh1:x
			"limit=0":        "INVALID_ARGUMENT",
			"limit=501":      "INVALID_ARGUMENT",
			"gate_state=ok":  "INVALID_ARGUMENT",
			"until=tomorrow": "INVALID_ARGUMENT",
			"state=PASS":     "INVALID_ARGUMENT",
		} {
			r := e.Do("GET", "/v1/gate/history?"+q, agent, nil)
			if r.Status != 400 || r.ErrorCode() != code || r.ErrorHint() == "" {
				t.Errorf("%s: %d %s", q, r.Status, r.Raw)
			}
		}
		// Another workspace sees none of these decisions.
		if r := e.Do("GET", "/v1/gate/history", e.Keys["iia-gate/human"], nil); strings.Contains(string(r.Raw), "release_payment") {
			t.Errorf("iia-gate sees vantrow-bills decisions: %s", r.Raw)
		}
		// Reading history wrote nothing.
		before, _ := e.Store.ListAudit(t.Context(), ladder.AuditQuery{Desc: true, Limit: 1})
		e.Do("GET", "/v1/gate/history?limit=500", agent, nil)
		after, _ := e.Store.ListAudit(t.Context(), ladder.AuditQuery{Desc: true, Limit: 1})
		if before[0].Seq != after[0].Seq {
			t.Errorf("history wrote audit records")
		}
	})

	if n, err := verifyAudit(e); err != nil {
		t.Fatalf("audit chain after %d records: %v", n, err)
	}
	recs, _ := e.Store.ListAudit(t.Context(), auditQuery("vantrow-bills", ladder.AuditGateDecision))
	if len(recs) != 2 {
		t.Errorf("vantrow-bills has %d gate.decision audit records, want 2", len(recs))
	}
}

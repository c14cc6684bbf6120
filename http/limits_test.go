package http_test

import (
	"strings"
	"testing"

	"github.com/ladderhq/ladder"
)

// TestArgumentSizeCaps: a payload or evidence over the capability's limit
// (64 KiB by default) is refused naming the field before anything is
// stored, and so is an edit that grows a payload past it.
func TestArgumentSizeCaps(t *testing.T) {
	c := startCapEnv(t)
	big := strings.Repeat("x", 70<<10)
	before := c.Upstream.Calls()
	for _, tc := range []struct {
		name, capability string
		body             map[string]any
		field            string
	}{
		{"payload", "acme:post", map[string]any{"bill_id": big}, "payload"},
		{"payload of a proposal", "acme:propose", map[string]any{"bill_id": "B-1", "note": big}, "payload"},
		{"evidence", "acme:gated", map[string]any{"bill_id": "B-1", "evidence": map[string]any{"bill_id": "B-1", "ok": true, "pad": big}}, "evidence"},
	} {
		r := c.call(tc.capability, tc.body)
		if r.Status != 400 || !strings.Contains(string(r.Raw), `"field":"`+tc.field+`"`) || !strings.Contains(string(r.Raw), "65536") {
			t.Errorf("%s over the limit: %d %.300s", tc.name, r.Status, r.Raw)
		}
	}
	if c.Upstream.Calls() != before {
		t.Fatal("the upstream ran")
	}
	for _, kind := range []string{ladder.AuditRoute, ladder.AuditApproval, ladder.AuditCall, ladder.AuditGateDecision} {
		if recs, _ := c.Store.ListAudit(t.Context(), ladder.AuditQuery{Workspace: "acme", Kind: kind, Limit: 500}); len(recs) != 0 {
			t.Fatalf("%d %s audit records after refused calls, want 0", len(recs), kind)
		}
	}

	// An edit may not grow a payload past the limit either.
	r := c.call("acme:propose", map[string]any{"bill_id": "B-2", "rate": 1.5})
	if r.Status != 202 {
		t.Fatalf("proposal: %d %s", r.Status, r.Raw)
	}
	id := r.Body["approval_id"].(string)
	ed := c.Do("POST", "/v1/approvals/"+id+"/approve", c.human, map[string]any{"payload": map[string]any{"bill_id": big}})
	if ed.Status != 400 || !strings.Contains(string(ed.Raw), `"field":"payload"`) {
		t.Fatalf("oversized edit: %d %.300s", ed.Status, ed.Raw)
	}
	if st := c.Do("GET", "/v1/approvals/"+id, c.human, nil); st.Body["status"] != "pending" {
		t.Fatalf("approval after the refused edit: %s", st.Raw)
	}
}

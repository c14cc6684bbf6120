package http_test

import (
	"strings"
	"testing"

	"github.com/ladderhq/ladder"
)

// TestArgumentsTravelOnce: a field sent twice under spellings that differ
// only in case, a reserved argument or scope field misspelled in case, and
// a scope name inside the payload (at the call or in an edit) are each
// refused naming the field, before anything is created or run.
func TestArgumentsTravelOnce(t *testing.T) {
	c := startCapEnv(t)
	for _, tc := range []struct {
		name, capability, body, field string
	}{
		{"bill_id inside payload and Bill_id beside it", "acme:post", `{"payload":{"bill_id":"B-1"},"Bill_id":"B-EVIL"}`, "Bill_id"},
		{"idempotency key spelled in another case", "acme:post", `{"bill_id":"B-1","Idempotency_Key":"k"}`, "Idempotency_Key"},
		{"payload spelled in another case", "acme:post", `{"Payload":{"bill_id":"B-1"}}`, "Payload"},
		{"scope field spelled in another case", "acme:human", `{"program":"p1","Program":"p2","payload":{}}`, "Program"},
		{"scope name inside the payload", "acme:human", `{"program":"p1","payload":{"program":"p2"}}`, "payload.program"},
		{"workspace inside the payload", "acme:post", `{"payload":{"bill_id":"B-1","workspace":"other"}}`, "payload.workspace"},
		{"scope beside the payload merges into it", "acme:post", `{"bill_id":"B-1","Scope":"x"}`, "payload.Scope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := c.Upstream.Calls()
			r := c.call(tc.capability, tc.body)
			if r.Status != 400 || !strings.Contains(string(r.Raw), `"field":"`+tc.field+`"`) {
				t.Fatalf("%s: %d %s; want 400 naming %s", tc.body, r.Status, r.Raw, tc.field)
			}
			if c.Upstream.Calls() != before {
				t.Fatal("the upstream ran")
			}
		})
	}
	for _, kind := range []string{ladder.AuditRoute, ladder.AuditApproval, ladder.AuditCall, ladder.AuditGateDecision} {
		if recs, _ := c.Store.ListAudit(t.Context(), ladder.AuditQuery{Workspace: "acme", Kind: kind, Limit: 500}); len(recs) != 0 {
			t.Fatalf("%d %s audit records after refused calls, want 0", len(recs), kind)
		}
	}

	// An edit that slips a scope into the payload is refused, and the
	// approval stays pending.
	r := c.call("acme:human", map[string]any{"program": "p1", "payload": map[string]any{"commission_id": "c-1"}})
	if r.Status != 202 {
		t.Fatalf("human gate call: %d %s", r.Status, r.Raw)
	}
	id := r.Body["approval_id"].(string)
	ed := c.Do("POST", "/v1/approvals/"+id+"/approve", c.human, map[string]any{"payload": map[string]any{"commission_id": "c-1", "Program": "p2"}})
	if ed.Status != 400 || !strings.Contains(string(ed.Raw), `"field":"payload.Program"`) {
		t.Fatalf("edit with a scope name: %d %s", ed.Status, ed.Raw)
	}
	if st := c.Do("GET", "/v1/approvals/"+id, c.human, nil); st.Body["status"] != "pending" {
		t.Fatalf("approval after the refused edit: %s", st.Raw)
	}
}

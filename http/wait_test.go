package http_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/internal/faultstore"
)

// TestApprovalWait: an agent waiting on its approval (GET
// /v1/approvals/{id}?wait=, and approval_status with wait over MCP) gets
// the person's decision as soon as it is stored, well before its wait
// ends; with nobody deciding, the wait ends with pending.
func TestApprovalWait(t *testing.T) {
	c := startCapEnv(t)
	request := func(ref string) string {
		r := c.call("acme:human", map[string]any{"program": "p1", "payload": map[string]any{"commission_id": ref, "relationship": "r-1"}})
		if r.Status != 202 {
			t.Fatalf("human gate: %d %s", r.Status, r.Raw)
		}
		return r.Body["approval_id"].(string)
	}

	t.Run("rest", func(t *testing.T) {
		id := request("c-wait-rest")
		type answer struct {
			status string
			raw    string
			took   time.Duration
		}
		done := make(chan answer, 1)
		start := time.Now()
		go func() {
			r := c.Do("GET", "/v1/approvals/"+id+"?wait=30", c.agent, nil)
			s, _ := r.Body["status"].(string)
			done <- answer{s, string(r.Raw), time.Since(start)}
		}()
		time.Sleep(300 * time.Millisecond)
		select {
		case a := <-done:
			t.Fatalf("the wait answered before anyone decided: %s", a.raw)
		default:
		}
		if r := c.Do("POST", "/v1/approvals/"+id+"/reject", c.human, map[string]any{"reason": "not this one"}); r.Status != 200 {
			t.Fatalf("reject: %d %s", r.Status, r.Raw)
		}
		select {
		case a := <-done:
			if a.status != "rejected" {
				t.Fatalf("waiting agent got %s", a.raw)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the waiting agent did not hear of the decision before its wait ended")
		}
	})

	t.Run("mcp", func(t *testing.T) {
		id := request("c-wait-mcp")
		done := make(chan string, 1)
		go func() {
			r := c.Do("POST", "/mcp", c.agent, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
				"params": map[string]any{"name": "approval_status", "arguments": map[string]any{"approval_id": id, "wait": 30}}})
			done <- string(r.Raw)
		}()
		time.Sleep(300 * time.Millisecond)
		if r := c.Do("POST", "/v1/approvals/"+id+"/approve", c.human, nil); r.Status != 200 {
			t.Fatalf("approve: %d %s", r.Status, r.Raw)
		}
		select {
		case raw := <-done:
			var out struct {
				Result struct {
					StructuredContent struct {
						Status string `json:"status"`
					} `json:"structuredContent"`
				} `json:"result"`
			}
			if err := json.Unmarshal([]byte(raw), &out); err != nil || out.Result.StructuredContent.Status != "approved" {
				t.Fatalf("waiting agent got %s", raw)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the waiting agent did not hear of the decision before its wait ended")
		}
	})

	t.Run("nobody decides", func(t *testing.T) {
		id := request("c-wait-none")
		start := time.Now()
		r := c.Do("GET", "/v1/approvals/"+id+"?wait=1", c.agent, nil)
		if r.Status != 200 || r.Body["status"] != "pending" || time.Since(start) < time.Second {
			t.Fatalf("after %s: %d %s, want pending once the wait ended", time.Since(start), r.Status, r.Raw)
		}
	})

	t.Run("bad wait", func(t *testing.T) {
		id := request("c-wait-bad")
		for _, w := range []string{"61", "-1", "soon"} {
			r := c.Do("GET", fmt.Sprintf("/v1/approvals/%s?wait=%s", id, w), c.agent, nil)
			if r.Status != 400 || r.ErrorCode() != "INVALID_ARGUMENT" {
				t.Errorf("wait=%s: %d %s", w, r.Status, r.Raw)
			}
		}
	})
}

// TestAuditUnavailableEvent: once durable writes work again after an
// outage, an audit.unavailable event (and audit record) of each workspace
// says when they failed, ready for the webhooks.
func TestAuditUnavailableEvent(t *testing.T) {
	e, fs := faultEnv(t)
	agent := e.Keys["acme/agent"]
	fs.FailWrites(faultstore.ErrDiskFull)
	if r := e.Do("POST", "/v1/route", agent, map[string]any{"step": "auto_step", "item": "during"}); r.Status != 503 {
		t.Fatalf("route during the fault: %d %s", r.Status, r.Raw)
	}
	fs.FailWrites(nil)
	if r := e.Do("POST", "/v1/route", agent, map[string]any{"step": "auto_step", "item": "after"}); r.Status != 200 {
		t.Fatalf("route after the fault: %d %s", r.Status, r.Raw)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := e.Store.FanOut(t.Context(), 100, func(ev ladder.Event) []string { return []string{ev.Workspace + "/" + ev.Type} }); err != nil {
			t.Fatal(err)
		}
		ds, err := e.Store.ListDeliveries(t.Context(), ladder.DeliveryQuery{Workspace: "acme", EventID: "", Endpoint: "acme/" + ladder.EventAuditUnavailable})
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) == 1 {
			got, err := e.Store.ClaimDeliveries(t.Context(), 10, time.Minute, map[string]int{"acme/" + ladder.EventAuditUnavailable: 10})
			if err != nil || len(got) != 1 || !strings.Contains(got[0].Event.Data.Text, "Audit writes failed") || got[0].Event.Data.Link != "/console/audit" {
				t.Fatalf("audit.unavailable event: %+v %v", got, err)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no audit.unavailable event within 10s: %+v", ds)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestCapabilityCallWait: a capability call that needs a person may wait
// for the decision (REST ?wait=, MCP _meta "ladder/wait"); approved in
// time, the same call answers with the executed result, rejected with the
// rejection; a wait that ends answers approval_requested as usual. wait
// never reaches the payload, whose own field named wait stays its own.
func TestCapabilityCallWait(t *testing.T) {
	c := startCapEnv(t)
	type answer struct {
		status int
		body   map[string]any
		raw    string
		at     time.Time
	}
	// pendingID finds the approval a waiting call created, once it exists.
	pendingID := func(ref string) string {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			r := c.Do("GET", "/v1/approvals?status=pending", c.human, nil)
			approvals, _ := r.Body["approvals"].([]any)
			for _, a := range approvals {
				a := a.(map[string]any)
				if p, _ := a["payload"].(map[string]any); p["commission_id"] == ref {
					return a["approval_id"].(string)
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("no pending approval for %s", ref)
		return ""
	}

	t.Run("rest approved in time", func(t *testing.T) {
		before := c.Upstream.Calls()
		done := make(chan answer, 1)
		go func() {
			r := c.Do("POST", "/v1/capabilities/acme:human/call?wait=30", c.agent,
				map[string]any{"program": "p1", "payload": map[string]any{"commission_id": "c-cw-rest", "relationship": "r-1"}})
			done <- answer{r.Status, r.Body, string(r.Raw), time.Now()}
		}()
		id := pendingID("c-cw-rest")
		select {
		case a := <-done:
			t.Fatalf("the call answered before anyone decided: %s", a.raw)
		case <-time.After(200 * time.Millisecond):
		}
		approve := c.Do("POST", "/v1/approvals/"+id+"/approve", c.human, nil)
		approved := time.Now()
		if approve.Status != 200 {
			t.Fatalf("approve: %d %s", approve.Status, approve.Raw)
		}
		select {
		case a := <-done:
			t.Logf("the waiting call answered %s after the approval's answer", a.at.Sub(approved))
			if a.status != 200 || a.body["status"] != "executed" || a.body["approval_id"] != id || a.body["call_id"] == nil || a.body["result"] == nil {
				t.Fatalf("waiting call got %d %s, want the executed result", a.status, a.raw)
			}
			if c.Upstream.Calls() != before+1 {
				t.Fatalf("upstream calls: %d, want 1", c.Upstream.Calls()-before)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the waiting call did not hear of the approval before its wait ended")
		}
	})

	t.Run("mcp rejected in time", func(t *testing.T) {
		done := make(chan string, 1)
		go func() {
			r := c.Do("POST", "/mcp", c.agent, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
				"params": map[string]any{"name": "acme:human", "_meta": map[string]any{"ladder/wait": 30},
					"arguments": map[string]any{"program": "p1", "payload": map[string]any{"commission_id": "c-cw-mcp"}}}})
			done <- string(r.Raw)
		}()
		id := pendingID("c-cw-mcp")
		if r := c.Do("POST", "/v1/approvals/"+id+"/reject", c.human, map[string]any{"reason": "wrong partner"}); r.Status != 200 {
			t.Fatalf("reject: %d %s", r.Status, r.Raw)
		}
		select {
		case raw := <-done:
			var out struct {
				Result struct {
					StructuredContent struct {
						Status  string `json:"status"`
						Message string `json:"message"`
					} `json:"structuredContent"`
				} `json:"result"`
			}
			if err := json.Unmarshal([]byte(raw), &out); err != nil || out.Result.StructuredContent.Status != "rejected" ||
				!strings.Contains(out.Result.StructuredContent.Message, "wrong partner") {
				t.Fatalf("waiting call got %s", raw)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the waiting call did not hear of the rejection before its wait ended")
		}
	})

	t.Run("approved but the run fails", func(t *testing.T) {
		done := make(chan answer, 1)
		go func() {
			// The upstream tool requires relationship: approving runs it, and it fails.
			r := c.Do("POST", "/v1/capabilities/acme:human/call?wait=30", c.agent, map[string]any{"program": "p1", "payload": map[string]any{"commission_id": "c-cw-fail"}})
			done <- answer{r.Status, r.Body, string(r.Raw), time.Now()}
		}()
		id := pendingID("c-cw-fail")
		if r := c.Do("POST", "/v1/approvals/"+id+"/approve", c.human, nil); r.Status != 502 {
			t.Fatalf("approve: %d %s, want the upstream's failure", r.Status, r.Raw)
		}
		select {
		case a := <-done:
			if a.status != 200 || a.body["status"] != "execution_failed" || !strings.Contains(fmt.Sprint(a.body["message"]), "did not run") || a.body["result"] != nil {
				t.Fatalf("waiting call got %d %s, want execution_failed", a.status, a.raw)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the waiting call did not hear of the failed run before its wait ended")
		}
	})

	t.Run("nobody decides", func(t *testing.T) {
		start := time.Now()
		// The body's own wait is an extra key: a payload field, not the wait.
		r := c.Do("POST", "/v1/capabilities/acme:human/call?wait=1", c.agent, map[string]any{"program": "p1", "payload": map[string]any{"commission_id": "c-cw-none"}, "wait": 5})
		took := time.Since(start)
		if r.Status != 202 || r.Body["status"] != "approval_requested" || took < time.Second || took > 4*time.Second {
			t.Fatalf("after %s: %d %s, want approval_requested once the 1 s wait ended", took, r.Status, r.Raw)
		}
		if p, _ := r.Body["proposal"].(map[string]any); p["wait"] != float64(5) {
			t.Fatalf("the payload lost its wait field: %s", r.Raw)
		}
	})

	t.Run("bad wait", func(t *testing.T) {
		for _, w := range []string{"61", "-1", "soon"} {
			r := c.Do("POST", "/v1/capabilities/acme:human/call?wait="+w, c.agent, map[string]any{"program": "p1", "payload": map[string]any{"commission_id": "c-cw-bad"}})
			if r.Status != 400 || r.ErrorCode() != "INVALID_ARGUMENT" {
				t.Errorf("wait=%s: %d %s", w, r.Status, r.Raw)
			}
		}
		r := c.Do("POST", "/mcp", c.agent, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
			"params": map[string]any{"name": "acme:human", "_meta": map[string]any{"ladder/wait": 61},
				"arguments": map[string]any{"program": "p1", "payload": map[string]any{"commission_id": "c-cw-bad"}}}})
		if !strings.Contains(string(r.Raw), `"isError":true`) || !strings.Contains(string(r.Raw), "ladder/wait") {
			t.Errorf("_meta wait 61: %s", r.Raw)
		}
		if pending := c.Do("GET", "/v1/approvals?status=pending", c.human, nil); strings.Contains(string(pending.Raw), "c-cw-bad") {
			t.Errorf("a refused wait still requested an approval: %s", pending.Raw)
		}
	})
}

package http_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/internal/testenv"
)

// TestLaneChangeEndsRoutePermission reproduces issue 14's walk-around on
// the demo through the REST API: a route made while post_tms ran alone must
// not let a money-moving call run alone after a lane change. Each lane
// change (a pin, a pin and an unpin, a demotion after a severity-1 audit
// failure) ends the permission of every earlier route; the call becomes an
// approval request and nothing reaches the TMS.
func TestLaneChangeEndsRoutePermission(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, e *testenv.Env)
	}{
		{"pin", func(t *testing.T, e *testenv.Env) {
			mustDo(t, e, 200, "POST", "/v1/steps/bills/post_tms/pin", e.Keys["vantrow-bills/human"], map[string]any{"lane": "propose", "reason": "incident"})
		}},
		{"pin then unpin", func(t *testing.T, e *testenv.Env) {
			human := e.Keys["vantrow-bills/human"]
			mustDo(t, e, 200, "POST", "/v1/steps/bills/post_tms/pin", human, map[string]any{"lane": "propose", "reason": "incident"})
			mustDo(t, e, 200, "POST", "/v1/steps/bills/post_tms/unpin", human, map[string]any{"reason": "incident over; the rules decide again"})
		}},
		{"demotion after a severity-1 audit failure", func(t *testing.T, e *testenv.Env) {
			rt := mustDo(t, e, 200, "POST", "/v1/route", e.Keys["vantrow-bills/agent"], map[string]any{"step": "post_tms", "item": "audited-1"})
			r := mustDo(t, e, 201, "POST", "/v1/routes/"+rt.Body["route_id"].(string)+"/review", e.Keys["vantrow-bills/human"],
				map[string]any{"verdict": "disagree", "severity": 1, "note": "posted twice"})
			if r.Body["lane"] != "propose" {
				t.Fatalf("a severity-1 audit failure did not demote post_tms: %s", r.Raw)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := testenv.Start(t, "")
			agent := e.Keys["vantrow-bills/agent"]
			rt := mustDo(t, e, 200, "POST", "/v1/route", agent, map[string]any{"step": "post_tms", "item": "stock-9"})
			if rt.Body["decision"] != "act_alone" || rt.Body["lane"] != "auto" {
				t.Fatalf("before the lane change: %s", rt.Raw)
			}
			tc.change(t, e)
			before := e.Upstream.Calls()

			// The attack of issue 14: the idempotency key names the routed
			// item, the payload another bill.
			r := e.Do("POST", "/v1/capabilities/tms:postBill/call", agent, map[string]any{"bill_id": "B-EVIL", "amount_usd": 99999, "idempotency_key": "stock-9"})
			if r.Status != 202 || r.Body["status"] != "approval_requested" || r.Body["lane"] != "propose" {
				t.Fatalf("call after the lane change: %d %s; want approval_requested in propose", r.Status, r.Raw)
			}
			// The routed item itself is decided afresh too.
			r = e.Do("POST", "/v1/capabilities/tms:postBill/call", agent, map[string]any{"bill_id": "stock-9", "amount_usd": 10, "idempotency_key": "k-2"})
			if r.Status != 202 || r.Body["status"] != "approval_requested" {
				t.Fatalf("call for the routed item after the lane change: %d %s", r.Status, r.Raw)
			}
			if n := e.Upstream.Calls() - before; n != 0 {
				t.Fatalf("the TMS was called %d times after the lane change", n)
			}
			calls, err := e.Store.ListAudit(t.Context(), ladder.AuditQuery{Workspace: "vantrow-bills", Kind: ladder.AuditCall})
			if err != nil || len(calls) != 0 {
				t.Fatalf("call audit records after the lane change: %d (%v), want 0", len(calls), err)
			}
			// Routing the item again is a new route under the new lane.
			again := mustDo(t, e, 200, "POST", "/v1/route", agent, map[string]any{"step": "post_tms", "item": "stock-9"})
			if again.Body["route_id"] == rt.Body["route_id"] || again.Body["decision"] != "propose" {
				t.Fatalf("route after the lane change: %s; want a new propose route (first %v)", again.Raw, rt.Body["route_id"])
			}
			if again.Body["lane_epoch"].(float64) <= rt.Body["lane_epoch"].(float64) {
				t.Errorf("lane epoch %v after the change, %v before", again.Body["lane_epoch"], rt.Body["lane_epoch"])
			}
			// Within the new epoch the route is idempotent again.
			if third := mustDo(t, e, 200, "POST", "/v1/route", agent, map[string]any{"step": "post_tms", "item": "stock-9"}); third.Body["route_id"] != again.Body["route_id"] {
				t.Errorf("repeated route in one epoch: %v, want %v", third.Body["route_id"], again.Body["route_id"])
			}
		})
	}
}

// TestCapabilityItemIsThePayloads routes one bill through a step-tied
// capability under 30 idempotency keys: the route, and so the audit
// sample, is the bill's every time, and the agent cannot re-roll it.
func TestCapabilityItemIsThePayloads(t *testing.T) {
	e := testenv.Start(t, "")
	agent := e.Keys["vantrow-bills/agent"]
	routes := map[string]bool{}
	for i := range 30 {
		r := e.Do("POST", "/v1/capabilities/tms:postBill/call", agent, map[string]any{"bill_id": "B-77", "amount_usd": 10 + i, "idempotency_key": fmt.Sprintf("try-%d", i)})
		if r.Status != 200 || r.Body["status"] != "executed" {
			t.Fatalf("call %d: %d %s", i, r.Status, r.Raw)
		}
		routes[r.Body["route_id"].(string)] = true
	}
	if len(routes) != 1 {
		t.Fatalf("one bill got %d routes under 30 idempotency keys, want 1", len(routes))
	}
	recs, err := e.Store.ListAudit(t.Context(), ladder.AuditQuery{Workspace: "vantrow-bills", Kind: ladder.AuditRoute, Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	items, samples := map[string]bool{}, map[any]bool{}
	for _, rec := range recs {
		var d struct {
			Item  string `json:"item"`
			Audit bool   `json:"audit"`
		}
		if err := json.Unmarshal(rec.Data, &d); err != nil {
			t.Fatal(err)
		}
		items[d.Item], samples[d.Audit] = true, true
	}
	if len(recs) != 1 || !items["B-77"] || len(samples) != 1 {
		t.Fatalf("route records %d, items %v, audit decisions %v; want one route of B-77 with one audit decision", len(recs), items, samples)
	}

	// A payload without its item is refused naming the field, and nothing
	// is recorded for it.
	r := e.Do("POST", "/v1/capabilities/tms:postBill/call", agent, map[string]any{"payload": map[string]any{"amount_usd": 1}, "idempotency_key": "no-item"})
	if r.Status != 400 || r.ErrorCode() != "INVALID_ARGUMENT" {
		t.Fatalf("call without bill_id: %d %s", r.Status, r.Raw)
	}
	// The same idempotency key with another bill stays refused.
	r = e.Do("POST", "/v1/capabilities/tms:postBill/call", agent, map[string]any{"bill_id": "B-78", "amount_usd": 10, "idempotency_key": "try-0"})
	if r.Status != 409 || r.ErrorCode() != "IDEMPOTENCY_KEY_REUSED" {
		t.Fatalf("key reused for another bill: %d %s", r.Status, r.Raw)
	}
}

// TestRetryAfterLaneChangeReplays: a call that ran alone and is retried
// with its idempotency key after a pin gets its first result, not a new
// approval; a pending proposal retried after the step reached auto stays
// the proposal and does not run.
func TestRetryAfterLaneChangeReplays(t *testing.T) {
	e := testenv.Start(t, "")
	agent, human := e.Keys["vantrow-bills/agent"], e.Keys["vantrow-bills/human"]
	first := mustDo(t, e, 200, "POST", "/v1/capabilities/tms:postBill/call", agent, map[string]any{"bill_id": "B-1", "amount_usd": 5, "idempotency_key": "B-1"})
	mustDo(t, e, 200, "POST", "/v1/steps/bills/post_tms/pin", human, map[string]any{"lane": "propose", "reason": "incident"})
	again := mustDo(t, e, 200, "POST", "/v1/capabilities/tms:postBill/call", agent, map[string]any{"bill_id": "B-1", "amount_usd": 5, "idempotency_key": "B-1"})
	if again.Body["replayed"] != true || again.Body["call_id"] != first.Body["call_id"] {
		t.Fatalf("retry after the pin: %s; want the first call replayed", again.Raw)
	}
	prop := mustDo(t, e, 202, "POST", "/v1/capabilities/tms:postBill/call", agent, map[string]any{"bill_id": "B-2", "amount_usd": 5, "idempotency_key": "B-2"})
	if prop.Body["status"] != "approval_requested" {
		t.Fatalf("call in propose: %s", prop.Raw)
	}
	mustDo(t, e, 200, "POST", "/v1/steps/bills/post_tms/pin", human, map[string]any{"lane": "auto", "reason": "back to normal"})
	before := e.Upstream.Calls()
	retry := mustDo(t, e, 202, "POST", "/v1/capabilities/tms:postBill/call", agent, map[string]any{"bill_id": "B-2", "amount_usd": 5, "idempotency_key": "B-2"})
	if retry.Body["status"] != "approval_requested" || retry.Body["approval_id"] != prop.Body["approval_id"] || e.Upstream.Calls() != before {
		t.Fatalf("retry of a pending proposal after the step reached auto: %s; want the same approval and no run", retry.Raw)
	}
}

func mustDo(t *testing.T, e *testenv.Env, status int, method, path, key string, body any) testenv.Response {
	t.Helper()
	r := e.Do(method, path, key, body)
	if r.Status != status {
		t.Fatalf("%s %s: %d %s; want %d", method, path, r.Status, r.Raw, status)
	}
	return r
}

// TestApprovalShowsTheStepsLaneNow: a proposal whose step was pinned to
// human_only after it was made shows the lane now to the approver, over
// REST, one approval and the list alike.
func TestApprovalShowsTheStepsLaneNow(t *testing.T) {
	e := testenv.Start(t, "")
	agent, human := e.Keys["vantrow-bills/agent"], e.Keys["vantrow-bills/human"]
	prop := mustDo(t, e, 202, "POST", "/v1/capabilities/rates:approveRate/call", agent, map[string]any{"bill_id": "B-1", "linehaul_usd": 1850, "fuel_surcharge_usd": 212.5})
	id := prop.Body["approval_id"].(string)
	if v := mustDo(t, e, 200, "GET", "/v1/approvals/"+id, human, nil); v.Body["step_lane"] != "propose" {
		t.Fatalf("before the pin: %s", v.Raw)
	}
	mustDo(t, e, 200, "POST", "/v1/steps/bills/rate_check/pin", human, map[string]any{"lane": "human_only", "reason": "rate dispute"})
	if v := mustDo(t, e, 200, "GET", "/v1/approvals/"+id, human, nil); v.Body["step_lane"] != "human_only" || v.Body["status"] != "pending" {
		t.Fatalf("after the pin: %s", v.Raw)
	}
	list := mustDo(t, e, 200, "GET", "/v1/approvals?status=pending", human, nil).Body["approvals"].([]any)
	if len(list) != 1 || list[0].(map[string]any)["step_lane"] != "human_only" {
		t.Fatalf("list after the pin: %v", list)
	}
}

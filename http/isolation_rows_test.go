package http_test

// The probes and rows of the isolation matrix (see isolation_test.go): one
// row per REST endpoint, console page and MCP tool.

import (
	"net/url"
	"slices"
	"strings"
)

// isoProbe is one object of B and how a request names it. owners are the
// workspaces in which the name exists (A ranges over the others); loose
// marks answers that quote nearest names computed from the query alone.
type isoProbe struct {
	name   string
	value  func(f *isoFixture) string
	absent string // the isoNowhere value; isoNowhere(value) when empty
	owners []string
	loose  bool
}

var (
	pRoute    = isoProbe{name: "route", value: func(f *isoFixture) string { return f.routeID }, owners: []string{isoB}}
	pApproval = isoProbe{name: "approval", value: func(f *isoFixture) string { return f.approvalID }, owners: []string{isoB}}
	pEastAppr = isoProbe{name: "approval of partner-east", value: func(f *isoFixture) string { return f.eastApprID }, owners: []string{isoEast}}
	pQueue    = isoProbe{name: "queue", value: func(*isoFixture) string { return "bills" }, absent: "qqqqq", owners: []string{isoB, isoMirror}}
	pStep     = isoProbe{name: "step", value: func(*isoFixture) string { return "post_tms" }, absent: "qqqq_qqq", owners: []string{isoB, isoMirror}, loose: true}
	pCase     = isoProbe{name: "gate case", value: func(*isoFixture) string { return "release_payment" }, absent: "qqqqqqq_qqqqqqq", owners: []string{isoB, isoMirror}}
	pFunc     = isoProbe{name: "precondition fn", value: func(*isoFixture) string { return "score_release_hold" }, absent: "qqqqq_qqqqqqq_qqqq", owners: []string{isoB, isoMirror}}
	pCommit   = isoProbe{name: "commit", value: func(*isoFixture) string { return "release_hold" }, absent: "qqqqqqq_qqqq", owners: []string{isoB, isoMirror}}
	pCap      = isoProbe{name: "capability", value: func(*isoFixture) string { return "tms:postBill" }, absent: "qqq:qqqqqqqq", owners: []string{isoB, isoMirror}}
	pProgram  = isoProbe{name: "scope program", value: func(*isoFixture) string { return "partner-2031" }, absent: "partner-9999", owners: []string{isoEast}}
	pKey      = isoProbe{name: "key", value: func(f *isoFixture) string { return f.isoKeyID }, owners: []string{isoB}}
	pDelivery = isoProbe{name: "delivery", value: func(f *isoFixture) string { return f.deliveryID }, owners: []string{isoB}}
	pSeq      = isoProbe{name: "audit record", value: func(f *isoFixture) string { return f.auditSeq }, absent: "987654321", owners: []string{isoB}}
	pKeyWS    = isoProbe{name: "workspace", value: func(*isoFixture) string { return isoB }, absent: "qqqqqqq-qqqqq", owners: []string{isoB}}
)

// isoRESTRow is one REST route: the key kinds of A that try it, and the
// requests (by object value) that must not tell B's object from none.
type isoRESTRow struct {
	pattern string
	kinds   []string
	probes  []isoProbe
	req     func(v string) (method, path string, body any)
	// list rows name no object: A's answer must hold none of B's data.
	list func() (method, path string, body any)
	// public rows take no key.
	public bool
}

func isoGet(path string) func() (string, string, any) {
	return func() (string, string, any) { return "GET", path, nil }
}

func isoRESTRows() []isoRESTRow {
	pin := map[string]any{"lane": "shadow", "reason": "isolation test"}
	return []isoRESTRow{
		{pattern: "GET /healthz", public: true, list: isoGet("/healthz")},
		{pattern: "GET /readyz", public: true, list: isoGet("/readyz")},
		{pattern: "GET /metrics", public: true, list: isoGet("/metrics")},
		{pattern: "/", kinds: []string{"agent", "human", "admin"}, probes: []isoProbe{pRoute}, req: func(v string) (string, string, any) { return "GET", "/v1/nothing/" + v, nil }},
		{pattern: "GET /v1/keys", kinds: []string{"admin"}, list: isoGet("/v1/keys")},
		{pattern: "POST /v1/keys", kinds: []string{"admin"}, probes: []isoProbe{pKeyWS}, req: func(v string) (string, string, any) {
			return "POST", "/v1/keys", map[string]any{"workspace": v, "kind": "agent"}
		}},
		{pattern: "POST /v1/keys/{id}/revoke", kinds: []string{"admin"}, probes: []isoProbe{pKey}, req: func(v string) (string, string, any) {
			return "POST", "/v1/keys/" + v + "/revoke", nil
		}},
		{pattern: "POST /v1/route", kinds: []string{"agent"}, probes: []isoProbe{pQueue}, req: func(v string) (string, string, any) {
			return "POST", "/v1/route", map[string]any{"queue": v, "step": "post_tms", "item": "BILL-ISO-A"}
		}},
		{pattern: "POST /v1/routes/{route_id}/review", kinds: []string{"human"}, probes: []isoProbe{pRoute}, req: func(v string) (string, string, any) {
			return "POST", "/v1/routes/" + v + "/review", map[string]any{"verdict": "agree"}
		}},
		{pattern: "POST /v1/outcomes", kinds: []string{"agent", "human"}, probes: []isoProbe{pQueue}, req: func(v string) (string, string, any) {
			return "POST", "/v1/outcomes", map[string]any{"queue": v, "step": "post_tms", "item": "BILL-ISO-A", "handled_by": "agent", "ok": true}
		}},
		{pattern: "GET /v1/steps", kinds: []string{"agent", "human"}, probes: []isoProbe{pQueue}, req: func(v string) (string, string, any) {
			return "GET", "/v1/steps?queue=" + url.QueryEscape(v), nil
		}},
		{pattern: "GET /v1/steps/{queue}/{step}/evidence", kinds: []string{"agent", "human"}, probes: []isoProbe{pQueue, pStep}, req: func(v string) (string, string, any) {
			if v == "bills" || v == pQueue.absent {
				return "GET", "/v1/steps/" + v + "/post_tms/evidence", nil
			}
			return "GET", "/v1/steps/-/" + v + "/evidence", nil
		}},
		{pattern: "POST /v1/steps/{queue}/{step}/pin", kinds: []string{"human"}, probes: []isoProbe{pQueue}, req: func(v string) (string, string, any) {
			return "POST", "/v1/steps/" + v + "/post_tms/pin", pin
		}},
		{pattern: "POST /v1/steps/{queue}/{step}/unpin", kinds: []string{"human"}, probes: []isoProbe{pQueue}, req: func(v string) (string, string, any) {
			return "POST", "/v1/steps/" + v + "/post_tms/unpin", map[string]any{"reason": "isolation test"}
		}},
		{pattern: "POST /v1/capabilities/{id}/call", kinds: []string{"agent"}, probes: []isoProbe{pCap, pProgram}, req: func(v string) (string, string, any) {
			if strings.Contains(v, ":") {
				return "POST", "/v1/capabilities/" + v + "/call", map[string]any{"bill_id": "BILL-ISO-A", "amount_usd": 1.0}
			}
			return "POST", "/v1/capabilities/ticket6:readLedger/call", map[string]any{"program": v, "relationship": "relationship:partner-2027:creator-1", "payload": map[string]any{}}
		}},
		{pattern: "GET /v1/capabilities", kinds: []string{"agent", "human"}, list: isoGet("/v1/capabilities")},
		{pattern: "GET /v1/approvals", kinds: []string{"human"}, list: isoGet("/v1/approvals?limit=500")},
		{pattern: "GET /v1/approvals/{id}", kinds: []string{"human", "agent"}, probes: []isoProbe{pApproval, pEastAppr}, req: func(v string) (string, string, any) {
			return "GET", "/v1/approvals/" + v, nil
		}},
		{pattern: "POST /v1/approvals/{id}/approve", kinds: []string{"human"}, probes: []isoProbe{pApproval, pEastAppr}, req: func(v string) (string, string, any) {
			return "POST", "/v1/approvals/" + v + "/approve", map[string]any{"reason": "isolation test"}
		}},
		{pattern: "POST /v1/approvals/{id}/reject", kinds: []string{"human"}, probes: []isoProbe{pApproval, pEastAppr}, req: func(v string) (string, string, any) {
			return "POST", "/v1/approvals/" + v + "/reject", map[string]any{"reason": "isolation test"}
		}},
		{pattern: "POST /v1/approvals/{id}/retry", kinds: []string{"human"}, probes: []isoProbe{pApproval, pEastAppr}, req: func(v string) (string, string, any) {
			return "POST", "/v1/approvals/" + v + "/retry", nil
		}},
		{pattern: "GET /v1/audit", kinds: []string{"human", "admin"}, list: isoGet("/v1/audit?limit=500")},
		{pattern: "GET /v1/webhooks/deliveries", kinds: []string{"human", "admin"}, list: isoGet("/v1/webhooks/deliveries?limit=500")},
		{pattern: "POST /v1/webhooks/deliveries/{id}/redeliver", kinds: []string{"human", "admin"}, probes: []isoProbe{pDelivery}, req: func(v string) (string, string, any) {
			return "POST", "/v1/webhooks/deliveries/" + v + "/redeliver", nil
		}},
		{pattern: "GET /v1/audit/export", kinds: []string{"human", "admin"}, list: isoGet("/v1/audit/export?format=csv")},
		{pattern: "GET /v1/audit/verify", kinds: []string{"human", "admin"}, list: isoGet("/v1/audit/verify")},
		{pattern: "GET /v1/audit/checkpoint", kinds: []string{"human", "admin"}, list: isoGet("/v1/audit/checkpoint")},
		{pattern: "GET /v1/audit/consistency", kinds: []string{"human", "admin"}, list: isoGet("/v1/audit/consistency?from=1&to=1")},
		{pattern: "GET /v1/audit/records/{seq}/proof", kinds: []string{"human", "admin"}, probes: []isoProbe{pSeq},
			req: func(v string) (string, string, any) { return "GET", "/v1/audit/records/" + v + "/proof", nil }},
		{pattern: "GET /.well-known/ladder-checkpoint-key", public: true, list: isoGet("/.well-known/ladder-checkpoint-key")},
		{pattern: "POST /v1/import", kinds: []string{"admin"}, probes: []isoProbe{pStep}, req: func(v string) (string, string, any) {
			return "POST", "/v1/import?format=jsonl", `{"type":"review","at":"2026-09-01T10:00:00Z","step":"` + v + `","item":"ISO-1","lane":"shadow","verdict":"agree"}`
		}},
		{pattern: "GET /v1/gate/functions", kinds: []string{"agent", "human"}, probes: []isoProbe{pCase}, req: func(v string) (string, string, any) {
			return "GET", "/v1/gate/functions?case=" + url.QueryEscape(v), nil
		}},
		{pattern: "POST /v1/gate/authorize", kinds: []string{"agent", "human"}, probes: []isoProbe{pCase, pFunc}, req: func(v string) (string, string, any) {
			c, fn := "release_payment", "score_release_hold"
			if v == pCase.absent || v == "release_payment" {
				c = v
			} else {
				c, fn = "release_payment", v
			}
			return "POST", "/v1/gate/authorize", map[string]any{"case": c, "precondition_fn": fn, "evidence": map[string]any{"bill_id": "BILL-ISO-A"}}
		}},
		{pattern: "GET /v1/gate/history", kinds: []string{"agent", "human"}, probes: []isoProbe{pCase, pFunc, pCommit}, req: func(v string) (string, string, any) {
			switch v {
			case "release_payment", pCase.absent:
				return "GET", "/v1/gate/history?case=" + v, nil
			case "score_release_hold", pFunc.absent:
				return "GET", "/v1/gate/history?precondition_fn=" + v, nil
			}
			return "GET", "/v1/gate/history?action_id=" + v, nil
		}},
	}
}

// isoConsoleRow is one console route, tried by a person of A signed in.
type isoConsoleRow struct {
	pattern string
	probes  []isoProbe
	req     func(v string) (method, path string, form url.Values)
	list    func() (method, path string, form url.Values)
	// public rows need no session.
	public bool
}

func isoCGet(path string) func() (string, string, url.Values) {
	return func() (string, string, url.Values) { return "GET", path, nil }
}

func isoConsoleRows() []isoConsoleRow {
	return []isoConsoleRow{
		{pattern: "GET /console/assets/", public: true, list: isoCGet("/console/assets/console.css")},
		{pattern: "GET /console/{$}", list: isoCGet("/console/")},
		{pattern: "GET /console/signin", public: true, list: isoCGet("/console/signin")},
		{pattern: "POST /console/signin"},  // TestIsolationConsoleSignin
		{pattern: "POST /console/signout"}, // TestIsolationConsoleSignin
		{pattern: "GET /console/overview", list: isoCGet("/console/overview")},
		// Single sign-on: a session's workspace comes from the identity
		// rules (oauth/sso_browser_test.go, TestHydraConsoleSignIn).
		{pattern: "GET /console/oidc/{issuer}/start"},
		{pattern: "GET /console/oidc/{issuer}/callback"},
		{pattern: "GET /console/inbox", list: isoCGet("/console/inbox")},
		{pattern: "GET /console/approvals/{id}", probes: []isoProbe{pApproval, pEastAppr}, req: func(v string) (string, string, url.Values) {
			return "GET", "/console/approvals/" + v, nil
		}},
		{pattern: "POST /console/approvals/{id}/approve", probes: []isoProbe{pApproval, pEastAppr}, req: func(v string) (string, string, url.Values) {
			return "POST", "/console/approvals/" + v + "/approve", url.Values{"reason": {"isolation test"}}
		}},
		{pattern: "POST /console/approvals/{id}/reject", probes: []isoProbe{pApproval, pEastAppr}, req: func(v string) (string, string, url.Values) {
			return "POST", "/console/approvals/" + v + "/reject", url.Values{"reason": {"isolation test"}}
		}},
		{pattern: "GET /console/routes/{id}", probes: []isoProbe{pRoute}, req: func(v string) (string, string, url.Values) {
			return "GET", "/console/routes/" + v, nil
		}},
		{pattern: "POST /console/routes/{id}/review", probes: []isoProbe{pRoute}, req: func(v string) (string, string, url.Values) {
			return "POST", "/console/routes/" + v + "/review", url.Values{"verdict": {"agree"}}
		}},
		{pattern: "GET /console/steps", list: isoCGet("/console/steps")},
		{pattern: "GET /console/webhooks", list: isoCGet("/console/webhooks")},
		{pattern: "POST /console/webhooks/{id}/redeliver", probes: []isoProbe{pDelivery}, req: func(v string) (string, string, url.Values) {
			return "POST", "/console/webhooks/" + v + "/redeliver", nil
		}},
		{pattern: "GET /console/steps/{queue}/{step}", probes: []isoProbe{pQueue}, req: func(v string) (string, string, url.Values) {
			return "GET", "/console/steps/" + v + "/post_tms", nil
		}},
		{pattern: "POST /console/steps/{queue}/{step}/pin", probes: []isoProbe{pQueue}, req: func(v string) (string, string, url.Values) {
			return "POST", "/console/steps/" + v + "/post_tms/pin", url.Values{"lane": {"shadow"}, "reason": {"isolation test"}}
		}},
		{pattern: "POST /console/steps/{queue}/{step}/unpin", probes: []isoProbe{pQueue}, req: func(v string) (string, string, url.Values) {
			return "POST", "/console/steps/" + v + "/post_tms/unpin", url.Values{"reason": {"isolation test"}}
		}},
		{pattern: "GET /console/gate", probes: []isoProbe{pCase, pCommit}, req: func(v string) (string, string, url.Values) {
			if v == "release_payment" || v == pCase.absent {
				return "GET", "/console/gate?case=" + v, nil
			}
			return "GET", "/console/gate?action_id=" + v, nil
		}},
		{pattern: "GET /console/audit", list: isoCGet("/console/audit")},
		{pattern: "GET /console/audit/records/{seq}/proof", probes: []isoProbe{pSeq}, req: func(v string) (string, string, url.Values) {
			return "GET", "/console/audit/records/" + v + "/proof", nil
		}},
		{pattern: "/console/", probes: []isoProbe{pRoute}, req: func(v string) (string, string, url.Values) { return "GET", "/console/nothing/" + v, nil }},
	}
}

// isoMCPRow is one MCP tool: the calls (by object value) A's agent makes.
type isoMCPRow struct {
	tool   string
	probes []isoProbe
	args   func(v string) map[string]any
	list   map[string]any // arguments of a call that names no object
}

func isoMCPRows(f *isoFixture) []isoMCPRow {
	rows := []isoMCPRow{
		{tool: "which_steps_run_alone", probes: []isoProbe{pQueue}, args: func(v string) map[string]any { return map[string]any{"queue": v} }, list: map[string]any{}},
		{tool: "step_evidence", probes: []isoProbe{pQueue, pStep}, args: func(v string) map[string]any {
			if v == "bills" || v == pQueue.absent {
				return map[string]any{"queue": v, "step": "post_tms"}
			}
			return map[string]any{"step": v}
		}},
		{tool: "route_item", probes: []isoProbe{pQueue}, args: func(v string) map[string]any {
			return map[string]any{"queue": v, "step": "post_tms", "item": "BILL-ISO-A"}
		}},
		{tool: "list_precondition_functions", probes: []isoProbe{pCase}, args: func(v string) map[string]any { return map[string]any{"case": v} }, list: map[string]any{}},
		{tool: "authorize", probes: []isoProbe{pCase, pFunc}, args: func(v string) map[string]any {
			c, fn := v, "score_release_hold"
			if v == "score_release_hold" || v == pFunc.absent {
				c, fn = "release_payment", v
			}
			return map[string]any{"case": c, "precondition_fn": fn, "evidence": map[string]any{"bill_id": "BILL-ISO-A"}}
		}},
		{tool: "gate_history_get", probes: []isoProbe{pCase, pFunc, pCommit}, list: map[string]any{}, args: func(v string) map[string]any {
			switch v {
			case "release_payment", pCase.absent:
				return map[string]any{"case": v}
			case "score_release_hold", pFunc.absent:
				return map[string]any{"precondition_fn": v}
			}
			return map[string]any{"action_id": v}
		}},
		{tool: "approval_status", probes: []isoProbe{pApproval, pEastAppr}, args: func(v string) map[string]any { return map[string]any{"approval_id": v} }},
	}
	// Every capability of every workspace is a tool: A calls it by B's
	// name (refused like a name that exists nowhere), and scoped ones with
	// B's scope values.
	for _, ws := range f.e.Svc.WorkspaceIDs() {
		w, _ := f.e.Svc.Workspace(ws)
		for _, c := range w.Capabilities {
			if !c.Served || slices.ContainsFunc(rows, func(r isoMCPRow) bool { return r.tool == c.ID }) {
				continue
			}
			id := c.ID
			owners := []string{}
			for _, o := range f.e.Svc.WorkspaceIDs() {
				if _, ok := f.e.Svc.FindCapability(o, id); ok {
					owners = append(owners, o)
				}
			}
			p := isoProbe{name: "capability " + id, value: func(*isoFixture) string { return id }, absent: "qqqqqqq:" + strings.Repeat("q", len(id)), owners: owners}
			row := isoMCPRow{tool: id, probes: []isoProbe{p}, args: func(v string) map[string]any {
				if v == "partner-2031" || v == pProgram.absent {
					return map[string]any{"__tool": id, "program": v, "relationship": "relationship:partner-2027:creator-1", "payload": map[string]any{"commission_id": "c-iso"}}
				}
				return map[string]any{"__tool": v, "bill_id": "BILL-ISO-A"}
			}}
			if len(c.ScopeFields) > 0 {
				row.probes = append(row.probes, pProgram)
			}
			rows = append(rows, row)
		}
	}
	return rows
}

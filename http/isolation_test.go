package http_test

// The isolation matrix (DESIGN.md §8, issue 10): for every REST endpoint,
// console page and MCP tool, a key of one workspace (A) used on an object of
// another (B) is refused exactly as it is for an id that exists nowhere, so
// A learns nothing of B — not even whether the id exists. Agent keys never
// approve, review, pin or sign in to the console; human keys never reach
// /mcp; an admin key of one workspace never touches another.
//
// The matrix is complete by construction: TestIsolationCoverage reads every
// route registration in http/*.go and console/*.go and every tool that
// tools/list shows in any workspace, and fails when one has no row here.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/ladderhq/ladder/config"
	"github.com/ladderhq/ladder/internal/testenv"
)

// Workspaces of the matrix. isoB owns the objects; isoMirror is a copy of
// isoB's config under another id (same queue, step, case and capability
// ids), and isoEast a copy of partner-programs with scope values of its own.
const (
	isoB      = "vantrow-bills"
	isoMirror = "vantrow-mirror"
	isoEast   = "partner-east"
)

// isolationConfig is the demo config plus isoMirror and isoEast.
func isolationConfig(t *testing.T) string {
	t.Helper()
	demo := string(config.Demo())
	block := func(id, next string) string {
		start := strings.Index(demo, "  - id: "+id+"\n")
		if start < 0 {
			t.Fatalf("demo config has no workspace %s", id)
		}
		rest := demo[start:]
		if next != "" {
			end := strings.Index(rest, "  - id: "+next+"\n")
			if end < 0 {
				t.Fatalf("demo config has no workspace %s after %s", next, id)
			}
			rest = rest[:end]
		}
		return rest
	}
	mirror := strings.Replace(block(isoB, "checkcall-loads"), "  - id: "+isoB+"\n", "  - id: "+isoMirror+"\n", 1)
	east := strings.Replace(block("partner-programs", ""), "  - id: partner-programs\n", "  - id: "+isoEast+"\n", 1)
	east = strings.ReplaceAll(east, "partner-2027", "partner-2031")
	return strings.TrimRight(demo, "\n") + "\n\n" + mirror + "\n" + east
}

// isoFixture holds B's objects, created through the API by B's own keys.
type isoFixture struct {
	e          *testenv.Env
	routeID    string // a route of isoB
	approvalID string // a pending approval of isoB
	eastApprID string // a pending approval of isoEast (a human gate)
	decisionID string // a gate decision of isoB
	isoKeyID   string // isoB's agent key id
	item       string // the item isoB routed
	// secrets are strings of isoB and isoEast data that no other
	// workspace's answer may contain.
	secrets map[string]string // value → owning workspace
}

func isoKeyID(token string) string {
	// ldr_<id>_<secret>
	parts := strings.SplitN(token, "_", 3)
	if len(parts) != 3 {
		return ""
	}
	return parts[1]
}

func newIsoFixture(t *testing.T) *isoFixture {
	t.Helper()
	e := testenv.StartWith(t, isolationConfig(t), testenv.Options{})
	f := &isoFixture{e: e, item: "BILL-ISO-B-0001"}
	res := e.Do("POST", "/v1/route", e.Keys[isoB+"/agent"], map[string]any{"queue": "bills", "step": "read_bill", "item": f.item})
	if res.Status != http.StatusOK {
		t.Fatalf("route in B: %d %s", res.Status, res.Raw)
	}
	f.routeID, _ = res.Body["route_id"].(string)
	res = e.Do("POST", "/v1/capabilities/rates:approveRate/call", e.Keys[isoB+"/agent"], map[string]any{
		"bill_id": "BILL-ISO-B-0002", "linehaul_usd": 1850.0, "fuel_surcharge_usd": 212.5, "idempotency_key": "iso-b-rate-1"})
	if res.Status != http.StatusAccepted {
		t.Fatalf("approval in B: %d %s", res.Status, res.Raw)
	}
	f.approvalID, _ = res.Body["approval_id"].(string)
	res = e.Do("POST", "/v1/capabilities/ticket6:approveCommission/call", e.Keys[isoEast+"/agent"], map[string]any{
		"program": "partner-2031", "relationship": "relationship:partner-2031:creator-1", "payload": map[string]any{"commission_id": "c-east-1"}, "idempotency_key": "iso-east-1"})
	if res.Status != http.StatusAccepted {
		t.Fatalf("approval in east: %d %s", res.Status, res.Raw)
	}
	f.eastApprID, _ = res.Body["approval_id"].(string)
	res = e.Do("POST", "/v1/gate/authorize", e.Keys[isoB+"/agent"], map[string]any{"case": "release_payment", "precondition_fn": "score_release_hold",
		"evidence": map[string]any{"bill_id": "BILL-ISO-B-0003", "pod_received": true, "invoice_matches_rate_con": true, "carrier_docs_verified": true, "dispute_open": false, "hold_reason_cleared_before_release": true}})
	if res.Status != http.StatusOK {
		t.Fatalf("authorize in B: %d %s", res.Status, res.Raw)
	}
	f.decisionID, _ = res.Body["decision_id"].(string)
	f.isoKeyID = isoKeyID(e.Keys[isoB+"/agent"])
	for _, v := range []string{f.routeID, f.approvalID, f.eastApprID, f.decisionID, f.isoKeyID} {
		if v == "" {
			t.Fatalf("fixture: an id is empty: %+v", f)
		}
	}
	f.secrets = map[string]string{}
	for _, v := range []string{f.routeID, f.approvalID, f.decisionID, f.item, "BILL-ISO-B-0002", "BILL-ISO-B-0003", "iso-b-rate-1"} {
		f.secrets[v] = isoB
	}
	for _, v := range []string{f.eastApprID, "c-east-1", "iso-east-1"} {
		f.secrets[v] = isoEast
	}
	for k, tok := range e.Keys {
		ws, _, _ := strings.Cut(k, "/")
		f.secrets[isoKeyID(tok)], f.secrets[tok] = ws, ws
	}
	return f
}

// isoNowhere returns an id shaped like v that exists in no workspace.
func isoNowhere(v string) string {
	prefix := ""
	if i := strings.IndexByte(v, '_'); i > 0 && i <= 3 {
		prefix = v[:i+1]
	}
	return prefix + strings.Repeat("q", max(len(v)-len(prefix), 4))
}

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

// normalize makes two answers comparable: the requested value becomes
// {OBJ}; loose answers also drop the nearest names a miss quotes.
var isoNearestRE = regexp.MustCompile(`(?s)(nearest are: |nearest: |"nearest":\[)[^\]"]*`)

func isoNormalize(b []byte, v string, loose bool) []byte {
	b = bytes.ReplaceAll(b, []byte(v), []byte("{OBJ}"))
	b = bytes.ReplaceAll(b, []byte(url.QueryEscape(v)), []byte("{OBJ}"))
	if loose {
		b = isoNearestRE.ReplaceAll(b, []byte("${1}…"))
	}
	return b
}

type isoAnswer struct {
	status int
	ctype  string
	loc    string
	body   []byte
}

func (a isoAnswer) String() string {
	return fmt.Sprintf("%d %s %s\n%s", a.status, a.ctype, a.loc, a.body)
}

func (a isoAnswer) norm(v string, loose bool) isoAnswer {
	a.body = isoNormalize(a.body, v, loose)
	a.loc = string(isoNormalize([]byte(a.loc), v, loose))
	return a
}

func isoREST(t *testing.T, e *testenv.Env, key, method, path string, body any) isoAnswer {
	t.Helper()
	r := e.Do(method, path, key, body)
	return isoAnswer{status: r.Status, ctype: r.Header.Get("Content-Type"), body: r.Raw}
}

func isoRPC(id int, method string, params any) []byte {
	m := map[string]any{"jsonrpc": "2.0", "id": id, "method": method}
	if params != nil {
		m["params"] = params
	}
	b, _ := json.Marshal(m)
	return b
}

func isoMCP(t *testing.T, e *testenv.Env, key, tool string, args map[string]any) isoAnswer {
	t.Helper()
	a := map[string]any{}
	for k, v := range args {
		if k != "__tool" {
			a[k] = v
		}
	}
	if n, ok := args["__tool"].(string); ok {
		tool = n
	}
	r := e.Do("POST", "/mcp", key, isoRPC(7, "tools/call", map[string]any{"name": tool, "arguments": a}))
	return isoAnswer{status: r.Status, ctype: r.Header.Get("Content-Type"), body: r.Raw}
}

// isoAssertNoLeak fails when an answer to A holds any of B's data.
func isoAssertNoLeak(t *testing.T, f *isoFixture, ws, what string, a isoAnswer) {
	t.Helper()
	for s, owner := range f.secrets {
		if s != "" && owner != ws && (bytes.Contains(a.body, []byte(s)) || strings.Contains(a.loc, s)) {
			t.Errorf("%s: the answer holds %q of another workspace:\n%.600s", what, s, a.body)
		}
	}
}

// isoOthers returns the workspaces A that p's object is not in.
func isoOthers(f *isoFixture, p isoProbe) []string {
	var out []string
	for _, ws := range f.e.Svc.WorkspaceIDs() {
		if !slices.Contains(p.owners, ws) {
			out = append(out, ws)
		}
	}
	return out
}

func isoAbsent(f *isoFixture, p isoProbe) string {
	if p.absent != "" {
		return p.absent
	}
	return isoNowhere(p.value(f))
}

func TestIsolationREST(t *testing.T) {
	f := newIsoFixture(t)
	e := f.e
	for _, row := range isoRESTRows() {
		t.Run(row.pattern, func(t *testing.T) {
			if row.list != nil {
				for _, a := range e.Svc.WorkspaceIDs() {
					kinds := row.kinds
					if row.public {
						kinds = []string{""}
					}
					for _, kind := range kinds {
						key := ""
						if kind != "" {
							key = e.Keys[a+"/"+kind]
						}
						m, p, b := row.list()
						ans := isoREST(t, e, key, m, p, b)
						if ans.status >= 500 {
							t.Errorf("%s %s by %s/%s: %s", m, p, a, kind, ans)
						}
						isoAssertNoLeak(t, f, a, fmt.Sprintf("%s %s by %s/%s", m, p, a, kind), ans)
					}
				}
				return
			}
			for _, pr := range row.probes {
				bv, nv := pr.value(f), isoAbsent(f, pr)
				for _, a := range isoOthers(f, pr) {
					for _, kind := range row.kinds {
						key := e.Keys[a+"/"+kind]
						m1, p1, b1 := row.req(bv)
						m2, p2, b2 := row.req(nv)
						got := isoREST(t, e, key, m1, p1, b1)
						want := isoREST(t, e, key, m2, p2, b2)
						if got.status < 400 && row.pattern != "GET /v1/gate/history" {
							t.Errorf("%s %s by %s/%s on %s's %s: not refused: %s", m1, p1, a, kind, pr.owners[0], pr.name, got)
						}
						if g, w := got.norm(bv, pr.loose), want.norm(nv, pr.loose); g.String() != w.String() {
							t.Errorf("%s by %s/%s: %s's %s %q is answered unlike an id that exists isoNowhere:\n got  %s\n none %s", row.pattern, a, kind, pr.owners[0], pr.name, bv, g, w)
						}
						isoAssertNoLeak(t, f, a, fmt.Sprintf("%s %s by %s/%s", m1, p1, a, kind), got.norm(bv, false))
					}
				}
			}
		})
	}
	f.assertUntouched(t)
}

// assertUntouched checks that B's objects are as B left them.
func (f *isoFixture) assertUntouched(t *testing.T) {
	t.Helper()
	e := f.e
	for _, c := range []struct{ ws, id string }{{isoB, f.approvalID}, {isoEast, f.eastApprID}} {
		r := e.Do("GET", "/v1/approvals/"+c.id, e.Keys[c.ws+"/human"], nil)
		if r.Status != http.StatusOK || r.Body["status"] != "pending" {
			t.Errorf("approval %s of %s after the matrix: %d %s", c.id, c.ws, r.Status, r.Raw)
		}
	}
	r := e.Do("GET", "/v1/steps/bills/post_tms/evidence", e.Keys[isoB+"/agent"], nil)
	if r.Status != http.StatusOK || bytes.Contains(r.Raw, []byte("isolation test")) {
		t.Errorf("B's step after the matrix: %d %.400s", r.Status, r.Raw)
	}
	r = e.Do("POST", "/v1/routes/"+f.routeID+"/review", e.Keys[isoB+"/human"], map[string]any{"verdict": "agree"})
	if r.Status != http.StatusCreated {
		t.Errorf("B's route was reviewed by someone else: %d %s", r.Status, r.Raw)
	}
	r = e.Do("GET", "/v1/keys", e.Keys[isoB+"/admin"], nil)
	if !bytes.Contains(r.Raw, []byte(f.isoKeyID)) {
		t.Fatalf("B's keys: %s", r.Raw)
	}
	var keys struct {
		Keys []struct {
			ID        string `json:"id"`
			RevokedAt any    `json:"revoked_at"`
		} `json:"keys"`
	}
	_ = json.Unmarshal(r.Raw, &keys)
	for _, k := range keys.Keys {
		if k.ID == f.isoKeyID && k.RevokedAt != nil {
			t.Errorf("B's agent key was revoked by another workspace's admin: %s", r.Raw)
		}
	}
	if r := e.Do("GET", "/v1/steps", e.Keys[isoB+"/agent"], nil); r.Status != http.StatusOK {
		t.Errorf("B's agent key no longer works: %d %s", r.Status, r.Raw)
	}
	if n := len(e.Svc.WorkspaceIDs()); n != 6 {
		t.Errorf("workspaces: %d", n)
	}
}

// isoConsole is a cookie-keeping client that does not follow redirects.
type isoConsole struct {
	t    *testing.T
	c    *http.Client
	base string
}

var isoCSRFRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func newIsoConsole(t *testing.T, e *testenv.Env) *isoConsole {
	jar, _ := cookiejar.New(nil)
	return &isoConsole{t: t, base: e.Server.URL, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (c *isoConsole) do(method, path string, form url.Values) isoAnswer {
	c.t.Helper()
	var r *http.Response
	var err error
	if method == "GET" {
		r, err = c.c.Get(c.base + path)
	} else {
		r, err = c.c.PostForm(c.base+path, form)
	}
	if err != nil {
		c.t.Fatal(err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	return isoAnswer{status: r.StatusCode, ctype: r.Header.Get("Content-Type"), loc: r.Header.Get("Location"), body: b}
}

func (c *isoConsole) csrf(path string) string {
	c.t.Helper()
	m := isoCSRFRE.FindSubmatch(c.do("GET", path, nil).body)
	if m == nil {
		c.t.Fatalf("no csrf token on %s", path)
	}
	return string(m[1])
}

func (c *isoConsole) signin(key string) isoAnswer {
	c.t.Helper()
	return c.do("POST", "/console/signin", url.Values{"csrf": {c.csrf("/console/signin")}, "key": {key}})
}

func (c *isoConsole) post(path string, form url.Values) isoAnswer {
	c.t.Helper()
	f := url.Values{}
	for k, v := range form {
		f[k] = v
	}
	f.Set("csrf", c.csrf("/console/inbox"))
	return c.do("POST", path, f)
}

func TestIsolationConsole(t *testing.T) {
	f := newIsoFixture(t)
	e := f.e
	clients := map[string]*isoConsole{}
	for _, a := range e.Svc.WorkspaceIDs() {
		c := newIsoConsole(t, e)
		if r := c.signin(e.Keys[a+"/human"]); r.status != http.StatusSeeOther || r.loc != "/console/inbox" {
			t.Fatalf("sign in to %s: %s", a, r)
		}
		clients[a] = c
	}
	for _, row := range isoConsoleRows() {
		t.Run(row.pattern, func(t *testing.T) {
			if row.list != nil {
				for _, a := range e.Svc.WorkspaceIDs() {
					c := clients[a]
					if row.public {
						c = newIsoConsole(t, e)
					}
					m, p, form := row.list()
					var ans isoAnswer
					if m == "GET" {
						ans = c.do(m, p, nil)
					} else {
						ans = c.post(p, form)
					}
					if ans.status >= 500 {
						t.Errorf("%s %s by %s: %s", m, p, a, ans)
					}
					isoAssertNoLeak(t, f, a, fmt.Sprintf("%s %s by %s", m, p, a), ans)
				}
				return
			}
			for _, pr := range row.probes {
				bv, nv := pr.value(f), isoAbsent(f, pr)
				for _, a := range isoOthers(f, pr) {
					c := clients[a]
					m1, p1, f1 := row.req(bv)
					m2, p2, f2 := row.req(nv)
					var got, want isoAnswer
					if m1 == "GET" {
						got, want = c.do(m1, p1, nil), c.do(m2, p2, nil)
					} else {
						got, want = c.post(p1, f1), c.post(p2, f2)
					}
					if row.pattern != "GET /console/gate" && got.status < 400 {
						t.Errorf("%s %s by %s on %s's %s: not refused: %.300s", m1, p1, a, pr.owners[0], pr.name, got)
					}
					if g, w := got.norm(bv, pr.loose), want.norm(nv, pr.loose); g.String() != w.String() {
						t.Errorf("%s by %s: %s's %s %q is answered unlike an id that exists isoNowhere:\n got  %.1500s\n none %.1500s", row.pattern, a, pr.owners[0], pr.name, bv, g, w)
					}
					isoAssertNoLeak(t, f, a, fmt.Sprintf("%s %s by %s", m1, p1, a), got.norm(bv, false))
				}
			}
		})
	}
	f.assertUntouched(t)
}

// TestIsolationConsoleSignin: only a human key signs in, and a person's
// session reaches their own workspace only.
func TestIsolationConsoleSignin(t *testing.T) {
	f := newIsoFixture(t)
	e := f.e
	for _, ws := range e.Svc.WorkspaceIDs() {
		for _, kind := range []string{"agent", "admin"} {
			c := newIsoConsole(t, e)
			r := c.signin(e.Keys[ws+"/"+kind])
			if r.status != http.StatusForbidden || r.loc != "" {
				t.Errorf("sign in with the %s key of %s: %s", kind, ws, r)
			}
			if r := c.do("GET", "/console/inbox", nil); r.status != http.StatusSeeOther || !strings.HasPrefix(r.loc, "/console/signin") {
				t.Errorf("%s key of %s reached the inbox: %s", kind, ws, r)
			}
		}
	}
	// A bad token and another workspace's revoked key get the same answer.
	c := newIsoConsole(t, e)
	tok := e.Keys[isoMirror+"/human"]
	r := e.Do("POST", "/v1/keys/"+isoKeyID(tok)+"/revoke", e.Keys[isoMirror+"/admin"], nil)
	if r.Status != http.StatusOK {
		t.Fatalf("revoke: %d %s", r.Status, r.Raw)
	}
	revoked := c.signin(tok)
	unknown := c.signin("ldr_" + isoNowhere(isoKeyID(tok)) + "_" + strings.Repeat("q", len(tok)-len(isoKeyID(tok))-5))
	if revoked.status != http.StatusUnauthorized || revoked.status != unknown.status {
		t.Errorf("revoked key: %s\nunknown key: %s", revoked, unknown)
	}
	// Sign out ends the session; a signed-out POST does nothing.
	a := newIsoConsole(t, e)
	if r := a.signin(e.Keys["checkcall-loads/human"]); r.status != http.StatusSeeOther {
		t.Fatal(r)
	}
	if r := a.post("/console/signout", nil); r.status != http.StatusSeeOther {
		t.Errorf("sign out: %s", r)
	}
	if r := a.do("POST", "/console/approvals/"+f.approvalID+"/approve", url.Values{}); r.status != http.StatusUnauthorized {
		t.Errorf("signed-out approve: %s", r)
	}
	f.assertUntouched(t)
}

func TestIsolationMCP(t *testing.T) {
	f := newIsoFixture(t)
	e := f.e
	for _, row := range isoMCPRows(f) {
		t.Run(row.tool, func(t *testing.T) {
			if row.list != nil {
				for _, a := range e.Svc.WorkspaceIDs() {
					ans := isoMCP(t, e, e.Keys[a+"/agent"], row.tool, row.list)
					isoAssertNoLeak(t, f, a, row.tool+" by "+a, ans)
				}
			}
			for _, pr := range row.probes {
				bv, nv := pr.value(f), isoAbsent(f, pr)
				for _, a := range isoOthers(f, pr) {
					key := e.Keys[a+"/agent"]
					got := isoMCP(t, e, key, row.tool, row.args(bv))
					want := isoMCP(t, e, key, row.tool, row.args(nv))
					if row.tool != "gate_history_get" && !bytes.Contains(got.body, []byte(`"error"`)) && !bytes.Contains(got.body, []byte(`"isError":true`)) {
						t.Errorf("%s by %s on %s's %s: not refused: %s", row.tool, a, pr.owners[0], pr.name, got)
					}
					if g, w := got.norm(bv, pr.loose), want.norm(nv, pr.loose); g.String() != w.String() {
						t.Errorf("%s by %s: %s's %s %q is answered unlike one that exists isoNowhere:\n got  %s\n none %s", row.tool, a, pr.owners[0], pr.name, bv, g, w)
					}
					isoAssertNoLeak(t, f, a, row.tool+" by "+a, got.norm(bv, false))
				}
			}
		})
	}
	f.assertUntouched(t)
}

// TestIsolationKeyKinds: agent keys never approve, review or pin; human
// and admin keys never reach /mcp; admin keys do not act as agents or
// people.
func TestIsolationKeyKinds(t *testing.T) {
	f := newIsoFixture(t)
	e := f.e
	agent := e.Keys[isoB+"/agent"]
	for _, c := range []struct{ method, path string }{
		{"POST", "/v1/approvals/" + f.approvalID + "/approve"},
		{"POST", "/v1/approvals/" + f.approvalID + "/reject"},
		{"POST", "/v1/approvals/" + f.approvalID + "/retry"},
		{"POST", "/v1/routes/" + f.routeID + "/review"},
		{"POST", "/v1/steps/bills/post_tms/pin"},
		{"POST", "/v1/steps/bills/post_tms/unpin"},
		{"GET", "/v1/approvals"},
		{"GET", "/v1/keys"},
		{"POST", "/v1/keys"},
	} {
		r := e.Do(c.method, c.path, agent, map[string]any{"verdict": "agree", "lane": "auto", "reason": "x"})
		if r.Status != http.StatusForbidden || r.ErrorCode() != "AGENT_KEY_REFUSED" {
			t.Errorf("agent key %s %s: %d %s", c.method, c.path, r.Status, r.Raw)
		}
	}
	for _, kind := range []string{"human", "admin"} {
		for _, method := range []string{"initialize", "tools/list", "tools/call"} {
			var params any
			switch method {
			case "tools/call":
				params = map[string]any{"name": "route_item", "arguments": map[string]any{"step": "post_tms", "item": "x"}}
			case "initialize":
				params = map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "t", "version": "1"}}
			}
			r := e.Do("POST", "/mcp", e.Keys[isoB+"/"+kind], isoRPC(1, method, params))
			want := map[string]string{"human": "HUMAN_KEY_REFUSED", "admin": "KEY_KIND_REFUSED"}[kind]
			if !bytes.Contains(r.Raw, []byte(want)) || bytes.Contains(r.Raw, []byte(`"result"`)) {
				t.Errorf("%s key on /mcp %s: %d %s", kind, method, r.Status, r.Raw)
			}
		}
	}
	admin := e.Keys[isoB+"/admin"]
	for _, c := range []struct{ method, path string }{
		{"POST", "/v1/route"}, {"POST", "/v1/approvals/" + f.approvalID + "/approve"}, {"POST", "/v1/capabilities/tms:postBill/call"},
	} {
		r := e.Do(c.method, c.path, admin, map[string]any{})
		if r.Status != http.StatusForbidden {
			t.Errorf("admin key %s %s: %d %s", c.method, c.path, r.Status, r.Raw)
		}
	}
	f.assertUntouched(t)
}

// TestIsolationSameNames: two workspaces with the same queue, step and
// capability ids share nothing — not a route of the same item, not an
// approval of the same idempotency key.
func TestIsolationSameNames(t *testing.T) {
	f := newIsoFixture(t)
	e := f.e
	r := e.Do("POST", "/v1/route", e.Keys[isoMirror+"/agent"], map[string]any{"queue": "bills", "step": "read_bill", "item": f.item})
	if r.Status != http.StatusOK || r.Body["route_id"] == f.routeID {
		t.Errorf("the mirror's route of B's item: %d %s", r.Status, r.Raw)
	}
	isoAssertNoLeak(t, f, isoMirror, "mirror route", isoAnswer{body: bytes.ReplaceAll(r.Raw, []byte(f.item), nil)})
	r = e.Do("POST", "/v1/capabilities/rates:approveRate/call", e.Keys[isoMirror+"/agent"], map[string]any{
		"bill_id": "BILL-ISO-M-0002", "linehaul_usd": 1.0, "fuel_surcharge_usd": 1.0, "idempotency_key": "iso-b-rate-1"})
	if r.Status != http.StatusAccepted || r.Body["approval_id"] == f.approvalID {
		t.Errorf("the mirror's call with B's idempotency key: %d %s", r.Status, r.Raw)
	}
	isoAssertNoLeak(t, f, isoMirror, "mirror call", isoAnswer{body: bytes.ReplaceAll(r.Raw, []byte("iso-b-rate-1"), nil)})
	f.assertUntouched(t)
}

// TestIsolationAdmin: an admin key manages its own workspace only; the
// keys of another are refused like ids that exist nowhere (the REST matrix
// compares the answers byte for byte).
func TestIsolationAdmin(t *testing.T) {
	f := newIsoFixture(t)
	e := f.e
	admin := e.Keys["checkcall-loads/admin"]
	r := e.Do("POST", "/v1/keys", admin, map[string]any{"workspace": isoB, "kind": "admin"})
	if r.Status < 400 || bytes.Contains(r.Raw, []byte(`"token"`)) {
		t.Errorf("create a key in B: %d %s", r.Status, r.Raw)
	}
	for _, kind := range []string{"agent", "human", "admin"} {
		r := e.Do("POST", "/v1/keys/"+isoKeyID(e.Keys[isoB+"/"+kind])+"/revoke", admin, nil)
		if r.Status != http.StatusNotFound {
			t.Errorf("revoke B's %s key: %d %s", kind, r.Status, r.Raw)
		}
	}
	r = e.Do("GET", "/v1/keys", admin, nil)
	isoAssertNoLeak(t, f, "checkcall-loads", "GET /v1/keys", isoAnswer{body: r.Raw})
	f.assertUntouched(t)
}

// TestIsolationCoverage fails when a route or tool has no row.
func TestIsolationCoverage(t *testing.T) {
	var table []string
	for _, r := range isoRESTRows() {
		table = append(table, r.pattern)
	}
	isoCompareSets(t, "REST route", isoRegisteredPatterns(t, "."), table)
	table = nil
	for _, r := range isoConsoleRows() {
		table = append(table, r.pattern)
	}
	isoCompareSets(t, "console route", isoRegisteredPatterns(t, "../console"), table)

	f := newIsoFixture(t)
	tools := map[string]bool{}
	for _, ws := range f.e.Svc.WorkspaceIDs() {
		r := f.e.Do("POST", "/mcp", f.e.Keys[ws+"/agent"], isoRPC(1, "tools/list", map[string]any{}))
		var out struct {
			Result struct {
				Tools []struct {
					Name string `json:"name"`
				} `json:"tools"`
			} `json:"result"`
		}
		if err := json.Unmarshal(r.Raw, &out); err != nil || len(out.Result.Tools) == 0 {
			t.Fatalf("tools/list for %s: %d %s", ws, r.Status, r.Raw)
		}
		for _, tl := range out.Result.Tools {
			tools[tl.Name] = true
		}
	}
	var listed []string
	for n := range tools {
		listed = append(listed, n)
	}
	table = nil
	for _, r := range isoMCPRows(f) {
		table = append(table, r.tool)
	}
	isoCompareSets(t, "MCP tool", listed, table)
}

func isoCompareSets(t *testing.T, what string, registered, table []string) {
	t.Helper()
	for _, p := range registered {
		if !slices.Contains(table, p) {
			t.Errorf("%s %q has no row in the isolation matrix (http/isolation_test.go); add one", what, p)
		}
	}
	for _, p := range table {
		if !slices.Contains(registered, p) {
			t.Errorf("the isolation matrix has a row for %s %q, which is not registered", what, p)
		}
	}
}

// isoRegisteredPatterns parses the non-test Go files of dir for route
// registrations: calls of handle, Handle or HandleFunc whose first argument
// is a string literal.
func isoRegisteredPatterns(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var out []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			switch sel.Sel.Name {
			case "handle", "Handle", "HandleFunc":
			default:
				return true
			}
			lit, ok := call.Args[0].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				if _, isIdent := call.Args[0].(*ast.Ident); isIdent && sel.Sel.Name != "handle" {
					// s.mux.Handle(pattern, h) for the mounts: their
					// patterns come from the caller.
					return true
				}
				t.Errorf("%s: a route registered with a non-literal pattern; the isolation matrix cannot see it", fset.Position(call.Pos()))
				return true
			}
			p, _ := strconv.Unquote(lit.Value)
			out = append(out, p)
			return true
		})
	}
	sort.Strings(out)
	if len(out) < 5 {
		t.Fatalf("found only %d routes in %s: %v", len(out), dir, out)
	}
	return out
}

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
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ladderhq/ladder"
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
	deliveryID string // a delivery of an event of isoB
	isoKeyID   string // isoB's agent key id
	item       string // the item isoB routed
	auditSeq   string // the seq of an audit record of isoB
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
	// The events so far go to one endpoint per workspace, as a configured
	// webhook's would.
	if _, err := e.Store.FanOut(t.Context(), 1000, func(ev ladder.Event) []string { return []string{ev.Workspace + "/iso-hook"} }); err != nil {
		t.Fatal(err)
	}
	if ds, err := e.Store.ListDeliveries(t.Context(), ladder.DeliveryQuery{Workspace: isoB}); err == nil && len(ds) > 0 {
		f.deliveryID = ds[0].ID
	}
	recs, err := e.Store.ListAudit(context.Background(), ladder.AuditQuery{Workspace: isoB, Desc: true, Limit: 1})
	if err != nil || len(recs) != 1 {
		t.Fatalf("fixture: B's last audit record: %v", err)
	}
	f.auditSeq = strconv.FormatInt(recs[0].Seq, 10)
	for _, v := range []string{f.routeID, f.approvalID, f.eastApprID, f.decisionID, f.isoKeyID, f.deliveryID, f.auditSeq} {
		if v == "" {
			t.Fatalf("fixture: an id is empty: %+v", f)
		}
	}
	f.secrets = map[string]string{}
	for _, v := range []string{f.routeID, f.approvalID, f.decisionID, f.deliveryID, f.item, "BILL-ISO-B-0002", "BILL-ISO-B-0003", "iso-b-rate-1"} {
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

package http_test

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/config"
	"github.com/ladderhq/ladder/internal/testenv"
)

// hostile are the JSON-smuggling cases every surface must refuse before a
// handler sees them (GHSA-q382-vc8q-7jhj and the case-variant advisory).
var hostile = []struct {
	name string
	// body builds a request body around a step field.
	rest, mcp string
	want      string
}{
	{"duplicate key", `{"step":"post_tms","step":"read_bill","item":"a"}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"route_item","arguments":{"step":"post_tms","step":"read_bill","item":"a"}}}`, "duplicate key"},
	{"case-variant key", `{"Step":"post_tms","item":"a"}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"route_item","arguments":{"Step":"post_tms","step":"read_bill","item":"a"}}}`, "case"},
	{"NUL-suffixed key", "{\"step\\u0000\":\"post_tms\",\"step\":\"read_bill\",\"item\":\"a\"}",
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"route_item\",\"arguments\":{\"step\\u0000\":\"x\",\"step\":\"post_tms\",\"item\":\"a\"}}}", "NUL"},
	{"invalid UTF-8 key", "{\"st\xffep\":\"post_tms\",\"item\":\"a\"}",
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"route_item\",\"arguments\":{\"st\xffep\":\"x\",\"item\":\"a\"}}}", "UTF-8"},
	{"nesting deeper than 64", `{"step":"post_tms","item":"a","features":` + strings.Repeat(`{"a":`, 70) + `1` + strings.Repeat(`}`, 70) + `}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"route_item","arguments":{"step":"post_tms","item":"a","features":` + strings.Repeat(`{"a":`, 70) + `1` + strings.Repeat(`}`, 70) + `}}}`, "nesting"},
}

func TestStrictInputEverySurface(t *testing.T) {
	e := testenv.Start(t, "")
	agent := e.Keys["vantrow-bills/agent"]
	for _, h := range hostile {
		t.Run("REST/"+h.name, func(t *testing.T) {
			r := e.Do("POST", "/v1/route", agent, h.rest)
			if r.Status != 400 || !strings.Contains(string(r.Raw), h.want) {
				t.Fatalf("got %d %s", r.Status, r.Raw)
			}
		})
		t.Run("MCP/"+h.name, func(t *testing.T) {
			r := e.Do("POST", "/mcp", agent, h.mcp)
			raw := string(r.Raw)
			refused := r.Status == 400 || strings.Contains(raw, `"isError":true`)
			if !refused || !strings.Contains(raw, h.want) || strings.Contains(raw, `"route_id"`) {
				t.Fatalf("got %d %s", r.Status, raw)
			}
		})
	}
	// Nothing reached a handler: no route was recorded.
	recs, err := e.Store.ListAudit(t.Context(), auditQuery("vantrow-bills", "route"))
	if err != nil || len(recs) != 0 {
		t.Fatalf("%d routes recorded from hostile input (%v)", len(recs), err)
	}
}

// TestStrictConfig: the config file refuses the same classes in YAML.
func TestStrictConfig(t *testing.T) {
	base := "workspaces:\n  - id: w\n    queues:\n      - id: q\n        steps:\n          - id: s\n            name: S\n"
	deep := "workspaces:\n  - id: w\n    queues:\n      - id: q\n        steps:\n          - id: s\n            name: S\n    capabilities:\n      - id: a:b\n        title: T\n        description: D\n        executor: {kind: record}\n        payload_schema: " + strings.Repeat("{a: ", 70) + "1" + strings.Repeat("}", 70) + "\n"
	tests := []struct{ name, yaml string }{
		{"duplicate key", base + "            name: T\n"},
		{"case-variant key", base + "            Lane: auto\n"},
		{"NUL in a key", base + "            \"la\\0ne\": auto\n"},
		{"invalid UTF-8", base + "            lane: \xff\n"},
		{"nesting deeper than 64", deep},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.Parse("ladder.yaml", []byte(tt.yaml))
			if err == nil {
				t.Fatal("accepted")
			}
			var ce *config.Error
			if !errors.As(err, &ce) || !strings.HasPrefix(err.Error(), "ladder.yaml:") {
				t.Fatalf("error does not name file and line: %v", err)
			}
		})
	}
}

// errField is data.field of a REST refusal.
func errField(r testenv.Response) string {
	e, _ := r.Body["error"].(map[string]any)
	d, _ := e["data"].(map[string]any)
	f, _ := d["field"].(string)
	return f
}

// toolText is the text of an MCP tools/call result and whether it is an
// isError result.
func toolText(t *testing.T, r testenv.Response) (string, bool) {
	t.Helper()
	res, _ := r.Body["result"].(map[string]any)
	content, _ := res["content"].([]any)
	if len(content) == 0 {
		return "", false
	}
	text, _ := content[0].(map[string]any)["text"].(string)
	isErr, _ := res["isError"].(bool)
	return text, isErr
}

// TestStrictPayloadEveryDepth: a capability call whose payload, evidence or
// top-level arguments hold duplicate or case-variant keys (bill_id and
// Bill_id), or a number no float64 holds, is refused on REST (400
// INVALID_ARGUMENT naming the field) and on MCP (an isError result naming
// it) before anything is created: no approval, no route, no call, no audit
// record, no upstream request.
func TestStrictPayloadEveryDepth(t *testing.T) {
	c := startCapEnv(t)
	cases := []struct{ name, capability, args, field, want string }{
		{"case-variant payload keys", "acme:post", `{"payload":{"bill_id":"B-1","Bill_id":"B-EVIL"},"idempotency_key":"k-1"}`,
			"payload.Bill_id", `key differs only in case from "bill_id" in the same object; send one key, spelled as documented`},
		{"case-variant keys that would merge into the payload", "acme:post", `{"bill_id":"B-1","Bill_id":"B-EVIL","idempotency_key":"k-2"}`,
			"Bill_id", `differs only in case from "bill_id"`},
		{"duplicate payload key", "acme:post", `{"payload":{"bill_id":"B-1","bill_id":"B-EVIL"}}`, "payload.bill_id", "duplicate key; send each key once"},
		{"case-variant keys on a human gate", "acme:human", `{"program":"p1","payload":{"commission_id":"c-1","Commission_ID":"c-2"}}`,
			"payload.Commission_ID", `differs only in case from "commission_id"`},
		{"case-variant keys on a propose step", "acme:propose", `{"payload":{"bill_id":"B-2","rate":1.5,"RATE":9}}`, "payload.RATE", "differs only in case"},
		{"case-variant keys deep in the payload", "acme:human", `{"program":"p1","payload":{"commission_id":"c-3","lines":[{"amount":1,"Amount":2}]}}`,
			"payload.lines[0].Amount", "differs only in case"},
		{"case-variant evidence keys", "acme:gated", `{"bill_id":"B-1","evidence":{"bill_id":"B-1","ok":false,"OK":true}}`, "evidence.OK", `differs only in case from "ok"`},
		{"case folding beyond ASCII (Kelvin sign)", "acme:human", "{\"program\":\"p1\",\"payload\":{\"commission_id\":\"c-4\",\"\\u212aind\":1,\"kind\":2}}",
			"payload.kind", "differs only in case"},
		{"number beyond float64 in the payload", "acme:propose", `{"payload":{"bill_id":"B-3","rate":1e400}}`,
			"payload.rate", "1e400 is outside the range of a 64-bit float; send a finite number"},
		{"number beyond float64 at the top level", "acme:propose", `{"bill_id":"B-4","rate":-1e400}`, "rate", "-1e400 is outside the range of a 64-bit float"},
		{"number beyond float64 in evidence", "acme:gated", `{"bill_id":"B-1","evidence":{"bill_id":"B-1","ok":true,"score":1e400}}`, "evidence.score", "1e400 is outside the range of a 64-bit float"},
	}
	ctx := t.Context()
	before, err := c.Store.ListAudit(ctx, ladder.AuditQuery{Workspace: "acme", Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	upstreamBefore := c.Upstream.Calls()
	for i, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			r := c.call(tt.capability, tt.args)
			if r.Status != 400 || r.ErrorCode() != "INVALID_ARGUMENT" || errField(r) != tt.field || !strings.Contains(string(r.Raw), tt.field) {
				t.Errorf("REST: %d %s; want 400 INVALID_ARGUMENT with field %s", r.Status, r.Raw, tt.field)
			}
			var e struct {
				Error struct{ Message, Hint string } `json:"error"`
			}
			_ = json.Unmarshal(r.Raw, &e)
			if !strings.Contains(e.Error.Message, tt.want) || !strings.Contains(e.Error.Hint, tt.field) {
				t.Errorf("REST: message %q, hint %q; want %q and the field named", e.Error.Message, e.Error.Hint, tt.want)
			}
			id := strconv.Itoa(100 + i)
			m := c.Do("POST", "/mcp", c.agent, `{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{"name":"`+tt.capability+`","arguments":`+tt.args+`}}`)
			text, isErr := toolText(t, m)
			if m.Status != 200 || !isErr || !strings.Contains(text, tt.field+": ") || !strings.Contains(text, tt.want) || !strings.Contains(string(m.Raw), `"id":`+id+`,`) {
				t.Errorf("MCP: %d %s; want an isError result naming %s", m.Status, m.Raw, tt.field)
			}
		})
	}
	// Nothing was created: no approval a person would see, no audit record
	// (route, call, approval, gate decision), no upstream request.
	if a := c.Do("GET", "/v1/approvals", c.human, nil); a.Status != 200 || len(a.Body["approvals"].([]any)) != 0 {
		t.Fatalf("approvals after refused calls: %d %s", a.Status, a.Raw)
	}
	after, err := c.Store.ListAudit(ctx, ladder.AuditQuery{Workspace: "acme", Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		for _, rec := range after[len(before):] {
			t.Errorf("recorded from a refused call: %s %s", rec.Kind, rec.Subject)
		}
	}
	if n := c.Upstream.Calls() - upstreamBefore; n != 0 {
		t.Fatalf("the upstream ran %d times for refused calls", n)
	}
	// The same calls without the second spelling go through, so the checks
	// above would have seen them.
	if r := c.call("acme:human", `{"program":"p1","payload":{"commission_id":"c-1"}}`); r.Status != 202 {
		t.Fatalf("clean call: %d %s", r.Status, r.Raw)
	}
	if a := c.Do("GET", "/v1/approvals", c.human, nil); len(a.Body["approvals"].([]any)) != 1 {
		t.Fatalf("the clean call's approval is not listed: %s", a.Raw)
	}
}

// TestNumberBeyondFloat64 covers the bodies decoded into typed requests:
// route features and gate evidence name the field with 400
// INVALID_ARGUMENT (evidence was refused as "not a JSON object", features
// recorded as 1e400), and the MCP authorize tool and a capability tool
// answer an isError result naming it.
func TestNumberBeyondFloat64(t *testing.T) {
	c := startCapEnv(t)
	for _, tt := range []struct{ path, body, field string }{
		{"/v1/route", `{"step":"auto_step","item":"x","features":{"amount_usd":1e400}}`, "features.amount_usd"},
		{"/v1/gate/authorize", `{"case":"release","precondition_fn":"score_release","evidence":{"ok":true,"score":1e400}}`, "evidence.score"},
		{"/v1/gate/authorize", `{"case":"release","precondition_fn":"score_release","evidence":{"ok":true,"Ok":false}}`, "evidence.Ok"},
		{"/v1/capabilities/acme:gated/call", `{"bill_id":"B-1","evidence":{"bill_id":"B-1","ok":true,"score":1e400}}`, "evidence.score"},
	} {
		r := c.Do("POST", tt.path, c.agent, tt.body)
		if r.Status != 400 || r.ErrorCode() != "INVALID_ARGUMENT" || errField(r) != tt.field || strings.Contains(string(r.Raw), "must be a JSON object") {
			t.Errorf("%s %s: %d %s; want 400 INVALID_ARGUMENT with field %s", tt.path, tt.body, r.Status, r.Raw, tt.field)
		}
	}
	for i, tt := range []struct{ tool, args, field string }{
		{"authorize", `{"case":"release","precondition_fn":"score_release","evidence":{"ok":true,"score":1e400}}`, "evidence.score"},
		{"authorize", `{"case":"release","precondition_fn":"score_release","evidence":{"ok":true,"score":-1E+309,"note":"x"}}`, "evidence.score"},
		{"acme:gated", `{"bill_id":"B-1","evidence":{"bill_id":"B-1","ok":true,"score":1e400}}`, "evidence.score"},
	} {
		id := strconv.Itoa(200 + i)
		m := c.Do("POST", "/mcp", c.agent, `{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{"name":"`+tt.tool+`","arguments":`+tt.args+`}}`)
		text, isErr := toolText(t, m)
		if m.Status != 200 || !isErr || !strings.Contains(text, tt.field+": ") || !strings.Contains(text, "outside the range of a 64-bit float") || !strings.Contains(string(m.Raw), `"id":`+id+`,`) {
			t.Errorf("MCP %s: %d %s; want an isError result naming %s", tt.tool, m.Status, m.Raw, tt.field)
		}
	}
	recs, err := c.Store.ListAudit(t.Context(), ladder.AuditQuery{Workspace: "acme", Kind: ladder.AuditRoute})
	if err != nil || len(recs) != 0 {
		t.Fatalf("%d routes recorded (%v)", len(recs), err)
	}
	if n := c.Upstream.Calls(); n != 0 {
		t.Fatalf("the upstream ran %d times for refused calls", n)
	}
}

// TestUnpairedSurrogateRefused: a string or a key holding an unpaired
// UTF-16 surrogate escape ("\ud800") is refused wherever it is — gate
// evidence, a capability's evidence and payload, route features — naming
// the path: REST 400 INVALID_ARGUMENT with data.field, MCP an isError
// result. encoding/json reads it as U+FFFD, so "\ud800" and "\udbff"
// would be one bill id to a handler and to the log, and another to a
// reader that keeps the escape.
func TestUnpairedSurrogateRefused(t *testing.T) {
	c := startCapEnv(t)
	const want = "unpaired UTF-16 surrogate escape"
	cases := []struct{ name, path, tool, args, field string }{
		{"gate evidence value", "/v1/gate/authorize", "authorize", `{"case":"release","precondition_fn":"score_release","evidence":{"ok":true,"bill_id":"\ud800"}}`, "evidence.bill_id"},
		{"gate evidence key", "/v1/gate/authorize", "authorize", `{"case":"release","precondition_fn":"score_release","evidence":{"ok":true,"bill\udc00":"B-1"}}`, "evidence"},
		{"capability evidence", "/v1/capabilities/acme:gated/call", "acme:gated", `{"bill_id":"B-1","evidence":{"bill_id":"B-1\udbff","ok":true}}`, "evidence.bill_id"},
		{"capability payload deep", "/v1/capabilities/acme:human/call", "acme:human", `{"program":"p1","payload":{"commission_id":"c-1","lines":[{"memo":"\ude00\ud83d"}]}}`, "payload.lines[0].memo"},
		{"capability payload merged from the top level", "/v1/capabilities/acme:post/call", "acme:post", `{"bill_id":"B-\ud800","idempotency_key":"s-1"}`, "bill_id"},
		{"route features", "/v1/route", "route_item", `{"step":"auto_step","item":"x","features":{"vendor":"\ud83d"}}`, "features.vendor"},
		{"route item", "/v1/route", "route_item", `{"step":"auto_step","item":"\udfff"}`, "item"},
	}
	upstream := c.Upstream.Calls()
	for i, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			r := c.Do("POST", tt.path, c.agent, tt.args)
			if r.Status != 400 || r.ErrorCode() != "INVALID_ARGUMENT" || errField(r) != tt.field || !strings.Contains(string(r.Raw), want) {
				t.Errorf("REST: %d %s; want 400 INVALID_ARGUMENT with field %s", r.Status, r.Raw, tt.field)
			}
			id := strconv.Itoa(300 + i)
			m := c.Do("POST", "/mcp", c.agent, `{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{"name":"`+tt.tool+`","arguments":`+tt.args+`}}`)
			text, isErr := toolText(t, m)
			if m.Status != 200 || !isErr || !strings.Contains(text, tt.field+": ") || !strings.Contains(text, want) || !strings.Contains(string(m.Raw), `"id":`+id+`,`) {
				t.Errorf("MCP: %d %s; want an isError result naming %s", m.Status, m.Raw, tt.field)
			}
		})
	}
	// Nothing ran or was recorded; a surrogate pair, and U+FFFD sent as
	// itself, still pass.
	if n := c.Upstream.Calls() - upstream; n != 0 {
		t.Fatalf("the upstream ran %d times for refused calls", n)
	}
	for _, k := range []string{ladder.AuditRoute, ladder.AuditCall, ladder.AuditGateDecision, ladder.AuditApproval} {
		if recs, err := c.Store.ListAudit(t.Context(), ladder.AuditQuery{Workspace: "acme", Kind: k}); err != nil || len(recs) != 0 {
			t.Fatalf("%d %s records after refused requests (%v)", len(recs), k, err)
		}
	}
	if a := c.Do("GET", "/v1/approvals", c.human, nil); a.Status != 200 || len(a.Body["approvals"].([]any)) != 0 {
		t.Fatalf("approvals after refused calls: %d %s", a.Status, a.Raw)
	}
	if r := c.Do("POST", "/v1/route", c.agent, `{"step":"auto_step","item":"x","features":{"vendor":"\ud83d\ude9a \ufffd"}}`); r.Status != 200 {
		t.Fatalf("a surrogate pair and U+FFFD: %d %s", r.Status, r.Raw)
	}
}

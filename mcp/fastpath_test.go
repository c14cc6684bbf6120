package mcp_test

import (
	"bytes"
	"encoding/base64"
	"encoding/gob"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/internal/testenv"
	"github.com/ladderhq/ladder/mcp"
)

// handlers is one seeded service behind two MCP handlers: the fast path on,
// and off (every request through the SDK).
func handlers(tb testing.TB) (e *testenv.Env, fast, slow *mcp.Handler) {
	tb.Helper()
	e = testenv.StartWith(tb, "", testenv.Options{Seed: true})
	var err error
	if fast, err = mcp.New(mcp.Options{Service: e.Svc}); err != nil {
		tb.Fatal(err)
	}
	if slow, err = mcp.New(mcp.Options{Service: e.Svc}); err != nil {
		tb.Fatal(err)
	}
	mcp.SDKOnly(slow)
	return e, fast, slow
}

// post sends body to h as an MCP client over HTTP would, with the token and
// the headers (an empty value removes a default header).
func post(h http.Handler, token string, body []byte, headers map[string]string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("POST", "http://ladder.test/mcp", bytes.NewReader(body))
	r.Header.Set("Authorization", "Bearer "+token)
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range headers {
		if v == "" {
			r.Header.Del(k)
			continue
		}
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// TestFastPathMatchesSDK sends every kind of tools/call answer — results,
// isError results, JSON-RPC refusals from inside a tool, renamed tools,
// odd ids, text that JSON escapes — through the fast path and through the
// SDK, and requires the same status, headers and bytes.
func TestFastPathMatchesSDK(t *testing.T) {
	e, fast, slow := handlers(t)

	scope := map[string]any{"program": "partner-2027", "relationship": "relationship:partner-2027:creator-1"}
	with := func(m map[string]any, kv ...any) map[string]any {
		out := map[string]any{}
		for k, v := range m {
			out[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			out[kv[i].(string)] = kv[i+1]
		}
		return out
	}
	cases := []struct {
		name, key string
		id        any
		tool      string
		args      any // a json.RawMessage is sent as it is ("null"), nil leaves arguments out
	}{
		{"step_evidence by plain name", "vantrow-bills/agent", 1, "step_evidence", map[string]any{"step": "Decide hold or release"}},
		{"which_steps_run_alone, string id", "vantrow-bills/agent", "steps-1", "which_steps_run_alone", map[string]any{}},
		{"which_steps_run_alone, id 0", "vantrow-bills/agent", 0, "which_steps_run_alone", map[string]any{"queue": "bills"}},
		{"route_item", "vantrow-bills/agent", -7, "route_item", map[string]any{"step": "post_tms", "item": "FAST-1"}},
		{"route_item with features", "vantrow-bills/agent", 123456789012345, "route_item", map[string]any{"step": "Read the bill", "item": "FAST-2 <&>", "features": map[string]any{"amount": 12.5}}},
		{"route_item unknown step (isError)", "vantrow-bills/agent", 3, "route_item", map[string]any{"step": "Weigh the <moon> & \"stars\"", "item": "X"}},
		{"route_item wrong type (isError)", "vantrow-bills/agent", 4, "route_item", map[string]any{"step": "post_tms", "item": 42}},
		{"arguments null", "vantrow-bills/agent", 5, "which_steps_run_alone", json.RawMessage(`null`)},
		{"arguments absent", "vantrow-bills/agent", 6, "step_evidence", nil},
		{"list_precondition_functions", "vantrow-bills/agent", 7, "list_precondition_functions", map[string]any{}},
		{"authorize", "iia-gate/agent", 8, "authorize", map[string]any{"case": "ai_investment", "precondition_fn": "score_invest_governance", "evidence": govEvidence(allGovernance...)}},
		{"gate_history_get", "iia-gate/agent", 9, "gate_history_get", map[string]any{"limit": 5}},
		{"gate_history_get with a bad cursor (-32602: HTTP 400 on 2026-07-28)", "iia-gate/agent", 91, "gate_history_get", map[string]any{"cursor": "not-a-cursor"}},
		{"capability call", "partner-programs/agent", 10, "ticket6:readLedger", with(scope, "payload", map[string]any{})},
		{"capability by its portable name", "partner-programs/agent", 11, "ticket6_readLedger", scope},
		{"capability refused inside the tool (JSON-RPC error)", "partner-programs/agent", 12, "ticket6:readLedger", with(scope, "program", "partner-2031")},
		{"human gate creates an approval", "partner-programs/agent", 13, "ticket6:approveCommission", with(scope, "payload", map[string]any{"commission_id": "c-1"}, "idempotency_key", "fast-1")},
		{"approval_status of nothing (isError)", "partner-programs/agent", 14, "approval_status", map[string]any{"approval_id": "ap_aaaaaaaaaaaaaaaa"}},
	}
	send := func(h http.Handler, key string, body []byte, headers map[string]string) *httptest.ResponseRecorder {
		return post(h, e.Keys[key], body, headers)
	}
	for _, version := range []string{"2025-06-18", "2025-11-25", "", "2026-07-28"} {
		for _, c := range cases {
			t.Run(version+"/"+c.name, func(t *testing.T) {
				params := map[string]any{"name": c.tool}
				if c.args != nil {
					params["arguments"] = c.args
				}
				headers := map[string]string{}
				if version != "" {
					headers["Mcp-Protocol-Version"] = version
				}
				if version == "2026-07-28" {
					params["_meta"] = statelessMeta(version)
					headers["Mcp-Method"], headers["Mcp-Name"] = "tools/call", c.tool
				}
				body := rpc(c.id, "tools/call", params)
				// A first call through the SDK, so a call that records (a
				// route, an approval with an idempotency key) is a replay in
				// both answers compared below.
				send(slow, c.key, body, headers)
				before := mcp.FastCalls(fast)
				want := send(slow, c.key, body, headers)
				// The fast path with the key read from the store, and with
				// the key the front door took from its view of verified
				// keys (checked at the commit, or confirmed before the
				// answer): the same answers.
				for _, h := range []struct {
					name string
					h    http.Handler
				}{{"fast", fast}, {"fast, key hinted", hintedKey(e, fast)}} {
					got := send(h.h, c.key, body, headers)
					if got.Code != want.Code {
						t.Errorf("%s: status %d, SDK %d", h.name, got.Code, want.Code)
					}
					gh, wh := got.Header().Clone(), want.Header().Clone()
					gh.Del("Date")
					wh.Del("Date")
					if !reflect.DeepEqual(gh, wh) {
						t.Errorf("%s: headers %v, SDK %v", h.name, gh, wh)
					}
					g, w := volatile(got.Body.Bytes()), volatile(want.Body.Bytes())
					if !bytes.Equal(g, w) {
						t.Errorf("%s: answers differ:\nfast %s\nSDK  %s", h.name, g, w)
					}
					if len(w) < 40 {
						t.Errorf("suspiciously short answer %s", w)
					}
				}
				if mcp.FastCalls(fast) != before+2 {
					t.Fatalf("the fast path did not answer this call")
				}
			})
		}
	}
}

// hintedKey serves h as the front door does for a key it took from the
// service's view of verified keys: the request's token noted as verified,
// hinted. A token that does not verify is left for h to refuse.
func hintedKey(e *testenv.Env, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		if p, err := e.Svc.Authenticate(r.Context(), tok); err == nil {
			r = r.WithContext(ladder.WithVerifiedKey(r.Context(), tok, p, true))
		}
		h.ServeHTTP(w, r)
	})
}

// statelessMeta is the _meta a 2026-07-28 client sends with every request.
func statelessMeta(version string) map[string]any {
	return map[string]any{
		"io.modelcontextprotocol/protocolVersion":    version,
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"roots": map[string]any{"listChanged": true}, "elicitation": map[string]any{}},
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "fast-path-test", "version": "1.0.0"},
	}
}

// volatile blanks what differs between two calls by design (ids of
// records, times, audit sequence numbers) without touching anything else.
func volatile(b []byte) []byte {
	b = idRE.ReplaceAll(b, []byte("${1}_ID"))
	b = timeRE.ReplaceAll(b, []byte(`"$1":"TIME"`))
	return seqRE.ReplaceAll(b, []byte(`"audit_seq":0`))
}

// TestFastPathLeavesTheRestToTheSDK: requests the SDK checks in ways the
// fast path does not copy go to the SDK, whose answer stands.
func TestFastPathLeavesTheRestToTheSDK(t *testing.T) {
	e, h, _ := handlers(t)
	key := e.Keys["vantrow-bills/agent"]
	steps := call(1, "which_steps_run_alone", map[string]any{})
	cases := []struct {
		name    string
		body    json.RawMessage
		headers map[string]string
		status  int
	}{
		{"_meta with a progress token", json.RawMessage(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"which_steps_run_alone","arguments":{},"_meta":{"progressToken":7}}}`), nil, http.StatusOK},
		{"unsupported protocol version", steps, map[string]string{"Mcp-Protocol-Version": "2024-01-01"}, http.StatusBadRequest},
		{"Accept without text/event-stream", steps, map[string]string{"Accept": "application/json"}, http.StatusBadRequest},
		{"Content-Type with a charset", steps, map[string]string{"Content-Type": "application/json; charset=utf-8"}, http.StatusOK},
		{"a notification (no id)", json.RawMessage(`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"which_steps_run_alone","arguments":{}}}`), nil, http.StatusBadRequest},
		{"an id of 16 digits, which the SDK still echoes exactly", json.RawMessage(`{"jsonrpc":"2.0","id":9007199254740991,"method":"tools/call","params":{"name":"which_steps_run_alone","arguments":{}}}`), nil, http.StatusOK},
		// Ids the SDK would change are refused at the front door (rpcid.go).
		{"an id beyond float64 precision", json.RawMessage(`{"jsonrpc":"2.0","id":123456789012345678,"method":"tools/call","params":{"name":"which_steps_run_alone","arguments":{}}}`), nil, http.StatusBadRequest},
		{"a float id", json.RawMessage(`{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{"name":"which_steps_run_alone","arguments":{}}}`), nil, http.StatusBadRequest},
		{"Last-Event-ID on a POST", steps, map[string]string{"Last-Event-ID": "x_1"}, http.StatusBadRequest},
	}
	stateless := func(meta map[string]any, headers map[string]string) (json.RawMessage, map[string]string) {
		hs := map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "which_steps_run_alone"}
		for k, v := range headers {
			hs[k] = v
		}
		params := map[string]any{"name": "which_steps_run_alone", "arguments": map[string]any{}}
		if meta != nil {
			params["_meta"] = meta
		}
		return rpc(1, "tools/call", params), hs
	}
	withMeta := func(kv ...any) map[string]any {
		m := statelessMeta("2026-07-28")
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] == nil {
				delete(m, kv[i].(string))
				continue
			}
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	for _, sc := range []struct {
		name    string
		meta    map[string]any
		headers map[string]string
		status  int
	}{
		{"2026-07-28 without _meta", nil, nil, http.StatusBadRequest},
		{"2026-07-28 without Mcp-Name", withMeta(), map[string]string{"Mcp-Name": ""}, http.StatusBadRequest},
		{"2026-07-28 with another Mcp-Name", withMeta(), map[string]string{"Mcp-Name": "route_item"}, http.StatusBadRequest},
		{"2026-07-28 without Mcp-Method", withMeta(), map[string]string{"Mcp-Method": ""}, http.StatusBadRequest},
		{"2026-07-28 with another _meta version", withMeta("io.modelcontextprotocol/protocolVersion", "2025-11-25"), nil, http.StatusBadRequest},
		{"2026-07-28 without client capabilities", withMeta("io.modelcontextprotocol/clientCapabilities", nil), nil, http.StatusBadRequest},
		{"2026-07-28 with client capabilities of the wrong shape", withMeta("io.modelcontextprotocol/clientCapabilities", map[string]any{"roots": "yes"}), nil, http.StatusBadRequest},
		{"2026-07-28 with client info of the wrong shape", withMeta("io.modelcontextprotocol/clientInfo", "me"), nil, http.StatusBadRequest},
		{"2026-07-28 with a progress token", withMeta("progressToken", 3), nil, http.StatusOK},
		{"2026-07-28 with an Mcp-Param header", withMeta(), map[string]string{"Mcp-Param-Queue": "bills"}, -1},
	} {
		body, hs := stateless(sc.meta, sc.headers)
		cases = append(cases, struct {
			name    string
			body    json.RawMessage
			headers map[string]string
			status  int
		}{sc.name, body, hs, sc.status})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			headers := map[string]string{"Mcp-Protocol-Version": "2025-06-18"}
			maps.Copy(headers, c.headers)
			before := mcp.FastCalls(h)
			w := post(h, key, c.body, headers)
			if mcp.FastCalls(h) != before {
				t.Errorf("the fast path answered a request it must leave to the SDK")
			}
			if c.status > 0 && w.Code != c.status {
				t.Errorf("status %d, want %d: %s", w.Code, c.status, w.Body)
			}
		})
	}
}

// FuzzFastPathMatchesSDK builds tools/call requests from fuzzed ids, tool
// names, arguments and _meta under each protocol version (and one ladder
// does not speak) and requires the
// handler's answer to equal the SDK's, whichever path took the request.
func FuzzFastPathMatchesSDK(f *testing.F) {
	e, fast, slow := handlers(f)
	// A workspace without capabilities: a capability call that creates an
	// approval could meet the pending-approval cap between the two answers
	// compared, and the difference would be the cap, not the paths.
	key := e.Keys["checkcall-loads/agent"]
	hinted := hintedKey(e, fast)
	meta, _ := json.Marshal(statelessMeta("2026-07-28"))
	for _, s := range []struct {
		version       uint8
		id, name      string
		args, metaArg string
	}{
		{0, `1`, "which_steps_run_alone", `{}`, ``},
		{1, `"x"`, "step_evidence", `{"step":"Capture the ETA"}`, ``},
		{2, `0`, "route_item", `{"step":"capture_eta","item":"FUZZ-1"}`, ``},
		{3, `7`, "route_item", `{"step":"call_driver","item":"FUZZ-2"}`, string(meta)},
		{3, `8`, "step_evidence", `{"step":"nope <&>"}`, `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"roots":1}}`},
		{0, `1.0`, "which_steps_run_alone", `null`, `{"progressToken":1}`},
		{1, `"\u00e9"`, "list_precondition_functions", `{"case":"release_payment"}`, ``},
		{2, `-0`, "approval_status", `{"approval_id":"ap_x"}`, ``},
		{0, `1.5e300`, "which_steps_run_alone", `{}`, ``},
		{1, `9007199254740991`, "which_steps_run_alone", `{}`, ``},
		{2, `"\ud800"`, "which_steps_run_alone", `{}`, ``},
		{0, `3`, "route_item", `{"step":"capture_eta","item":"FUZZ-3","features":{"w":1,"W":2}}`, ``},
		{3, `4`, "route_item", `{"step":"capture_eta","item":"FUZZ-4","features":{"amount_usd":1e400}}`, string(meta)},
		{0, `5`, "route_item", `{"step":"capture_eta","item":"FUZZ-\ud800"}`, ``},
		{3, `6`, "route_item", `{"step":"capture_eta","item":"FUZZ-6","features":{"w\udc00":1}}`, string(meta)},
		{1, `"\ud83d\ude00"`, "route_item", `{"step":"capture_eta","item":"FUZZ-\ud83d\ude9a"}`, ``},
		{4, `7`, "which_steps_run_alone", `{}`, ``},
	} {
		f.Add(s.version, s.id, s.name, s.args, s.metaArg)
	}
	versions := []string{"2025-06-18", "2025-11-25", "", "2026-07-28", "1999-01-01"}
	f.Fuzz(func(t *testing.T, version uint8, id, name, args, metaArg string) {
		v := versions[int(version)%len(versions)]
		nameJSON, _ := json.Marshal(name)
		body := `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":` + string(nameJSON)
		if args != "" {
			body += `,"arguments":` + args
		}
		if metaArg != "" {
			body += `,"_meta":` + metaArg
		}
		body += `}}`
		headers := map[string]string{"Mcp-Protocol-Version": v}
		if v == "2026-07-28" {
			headers["Mcp-Method"], headers["Mcp-Name"] = "tools/call", name
		}
		send := func(h http.Handler) *httptest.ResponseRecorder { return post(h, key, []byte(body), headers) }
		send(slow) // a call that records is then a replay in both answers
		want := send(slow)
		// The fast path as it is, and with the key hinted by the front door.
		for _, h := range []http.Handler{fast, hinted} {
			got := send(h)
			if got.Code != want.Code {
				t.Fatalf("%s: status %d, SDK %d (%s)", body, got.Code, want.Code, want.Body)
			}
			if g, w := volatile(got.Body.Bytes()), volatile(want.Body.Bytes()); !bytes.Equal(g, w) {
				t.Fatalf("%s (protocol %q): answers differ:\nfast %s\nSDK  %s", body, v, g, w)
			}
		}
	})
}

// gobCursor is a tools/list cursor as go-sdk v1.8 spells one (a gob of its
// pageToken, base64url): one the SDK alone would take as a place to start.
func gobCursor(tb testing.TB, lastUID string) string {
	tb.Helper()
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(struct{ LastUID string }{lastUID}); err != nil {
		tb.Fatal(err)
	}
	return base64.URLEncoding.EncodeToString(buf.Bytes())
}

// TestFrontDoorRefusalsOnBothPaths: a list cursor ladder never issued, an
// MCP-Protocol-Version it does not speak and an unpaired surrogate escape
// in tools/call arguments are answered by the front door alike with the
// fast path on and off: a list cursor -32602 BAD_CURSOR (HTTP 400 under
// 2026-07-28, as the SDK maps -32602), a version 400 with the -32022
// UnsupportedProtocolVersion error listing the supported versions, a
// surrogate an isError result naming the path — each as JSON-RPC with
// data.code and data.hint and the id echoed, never the SDK's text/plain
// or bare "invalid params".
func TestFrontDoorRefusalsOnBothPaths(t *testing.T) {
	e, fast, slow := handlers(t)
	key := e.Keys["vantrow-bills/agent"]
	forged := gobCursor(t, "route_item")
	type want struct {
		status  int
		rpcCode int
		code    string
		hint    string
	}
	cursor := want{http.StatusOK, -32602, "BAD_CURSOR", "without a cursor"}
	stateless := map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}
	version := want{http.StatusBadRequest, -32022, "UNSUPPORTED_PROTOCOL_VERSION", "2026-07-28, 2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05"}
	steps := call(31, "which_steps_run_alone", map[string]any{})
	cases := []struct {
		name    string
		body    json.RawMessage
		headers map[string]string
		want    want
	}{
		{"garbage cursor", rpc(21, "tools/list", map[string]any{"cursor": "garbage!"}), nil, cursor},
		{"forged cursor the SDK would decode", rpc(22, "tools/list", map[string]any{"cursor": forged}), nil, cursor},
		{"truncated cursor", rpc(23, "tools/list", map[string]any{"cursor": forged[:len(forged)-6]}), nil, cursor},
		{"another workspace's tool as the cursor", rpc(24, "tools/list", map[string]any{"cursor": gobCursor(t, "ticket6:readLedger")}), nil, cursor},
		{"a number as the cursor", rpc(25, "tools/list", map[string]any{"cursor": 5}), nil, cursor},
		{"a cursor on prompts/list", rpc(26, "prompts/list", map[string]any{"cursor": "x"}), nil, cursor},
		{"a cursor on resources/list", rpc("r-27", "resources/list", map[string]any{"cursor": forged}), nil, cursor},
		{"a forged cursor under 2026-07-28", rpc(28, "tools/list", map[string]any{"cursor": forged, "_meta": statelessMeta("2026-07-28")}), stateless,
			want{http.StatusBadRequest, -32602, "BAD_CURSOR", "without a cursor"}},
		{"version 1999-01-01 on tools/list", rpc(29, "tools/list", nil), map[string]string{"Mcp-Protocol-Version": "1999-01-01"}, version},
		{"version 1999-01-01 on tools/call", steps, map[string]string{"Mcp-Protocol-Version": "1999-01-01"}, version},
		{"a version after 2026-07-28", steps, map[string]string{"Mcp-Protocol-Version": "2027-01-01"}, version},
		{"a version that is no date", steps, map[string]string{"Mcp-Protocol-Version": "not-a-version"}, version},
		{"initialize with an unknown version in header and body", rpc("init-1", "initialize", map[string]any{"protocolVersion": "1999-01-01", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "t", "version": "1"}}),
			map[string]string{"Mcp-Protocol-Version": "1999-01-01"}, version},
		{"a notification with an unknown version", json.RawMessage(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), map[string]string{"Mcp-Protocol-Version": "1999-01-01"}, version},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, sdkOnly := post(fast, key, c.body, c.headers), post(slow, key, c.body, c.headers)
			if got.Code != sdkOnly.Code || !bytes.Equal(got.Body.Bytes(), sdkOnly.Body.Bytes()) {
				t.Errorf("the paths answer differently:\nfast %d %s\nSDK  %d %s", got.Code, got.Body, sdkOnly.Code, sdkOnly.Body)
			}
			var resp struct {
				ID    json.RawMessage `json:"id"`
				Error struct {
					Code int `json:"code"`
					Data struct {
						Code      string   `json:"code"`
						Hint      string   `json:"hint"`
						Supported []string `json:"supported"`
						Requested string   `json:"requested"`
					} `json:"data"`
				} `json:"error"`
			}
			if ct := got.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q: %s", ct, got.Body)
			}
			if err := json.Unmarshal(got.Body.Bytes(), &resp); err != nil || got.Code != c.want.status || resp.Error.Code != c.want.rpcCode ||
				resp.Error.Data.Code != c.want.code || !strings.Contains(resp.Error.Data.Hint, c.want.hint) {
				t.Fatalf("%d %s; want %d, %d %s with a hint naming %q", got.Code, got.Body, c.want.status, c.want.rpcCode, c.want.code, c.want.hint)
			}
			var sent struct {
				ID json.RawMessage `json:"id"`
			}
			_ = json.Unmarshal(c.body, &sent)
			if len(sent.ID) == 0 {
				sent.ID = json.RawMessage("null")
			}
			if !bytes.Equal(resp.ID, sent.ID) {
				t.Errorf("id %s, sent %s", resp.ID, sent.ID)
			}
			if c.want.code == "UNSUPPORTED_PROTOCOL_VERSION" && (resp.Error.Data.Requested != c.headers["Mcp-Protocol-Version"] || !slices.Equal(resp.Error.Data.Supported, sdk.SupportedProtocolVersions())) {
				t.Errorf("data.requested %q, data.supported %v", resp.Error.Data.Requested, resp.Error.Data.Supported)
			}
		})
	}

	// What stays accepted: no cursor, an empty or null one (the first page,
	// which is every tool, with no nextCursor), and an initialize asking in
	// its body alone for a version ladder does not speak, which the
	// lifecycle spec answers with one it does.
	for _, params := range []any{nil, map[string]any{"cursor": ""}, map[string]any{"cursor": nil}} {
		w := post(fast, key, rpc(40, "tools/list", params), nil)
		var res struct {
			Result struct {
				Tools      []json.RawMessage `json:"tools"`
				NextCursor *string           `json:"nextCursor"`
			} `json:"result"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &res); err != nil || w.Code != http.StatusOK || len(res.Result.Tools) == 0 || res.Result.NextCursor != nil {
			t.Errorf("tools/list with params %v: %d %s", params, w.Code, w.Body)
		}
	}
	w := post(fast, key, rpc(41, "initialize", map[string]any{"protocolVersion": "1999-01-01", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "t", "version": "1"}}), map[string]string{"Mcp-Protocol-Version": ""})
	var init struct {
		Result struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"result"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &init); err != nil || w.Code != http.StatusOK || !slices.Contains(sdk.SupportedProtocolVersions(), init.Result.ProtocolVersion) {
		t.Errorf("initialize asking for 1999-01-01: %d %s; want a version ladder speaks", w.Code, w.Body)
	}

	// An unpaired surrogate in the arguments: the same isError result on
	// both paths, and under 2026-07-28 too; the tool does not run.
	for _, headers := range []map[string]string{nil, {"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "route_item"}} {
		params := map[string]any{"name": "route_item", "arguments": json.RawMessage(`{"step":"post_tms","item":"SUR-\ud800"}`)}
		if headers != nil {
			params["_meta"] = statelessMeta("2026-07-28")
		}
		body := rpc(50, "tools/call", params)
		got, sdkOnly := post(fast, key, body, headers), post(slow, key, body, headers)
		if got.Code != http.StatusOK || !bytes.Equal(volatile(got.Body.Bytes()), volatile(sdkOnly.Body.Bytes())) ||
			!bytes.Contains(got.Body.Bytes(), []byte(`"isError":true`)) || !bytes.Contains(got.Body.Bytes(), []byte(`item: the string holds an unpaired UTF-16 surrogate escape (\\ud800)`)) {
			t.Errorf("surrogate in the arguments (headers %v):\nfast %d %s\nSDK  %d %s", headers, got.Code, got.Body, sdkOnly.Code, sdkOnly.Body)
		}
	}
}

// TestFastPathAnswersStayApart sends route_item from many goroutines at once:
// the fast path frames each answer in a pooled buffer, and every answer must
// still carry its own request's id and item (a buffer reused before its
// answer was written would mix them).
func TestFastPathAnswersStayApart(t *testing.T) {
	e, fast, _ := handlers(t)
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for n := range 20 {
				id := g*1000 + n
				item := fmt.Sprintf("APART-%d-%d", g, n)
				body := rpc(id, "tools/call", map[string]any{"name": "route_item", "arguments": map[string]any{"step": "post_tms", "item": item}})
				w := post(fast, e.Keys["vantrow-bills/agent"], body, nil)
				var ans struct {
					ID     int `json:"id"`
					Result struct {
						StructuredContent struct {
							Item string `json:"item"`
						} `json:"structuredContent"`
					} `json:"result"`
				}
				if err := json.Unmarshal(w.Body.Bytes(), &ans); err != nil || w.Code != http.StatusOK {
					t.Errorf("call %d: HTTP %d %s (%v)", id, w.Code, w.Body.Bytes(), err)
					return
				}
				if ans.ID != id || ans.Result.StructuredContent.Item != item {
					t.Errorf("call %d for %s was answered with id %d, item %q", id, item, ans.ID, ans.Result.StructuredContent.Item)
					return
				}
			}
		})
	}
	wg.Wait()
	if mcp.FastCalls(fast) == 0 {
		t.Fatal("no call took the fast path")
	}
}

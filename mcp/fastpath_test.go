package mcp_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/ladderhq/ladder/internal/testenv"
	"github.com/ladderhq/ladder/mcp"
)

// TestFastPathMatchesSDK sends every kind of tools/call answer — results,
// isError results, JSON-RPC refusals from inside a tool, renamed tools,
// odd ids, text that JSON escapes — through the fast path and through the
// SDK, and requires the same status, headers and bytes.
func TestFastPathMatchesSDK(t *testing.T) {
	e := testenv.StartWith(t, "", testenv.Options{Seed: true})
	fast, err := mcp.New(mcp.Options{Service: e.Svc})
	if err != nil {
		t.Fatal(err)
	}
	slow, err := mcp.New(mcp.Options{Service: e.Svc})
	if err != nil {
		t.Fatal(err)
	}
	mcp.SDKOnly(slow)

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
		body      json.RawMessage
		version   string
	}{
		{"step_evidence by plain name", "vantrow-bills/agent", call(1, "step_evidence", map[string]any{"step": "Decide hold or release"}), "2025-06-18"},
		{"which_steps_run_alone, string id", "vantrow-bills/agent", call("steps-1", "which_steps_run_alone", map[string]any{}), "2025-11-25"},
		{"which_steps_run_alone, no version header", "vantrow-bills/agent", call(0, "which_steps_run_alone", map[string]any{"queue": "bills"}), ""},
		{"route_item", "vantrow-bills/agent", call(-7, "route_item", map[string]any{"step": "post_tms", "item": "FAST-1"}), "2025-06-18"},
		{"route_item with features", "vantrow-bills/agent", call(123456789012345, "route_item", map[string]any{"step": "Read the bill", "item": "FAST-2 <&>", "features": map[string]any{"amount": 12.5}}), "2025-06-18"},
		{"route_item unknown step (isError)", "vantrow-bills/agent", call(3, "route_item", map[string]any{"step": "Weigh the <moon> & \"stars\"", "item": "X"}), "2025-06-18"},
		{"route_item wrong type (isError)", "vantrow-bills/agent", call(4, "route_item", map[string]any{"step": "post_tms", "item": 42}), "2025-06-18"},
		{"arguments null", "vantrow-bills/agent", json.RawMessage(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"which_steps_run_alone","arguments":null}}`), "2025-06-18"},
		{"arguments absent", "vantrow-bills/agent", json.RawMessage(`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"step_evidence"}}`), "2025-06-18"},
		{"list_precondition_functions", "vantrow-bills/agent", call(7, "list_precondition_functions", map[string]any{}), "2025-06-18"},
		{"authorize", "iia-gate/agent", call(8, "authorize", map[string]any{"case": "ai_investment", "precondition_fn": "score_invest_governance", "evidence": govEvidence(allGovernance...)}), "2025-06-18"},
		{"gate_history_get", "iia-gate/agent", call(9, "gate_history_get", map[string]any{"limit": 5}), "2025-06-18"},
		{"capability call", "partner-programs/agent", call(10, "ticket6:readLedger", with(scope, "payload", map[string]any{})), "2025-06-18"},
		{"capability by its portable name", "partner-programs/agent", call(11, "ticket6_readLedger", scope), "2025-06-18"},
		{"capability refused inside the tool (JSON-RPC error)", "partner-programs/agent", call(12, "ticket6:readLedger", with(scope, "program", "partner-2031")), "2025-06-18"},
		{"human gate creates an approval", "partner-programs/agent", call(13, "ticket6:approveCommission", with(scope, "payload", map[string]any{"commission_id": "c-1"}, "idempotency_key", "fast-1")), "2025-06-18"},
		{"approval_status of nothing (isError)", "partner-programs/agent", call(14, "approval_status", map[string]any{"approval_id": "ap_aaaaaaaaaaaaaaaa"}), "2025-06-18"},
	}
	send := func(h http.Handler, c int, key string, body []byte, version string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", "http://ladder.test/mcp", bytes.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+e.Keys[key])
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Accept", "application/json, text/event-stream")
		if version != "" {
			r.Header.Set("Mcp-Protocol-Version", version)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// A first call through the SDK, so a call that records (a
			// route, an approval with an idempotency key) is a replay in
			// both answers compared below.
			send(slow, i, c.key, c.body, c.version)
			before := mcp.FastCalls(fast)
			want := send(slow, i, c.key, c.body, c.version)
			got := send(fast, i, c.key, c.body, c.version)
			if mcp.FastCalls(fast) != before+1 {
				t.Fatalf("the fast path did not answer this call")
			}
			if got.Code != want.Code {
				t.Errorf("status %d, SDK %d", got.Code, want.Code)
			}
			for _, hd := range []string{"Content-Type", "Cache-Control"} {
				if got.Header().Get(hd) != want.Header().Get(hd) {
					t.Errorf("%s %q, SDK %q", hd, got.Header().Get(hd), want.Header().Get(hd))
				}
			}
			g, w := volatile(got.Body.Bytes()), volatile(want.Body.Bytes())
			if !bytes.Equal(g, w) {
				t.Errorf("answers differ:\nfast %s\nSDK  %s", g, w)
			}
			if len(w) < 40 {
				t.Errorf("suspiciously short answer %s", w)
			}
		})
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
	e := testenv.StartWith(t, "", testenv.Options{Seed: true})
	h, err := mcp.New(mcp.Options{Service: e.Svc})
	if err != nil {
		t.Fatal(err)
	}
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
		{"an id beyond float64 precision", json.RawMessage(`{"jsonrpc":"2.0","id":123456789012345678,"method":"tools/call","params":{"name":"which_steps_run_alone","arguments":{}}}`), nil, http.StatusOK},
		{"a float id", json.RawMessage(`{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{"name":"which_steps_run_alone","arguments":{}}}`), nil, -1},
		{"Last-Event-ID on a POST", steps, map[string]string{"Last-Event-ID": "x_1"}, http.StatusBadRequest},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "http://ladder.test/mcp", bytes.NewReader(c.body))
			r.Header.Set("Authorization", "Bearer "+key)
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("Accept", "application/json, text/event-stream")
			r.Header.Set("Mcp-Protocol-Version", "2025-06-18")
			for k, v := range c.headers {
				r.Header.Set(k, v)
			}
			before := mcp.FastCalls(h)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if mcp.FastCalls(h) != before {
				t.Errorf("the fast path answered a request it must leave to the SDK")
			}
			if c.status > 0 && w.Code != c.status {
				t.Errorf("status %d, want %d: %s", w.Code, c.status, w.Body)
			}
		})
	}
}

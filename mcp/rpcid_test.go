package mcp_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/ladderhq/ladder/internal/testenv"
)

// sentIDs are request ids MCP allows and go-sdk carries unchanged: every
// path must give each back with the value it was sent with.
var sentIDs = []string{`7`, `0`, `-7`, `123456789012345`, `9007199254740991`, `-9007199254740991`,
	`"req-1"`, `""`, `"a\u0041"`, `"<&>"`, `"\ud83d\ude00"`, `"é"`}

// refusedIDs would come back changed through go-sdk (1.5e300 as
// -9223372036854775808, 1e2 as 100) or are not ids at all; each is refused
// with -32600 before anything runs, the id echoed as sent when it is a
// number or a string.
var refusedIDs = []struct{ id, echo string }{
	{`1.5e300`, `1.5e300`}, {`1.5`, `1.5`}, {`1e2`, `1e2`}, {`1.0`, `1.0`}, {`-0`, `-0`},
	{`9007199254740993`, `9007199254740993`}, {`123456789012345678901234567890`, `123456789012345678901234567890`},
	{`"\ud800"`, `"\ud800"`}, {`"a\udc00b"`, `"a\udc00b"`},
	{`true`, `null`}, {`{}`, `null`}, {`[1]`, `null`},
}

// idOf returns the id of a JSON-RPC answer as its bytes on the wire.
func idOf(t *testing.T, raw []byte) json.RawMessage {
	t.Helper()
	var v struct {
		ID json.RawMessage `json:"id"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("answer is not JSON-RPC: %s", raw)
	}
	return v.ID
}

// sameID: a number comes back as the same token; a string with the same
// value (go-sdk may spell its escapes differently).
func sameID(sent, got json.RawMessage) bool {
	if len(sent) > 0 && sent[0] == '"' {
		var a, b string
		return json.Unmarshal(sent, &a) == nil && json.Unmarshal(got, &b) == nil && a == b
	}
	return bytes.Equal(sent, got)
}

func callWithID(id, tool, args string) []byte {
	return []byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `}}`)
}

// TestRequestIDComesBackExactly sends each id through the real HTTP server
// on every path that answers with an id — a result (the fast path for
// short ids, the SDK for the rest), an isError result, tools/list, a
// missing key, a bad key, the rate limit — and requires the id back.
func TestRequestIDComesBackExactly(t *testing.T) {
	e := testenv.StartWith(t, "", testenv.Options{Seed: true})
	agent := e.Keys["vantrow-bills/agent"]
	limited := testenv.StartWith(t, "", testenv.Options{RatePerSecond: 0.001, RateBurst: 1})
	limitedKey := limited.Keys["vantrow-bills/agent"]
	limited.Do("POST", "/mcp", limitedKey, rpc(1, "tools/list", nil)) // spends the burst
	for _, id := range sentIDs {
		paths := []struct {
			name   string
			env    *testenv.Env
			key    string
			body   []byte
			status int
		}{
			{"result", e, agent, callWithID(id, "which_steps_run_alone", `{}`), http.StatusOK},
			{"isError result", e, agent, callWithID(id, "route_item", `{"step":"post_tms","item":42}`), http.StatusOK},
			{"duplicate-key isError result", e, agent, callWithID(id, "route_item", `{"step":"post_tms","step":"x","item":"a"}`), http.StatusOK},
			{"out-of-range isError result", e, agent, callWithID(id, "route_item", `{"step":"post_tms","item":"a","features":{"n":1e400}}`), http.StatusOK},
			{"tools/list", e, agent, []byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/list"}`), http.StatusOK},
			{"no key", e, "", callWithID(id, "which_steps_run_alone", `{}`), http.StatusUnauthorized},
			{"bad key", e, "ldr_aaaaaaaaaaaaa_bbbbbbbbbbbbbbbbbbbbbbbbbb", callWithID(id, "which_steps_run_alone", `{}`), http.StatusUnauthorized},
			{"rate limited", limited, limitedKey, callWithID(id, "which_steps_run_alone", `{}`), http.StatusOK},
		}
		for _, p := range paths {
			r := p.env.Do("POST", "/mcp", p.key, p.body)
			if r.Status != p.status {
				t.Errorf("id %s, %s: status %d, want %d: %s", id, p.name, r.Status, p.status, r.Raw)
				continue
			}
			if got := idOf(t, r.Raw); !sameID(json.RawMessage(id), got) {
				t.Errorf("id %s, %s: answered with id %s: %s", id, p.name, got, r.Raw)
			}
		}
	}
}

// TestUnfaithfulIDsRefused: an id go-sdk would change is refused the same
// way with a key, without one, on the fast path and through the SDK, and
// the call it carried does not run.
func TestUnfaithfulIDsRefused(t *testing.T) {
	e, fast, slow := handlers(t)
	agent, human := e.Keys["partner-programs/agent"], e.Keys["partner-programs/human"]
	for i, c := range refusedIDs {
		// A call that would create an approval if it ran.
		body := callWithID(c.id, "ticket6:approveCommission", `{"program":"partner-2027","relationship":"relationship:partner-2027:creator-1","payload":{"commission_id":"c-id-`+string(rune('a'+i))+`"}}`)
		answers := map[string][]byte{}
		for name, send := range map[string]func() (int, []byte){
			"HTTP, agent key": func() (int, []byte) { r := e.Do("POST", "/mcp", agent, body); return r.Status, r.Raw },
			"HTTP, no key":    func() (int, []byte) { r := e.Do("POST", "/mcp", "", body); return r.Status, r.Raw },
			"fast path":       func() (int, []byte) { w := post(fast, agent, body, nil); return w.Code, w.Body.Bytes() },
			"SDK only":        func() (int, []byte) { w := post(slow, agent, body, nil); return w.Code, w.Body.Bytes() },
		} {
			status, raw := send()
			var resp struct {
				ID    json.RawMessage `json:"id"`
				Error struct {
					Code int `json:"code"`
					Data struct {
						Code  string `json:"code"`
						Field string `json:"field"`
						Hint  string `json:"hint"`
					} `json:"data"`
				} `json:"error"`
			}
			if err := json.Unmarshal(raw, &resp); err != nil || status != http.StatusBadRequest || resp.Error.Code != -32600 ||
				resp.Error.Data.Code != "INVALID_ARGUMENT" || resp.Error.Data.Field != "id" || !bytes.Equal(resp.ID, json.RawMessage(c.echo)) {
				t.Errorf("id %s, %s: %d %s; want 400, -32600 INVALID_ARGUMENT naming id, id %s", c.id, name, status, raw, c.echo)
			}
			answers[name] = raw
		}
		if !bytes.Equal(answers["fast path"], answers["SDK only"]) || !bytes.Equal(answers["HTTP, agent key"], answers["HTTP, no key"]) {
			t.Errorf("id %s: the paths answer differently: %q", c.id, answers)
		}
	}
	r := e.Do("GET", "/v1/approvals", human, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("list approvals: %d %s", r.Status, r.Raw)
	}
	if list, _ := r.Body["approvals"].([]any); len(list) != 0 {
		t.Fatalf("a call with a refused id ran: %d approvals: %s", len(list), r.Raw)
	}
}

// TestIDOutsideFloat64 names the id when it is a number no float64 holds
// (the body's own fault: no id can be echoed).
func TestIDOutsideFloat64(t *testing.T) {
	e := testenv.StartWith(t, "", testenv.Options{})
	r := e.Do("POST", "/mcp", e.Keys["vantrow-bills/agent"], `{"jsonrpc":"2.0","id":1e400,"method":"tools/list"}`)
	if r.Status != http.StatusBadRequest || !bytes.Contains(r.Raw, []byte(`"code":-32700`)) || !bytes.Contains(r.Raw, []byte(`"hint":"id: 1e400 is outside the range of a 64-bit float`)) || !bytes.Contains(r.Raw, []byte(`"id":null`)) {
		t.Fatalf("got %d %s", r.Status, r.Raw)
	}
}

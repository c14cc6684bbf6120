package mcp_test

import (
	"encoding/json"
	"flag"
	"regexp"
	"strings"
	"testing"

	"github.com/ladderhq/ladder/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite the golden transcripts in testdata/transcripts/")

// exchange is one request of a transcript and what came back.
type exchange struct {
	Name     string
	Key      string // "workspace/kind", "" for none, or a literal token
	Headers  map[string]string
	Request  json.RawMessage
	Status   int
	WWWAuth  string
	Response json.RawMessage // normalized
}

func rpc(id any, method string, params any) json.RawMessage {
	m := map[string]any{"jsonrpc": "2.0", "id": id, "method": method}
	if params != nil {
		m["params"] = params
	}
	b, _ := json.Marshal(m)
	return b
}

func call(id any, tool string, args any) json.RawMessage {
	return rpc(id, "tools/call", map[string]any{"name": tool, "arguments": args})
}

// volatile parts of answers: random ids and times.
var (
	idRE   = regexp.MustCompile(`\b(rt|rv|lc|oc|ap|gd|cl)_[0-9a-v]{26}\b`)
	keyRE  = regexp.MustCompile(`"(actor|reviewer)":"[a-z2-7]{13}"`)
	timeRE = regexp.MustCompile(`"(at|created_at|expires_at)":"[0-9T:.Z-]+"`)
	seqRE  = regexp.MustCompile(`"audit_seq":[0-9]+`)
	hostRE = regexp.MustCompile(`http://127\.0\.0\.1:[0-9]+`)
)

func normalize(b []byte) []byte {
	b = idRE.ReplaceAll(b, []byte("${1}_ID"))
	b = keyRE.ReplaceAll(b, []byte(`"$1":"KEY_ID"`))
	b = timeRE.ReplaceAll(b, []byte(`"$1":"TIME"`))
	b = seqRE.ReplaceAll(b, []byte(`"audit_seq":0`))
	b = hostRE.ReplaceAll(b, []byte("http://SERVER"))
	var v any
	if json.Unmarshal(b, &v) != nil {
		return b
	}
	out, _ := json.MarshalIndent(v, "", "  ")
	return out
}

// transcripts are the seed 000 example exchange and every error case,
// replayed through the real HTTP handler.
var transcripts = map[string][]exchange{
	"seed000": {
		{Name: "step_evidence by plain name (the seed 000 example)", Key: "vantrow-bills/agent", Request: call(1, "step_evidence", map[string]any{"step": "Decide hold or release"})},
		{Name: "which_steps_run_alone", Key: "vantrow-bills/agent", Request: call(2, "which_steps_run_alone", map[string]any{})},
		{Name: "route_item", Key: "vantrow-bills/agent", Request: call(3, "route_item", map[string]any{"step": "post_tms", "item": "BILL-2026-00042"})},
		{Name: "step_evidence for an unknown step", Key: "vantrow-bills/agent", Request: call(4, "step_evidence", map[string]any{"step": "Check the fuel surcharge"})},
	},
	"seed004": {
		{Name: "tools/call ticket6:readLedger with this workspace's scope (the seed 004 example)", Key: "partner-programs/agent", Request: call(2, "ticket6:readLedger", map[string]any{"program": "partner-2027", "relationship": "relationship:partner-2027:creator-1", "payload": map[string]any{}})},
		{Name: "the same call with another workspace's program", Key: "partner-programs/agent", Request: call(3, "ticket6:readLedger", map[string]any{"program": "partner-2031", "relationship": "relationship:partner-2027:creator-1", "payload": map[string]any{}})},
		{Name: "the same call with a program that exists nowhere", Key: "partner-programs/agent", Request: call(4, "ticket6:readLedger", map[string]any{"program": "no-such-program", "relationship": "relationship:partner-2027:creator-1", "payload": map[string]any{}})},
		{Name: "a human gate creates an approval and runs nothing", Key: "partner-programs/agent", Request: call(5, "ticket6:approveCommission", map[string]any{"program": "partner-2027", "relationship": "relationship:partner-2027:creator-1", "payload": map[string]any{"commission_id": "c-1"}})},
		{Name: "a capability declared but not served", Key: "partner-programs/agent", Request: call(6, "ticket7:recordPayoutReceipt", map[string]any{"program": "partner-2027", "relationship": "relationship:partner-2027:creator-1", "payload": map[string]any{}})},
		{Name: "the portable name of a capability is accepted", Key: "partner-programs/agent", Request: call(7, "ticket6_readLedger", map[string]any{"program": "partner-2027", "relationship": "relationship:partner-2027:creator-1"})},
	},
	"errors": {
		{Name: "no key", Key: "", Request: rpc(10, "tools/list", nil)},
		{Name: "bad key", Key: "ldr_aaaaaaaaaaaaa_bbbbbbbbbbbbbbbbbbbbbbbbbb", Request: rpc("req-11", "tools/list", nil)},
		{Name: "human key", Key: "vantrow-bills/human", Request: rpc(12, "tools/list", nil)},
		{Name: "admin key", Key: "vantrow-bills/admin", Request: rpc(13, "tools/list", nil)},
		{Name: "unknown tool", Key: "vantrow-bills/agent", Request: call(14, "ticket6:readLedger", map[string]any{})},
		{Name: "argument of the wrong type", Key: "vantrow-bills/agent", Request: call(15, "route_item", map[string]any{"step": "post_tms", "item": 42})},
		{Name: "case-variant argument key", Key: "vantrow-bills/agent", Request: call(16, "step_evidence", map[string]any{"Step": "post_tms"})},
		{Name: "missing required argument", Key: "vantrow-bills/agent", Request: call(17, "route_item", map[string]any{"step": "post_tms"})},
		{Name: "duplicate key in the envelope", Key: "vantrow-bills/agent", Request: json.RawMessage(`{"jsonrpc":"2.0","id":18,"method":"tools/list","method":"tools/call"}`)},
		{Name: "NUL-suffixed key", Key: "vantrow-bills/agent", Request: json.RawMessage(`{"jsonrpc":"2.0","id":19,"method":"tools/call","params":{"name":"step_evidence","arguments":{"step\u0000":"x","step":"post_tms"}}}`)},
		{Name: "foreign Origin", Key: "vantrow-bills/agent", Headers: map[string]string{"Origin": "https://evil.example"}, Request: rpc(20, "tools/list", nil)},
		{Name: "case-variant keys inside a capability payload", Key: "vantrow-bills/agent", Request: json.RawMessage(`{"jsonrpc":"2.0","id":21,"method":"tools/call","params":{"name":"tms:postBill","arguments":{"payload":{"bill_id":"B-1","Bill_id":"B-EVIL"},"idempotency_key":"golden-21"}}}`)},
		{Name: "a number beyond float64 in the arguments", Key: "vantrow-bills/agent", Request: json.RawMessage(`{"jsonrpc":"2.0","id":22,"method":"tools/call","params":{"name":"route_item","arguments":{"step":"post_tms","item":"a","features":{"amount_usd":1e400}}}}`)},
		{Name: "a fractional id", Key: "vantrow-bills/agent", Request: json.RawMessage(`{"jsonrpc":"2.0","id":1.5,"method":"tools/list"}`)},
		{Name: "a fractional id without a key", Key: "", Request: json.RawMessage(`{"jsonrpc":"2.0","id":1.5,"method":"tools/list"}`)},
		{Name: "an unpaired surrogate escape in an argument", Key: "vantrow-bills/agent", Request: json.RawMessage(`{"jsonrpc":"2.0","id":23,"method":"tools/call","params":{"name":"route_item","arguments":{"step":"post_tms","item":"B-\ud800"}}}`)},
		{Name: "an unpaired surrogate escape in an argument's key", Key: "vantrow-bills/agent", Request: json.RawMessage(`{"jsonrpc":"2.0","id":24,"method":"tools/call","params":{"name":"route_item","arguments":{"step":"post_tms","item":"a","features":{"w\udc00":1}}}}`)},
		{Name: "an unpaired surrogate escape outside the arguments", Key: "vantrow-bills/agent", Request: json.RawMessage(`{"jsonrpc":"2.0","id":25,"method":"tools/list","params":{"_meta":{"note":"\ud800"}}}`)},
		{Name: "a tools/list cursor this server never issued", Key: "vantrow-bills/agent", Request: rpc(26, "tools/list", map[string]any{"cursor": "Zm9v"})},
		{Name: "an unsupported MCP-Protocol-Version header", Key: "vantrow-bills/agent", Headers: map[string]string{"MCP-Protocol-Version": "1999-01-01"}, Request: rpc(27, "tools/list", nil)},
		{Name: "initialize with an unsupported MCP-Protocol-Version header", Key: "vantrow-bills/agent", Headers: map[string]string{"MCP-Protocol-Version": "1999-01-01"},
			Request: rpc("init-28", "initialize", map[string]any{"protocolVersion": "1999-01-01", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "golden", "version": "1"}})},
	},
}

// TestGoldenTranscripts replays each transcript against a seeded server and
// compares every exchange with its file under testdata/transcripts/.
func TestGoldenTranscripts(t *testing.T) {
	for name, exs := range transcripts {
		t.Run(name, func(t *testing.T) {
			e := testenv.StartWith(t, "", testenv.Options{Seed: true})
			var got []exchange
			for _, ex := range exs {
				key := ex.Key
				if k, ok := e.Keys[key]; ok {
					key = k
				}
				var hs []testenv.Header
				for k, v := range ex.Headers {
					hs = append(hs, testenv.Header{Name: k, Value: v})
				}
				r := e.DoWith("POST", "/mcp", key, []byte(ex.Request), hs...)
				ex.Status, ex.WWWAuth = r.Status, r.Header.Get("WWW-Authenticate")
				ex.Response = normalize(r.Raw)
				got = append(got, ex)
			}
			checkTranscript(t, name, got)
		})
	}
}

// TestSeedExample checks the seed 000 example exchange sentence by sentence,
// independent of the golden transcript.
func TestSeedExample(t *testing.T) {
	e := testenv.StartWith(t, "", testenv.Options{Seed: true})
	r := e.Do("POST", "/mcp", e.Keys["vantrow-bills/agent"], []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"step_evidence","arguments":{"step":"Decide hold or release"}}}`))
	res := r.Body["result"].(map[string]any)
	text := res["content"].([]any)[0].(map[string]any)["text"].(string)
	if !strings.HasPrefix(text, "Decide hold or release is in shadow. Evidence to week 14: ") {
		t.Fatalf("text = %q", text)
	}
	sc := res["structuredContent"].(map[string]any)
	if sc["lane"] != "shadow" || sc["evidence_to_week"] != 14.0 {
		t.Fatalf("structured: lane %v, evidence_to_week %v", sc["lane"], sc["evidence_to_week"])
	}
	if acc := sc["figures"].(map[string]any)["rolling_4"].(map[string]any)["accuracy"]; acc == nil {
		t.Fatal("figures.rolling_4.accuracy missing")
	}

	r = e.Do("POST", "/mcp", e.Keys["vantrow-bills/agent"], []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"which_steps_run_alone","arguments":{}}}`))
	text = r.Body["result"].(map[string]any)["content"].([]any)[0].(map[string]any)["text"].(string)
	if want := "Runs alone (Auto): Read the bill; Post to the TMS. 5 other steps need a person."; !strings.HasPrefix(text, want) {
		t.Fatalf("which_steps_run_alone text = %q, want prefix %q", text, want)
	}
}

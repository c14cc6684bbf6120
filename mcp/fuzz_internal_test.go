package mcp

import (
	"testing"

	"github.com/ladderhq/ladder/internal/strictjson"
)

// FuzzParseEnvelope feeds the front door's JSON-RPC decoding arbitrary
// bytes: it must never panic, and whatever it accepts is one strict JSON
// object with "jsonrpc": "2.0" and a method.
func FuzzParseEnvelope(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"route_item","arguments":{"step":"post_tms","item":"B-1"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","Method":"x"}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","method\u0000":"x"}`,
		`{"jsonrpc":"2.0","id":1,"method":"a","method":"b"}`,
		`[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]`,
		`{"jsonrpc":"1.0","id":1,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":` + deep(70) + `}`,
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\"}",
		``, `null`, `{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		env, err := parseEnvelope(body)
		if err != nil {
			if err.Code == "" {
				t.Fatalf("refusal without a code for %q", body)
			}
			return
		}
		if env.JSONRPC != "2.0" || env.Method == "" {
			t.Fatalf("accepted %q as %+v", body, env)
		}
		if cerr := strictjson.Check(body); cerr != nil {
			t.Fatalf("accepted %q that strict JSON refuses: %v", body, cerr)
		}
	})
}

func deep(n int) string {
	s := ""
	for range n {
		s += "["
	}
	for range n {
		s += "]"
	}
	return s
}

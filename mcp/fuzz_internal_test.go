package mcp

import (
	"errors"
	"strconv"
	"testing"

	"github.com/ladderhq/ladder/internal/mcpwire"
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
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"payload":{"bill_id":"a","Bill_id":"b"}}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"amount_usd":1e400}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"a":1,"a":2},"Name":"u"}}`,
		`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"t","arguments":{"a":1,"A":2}}}`,
		`{"jsonrpc":"2.0","id":1.5e300,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":9007199254740993,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":-0,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":"\ud800","method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":"\ud83d\ude00","method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":1e400,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"evidence":{"bill_id":"\ud800"}}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"\udc00":1}}}`,
		`{"jsonrpc":"2.0","id":"\ud800","method":"tools/call","params":{"name":"t","arguments":{"a":1,"A":2}}}`,
		`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"t","arguments":{"a":"\ud800"}},"id":"\udc00"}`,
		`{"jsonrpc":"2.0","id":"\ud800","method":"tools/list","params":{"cursor":"\udbff"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":"Zm9v"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		env, err := parseEnvelope(body)
		if err != nil {
			if err.Code == "" {
				t.Fatalf("refusal without a code for %q", body)
			}
			if id := env.ID; len(id) > 0 && string(id) != "null" && mcpwire.EchoID(id) == nil {
				t.Fatalf("refusal of %q echoes the id %s, which is not a string or a number", body, id)
			}
			return
		}
		if env.JSONRPC != "2.0" || env.Method == "" {
			t.Fatalf("accepted %q as %+v", body, env)
		}
		// An accepted id comes back unchanged through go-sdk, which reads a
		// number as a float64 and converts it to an int64.
		if id := env.ID; len(id) > 0 && id[0] != '"' && string(id) != "null" {
			f, perr := strconv.ParseFloat(string(id), 64)
			if perr != nil || strconv.FormatInt(int64(f), 10) != string(id) {
				t.Fatalf("accepted %q with the id %s, which go-sdk would not echo as sent", body, id)
			}
		}
		cerr := strictjson.Check(body)
		if env.argsFault == nil {
			if cerr != nil {
				t.Fatalf("accepted %q that strict JSON refuses: %v", body, cerr)
			}
			return
		}
		// A fault held back for an isError answer: it is the body's first
		// fault, inside the arguments of a call with an id, and the rest of
		// the body is strict.
		var se *strictjson.Error
		if !errors.As(cerr, &se) || se.Path != joinArgs(env.argsFault.Path) || se.Problem != env.argsFault.Problem {
			t.Fatalf("%q: held fault %v, Check says %v", body, env.argsFault, cerr)
		}
		if env.Method != "tools/call" || len(env.ID) == 0 || string(env.ID) == "null" {
			t.Fatalf("%q: a fault held back for a request that is not a call with an id", body)
		}
		if _, herr := strictjson.CheckHolding(body, argumentsPath); herr != nil {
			t.Fatalf("%q: held back an arguments fault, but the envelope has its own: %v", body, herr)
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

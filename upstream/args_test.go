package upstream

import (
	"bytes"
	"encoding/json"
	"testing"
)

// argumentPayloads are payloads toolArguments reads itself (canonical ones,
// spaced ones, a member named like a scope field, a key sent twice, text
// JSON and HTML escape, deep values, long numbers) and ones it leaves to
// encoding/json (escaped or invalid keys, not an object, not JSON).
var argumentPayloads = []string{
	``, `{}`, ` { } `, `{"bill_id":"B-9","amount":12345678901234567}`,
	`{"program":"p-chosen","bill_id":"B-9"}`, `{"a":1,"a":2}`, `{"b":1,"a":{"z":[1, 2.50, {"y":null}]}}`,
	`{"note":"<tag> & \u2028 \"quoted\"","k<&>":true}`, `{"x":"\ud83d\ude00 é"}`,
	`{"a\u0062":1}`, "{\"\xff\":1}", `null`, `[1]`, `"x"`, `{"a":}`, `{"a":1}x`,
}

// FuzzToolArguments holds toolArguments to toolArgumentsDecoded, its
// encoding/json form: the same bytes, or both refuse the payload.
func FuzzToolArguments(f *testing.F) {
	for _, p := range argumentPayloads {
		f.Add([]byte(p), "p-1")
	}
	f.Add([]byte(`{"relationship":"agent's"}`), "r<&>\u2028")
	f.Fuzz(func(t *testing.T, payload []byte, scope string) {
		req := Request{Payload: payload, Scope: map[string]string{"program": "p-1", "relationship": scope}}
		got, gerr := toolArguments(req)
		want, werr := toolArgumentsDecoded(req)
		if (gerr == nil) != (werr == nil) {
			t.Fatalf("payload %q: toolArguments %s (%v), encoding/json %s (%v)", payload, got, gerr, want, werr)
		}
		if gerr == nil && !bytes.Equal(got, want) {
			t.Fatalf("payload %q:\n got %s\nwant %s", payload, got, want)
		}
		if gerr == nil && !json.Valid(got) {
			t.Fatalf("payload %q: arguments %s are not JSON", payload, got)
		}
	})
}

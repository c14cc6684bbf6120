package service

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ladderhq/ladder/internal/strictjson"
)

// objectSeeds are arguments for TestDecodeObject and FuzzDecodeObject.
var objectSeeds = []string{`{}`, ` { "bill_id" : "B1" , "amount_usd" : 12.50 } `, `{"n":123456789012345678901234567890,"t":true,"f":false,"z":null}`,
	`{"nested":{"a":[1,"x",{"b":null}]},"s":"a\nb"}`, `{"esc\u0061ped":1}`, `{"lone":"\ud800"}`, `null`, `[]`, `"s"`, `1`, `{"a":1}x`}

// decodeReference is how splitArgs read a payload before decodeObject: a
// json.Decoder with UseNumber into a map.
func decodeReference(raw []byte) map[string]any {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil
	}
	return m
}

// TestDecodeObject: decodeObject reads what the decoder reads, numbers as
// their literals, and nil for what is not an object.
func TestDecodeObject(t *testing.T) {
	for _, s := range objectSeeds {
		if diff := cmp.Diff(decodeReference([]byte(s)), decodeObject([]byte(s))); diff != "" && strictjson.Check([]byte(s)) == nil {
			t.Errorf("decodeObject(%s) (-decoder +got):\n%s", s, diff)
		}
	}
	if got := decodeObject([]byte(`{"amount":12.50}`))["amount"]; got != json.Number("12.50") {
		t.Errorf("amount = %#v, want the literal 12.50", got)
	}
	if got := decodeObject([]byte(`null`)); got != nil {
		t.Errorf("decodeObject(null) = %#v, want nil (not an object)", got)
	}
}

// FuzzDecodeObject: for any arguments strictjson lets through (the only
// ones splitArgs reads), decodeObject reads what a decoder reads.
func FuzzDecodeObject(f *testing.F) {
	for _, s := range objectSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if strictjson.Check(data) != nil {
			return
		}
		if diff := cmp.Diff(decodeReference(data), decodeObject(data)); diff != "" {
			t.Fatalf("decodeObject(%q) (-decoder +got):\n%s", data, diff)
		}
	})
}

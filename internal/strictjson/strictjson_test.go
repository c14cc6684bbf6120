package strictjson_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/ladderhq/ladder/internal/strictjson"
)

type body struct {
	Step     string         `json:"step"`
	Item     string         `json:"item"`
	Features map[string]any `json:"features,omitempty"`
	Nested   *struct {
		Severity int `json:"severity"`
	} `json:"nested,omitempty"`
}

func TestUnmarshalRejects(t *testing.T) {
	deep := strings.Repeat(`{"a":`, 70) + "1" + strings.Repeat("}", 70)
	tests := []struct {
		name, in, want string
	}{
		{"duplicate key", `{"step":"a","step":"b"}`, "step: duplicate key"},
		{"case variant", `{"Step":"a"}`, `Step: key differs only in case from "step"`},
		{"nested case variant", `{"nested":{"Severity":1}}`, `nested.Severity: key differs only in case`},
		{"unknown field", `{"stepp":"a"}`, "stepp: unknown field; expected one of features, item, nested, step"},
		{"NUL suffixed key", "{\"step\\u0000\":\"a\"}", "contains a NUL character"},
		{"invalid UTF-8 key", "{\"st\xffep\":\"a\"}", "not valid UTF-8"},
		{"too deep", `{"features":` + deep + `}`, "nesting deeper than 64"},
		{"trailing data", `{"step":"a"} {}`, "unexpected data after the JSON value"},
		{"empty", ``, "empty body"},
		{"wrong type", `{"step":5}`, "step: expected string"},
		{"duplicate inside free-form map", `{"features":{"w":1,"w":2}}`, "features.w: duplicate key"},
		// Case-variant siblings at any depth, not only against a struct's
		// field names: a free-form map keeps both, and readers downstream
		// disagree on which one a field is.
		{"case variant inside free-form map", `{"features":{"Weight":2,"weight":3}}`, `features.weight: key differs only in case from "Weight" in the same object; send one key`},
		{"case variant in an array element", `{"features":{"a":[{"x":1},{"x":1,"X":2}]}}`, `features.a[1].X: key differs only in case from "x"`},
		{"case variant by Unicode folding (Kelvin sign)", "{\"features\":{\"k\":1,\"\u212a\":2}}", "key differs only in case from \"k\""},
		{"number beyond float64", `{"features":{"amount_usd":1e400}}`, "features.amount_usd: 1e400 is outside the range of a 64-bit float; send a finite number"},
		{"negative number beyond float64", `{"features":{"a":[-1.8e308]}}`, "features.a[0]: -1.8e308 is outside the range"},
		{"number beyond float64 in a typed field", `{"nested":{"severity":1e999}}`, "nested.severity: 1e999 is outside the range"},
		{"400 digits", `{"features":{"n":` + strings.Repeat("9", 400) + `}}`, "features.n: 9999999999999999…99999999 is outside the range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b body
			err := strictjson.Unmarshal([]byte(tt.in), &b)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Unmarshal(%q) error = %v, want it to contain %q", tt.in, err, tt.want)
			}
		})
	}
}

func TestUnmarshalAccepts(t *testing.T) {
	var b body
	if err := strictjson.Unmarshal([]byte(`{"step":"post_tms","item":"B-1","features":{"Weight":2,"height":3,"tiny":1e-400,"max":1.7976931348623157e308,"i":1,"\u0130":2},"nested":{"severity":2}}`), &b); err != nil {
		t.Fatal(err)
	}
	if b.Step != "post_tms" || b.Item != "B-1" || b.Nested.Severity != 2 || len(b.Features) != 6 {
		t.Fatalf("decoded %+v", b)
	}
}

// TestCheckEveryDepth: Check alone (the capability call path, which has no
// target type) refuses case-variant and duplicate keys and out-of-range
// numbers wherever they are, naming the path.
func TestCheckEveryDepth(t *testing.T) {
	tests := []struct{ in, path, want string }{
		{`{"payload":{"bill_id":"a","Bill_id":"b"}}`, "payload.Bill_id", `key differs only in case from "bill_id" in the same object; send one key, spelled as documented`},
		{`{"bill_id":"a","BILL_ID":"b"}`, "BILL_ID", `differs only in case from "bill_id"`},
		{`{"evidence":{"checks":[{"pod_received":true,"POD_received":false}]}}`, "evidence.checks[0].POD_received", "differs only in case"},
		{`{"payload":{"a":{"b":{"c":1,"c":2}}}}`, "payload.a.b.c", "duplicate key; send each key once"},
		{`{"payload":{"amount_usd":1e400}}`, "payload.amount_usd", "1e400 is outside the range of a 64-bit float; send a finite number"},
		{`{"evidence":{"ok":true,"score":-1E+309}}`, "evidence.score", "-1E+309 is outside the range"},
		{`[1,2,1e400]`, "[2]", "outside the range"},
		{`1e400`, "", "1e400 is outside the range"},
		// An unpaired surrogate escape decodes to U+FFFD, as "\ufffd" does:
		// two bodies that differ would read alike in a handler and a log.
		{`{"evidence":{"bill_id":"\ud800"}}`, "evidence.bill_id", `the string holds an unpaired UTF-16 surrogate escape (\ud800), which JSON readers turn into U+FFFD`},
		{`{"payload":{"lines":[{"memo":"a\uDC00b"}]}}`, "payload.lines[0].memo", `(\uDC00)`},
		{`{"a":"\ud83d\u0041"}`, "a", `(\ud83d)`},       // a high surrogate followed by another escape
		{`{"a":"\ud83d\ud83d\ude00"}`, "a", `(\ud83d)`}, // the first of two highs
		{`{"a":"\ude00\ud83d"}`, "a", `(\ude00)`},       // the pair in the wrong order
		{`{"a":"x\\\ud800"}`, "a", `(\ud800)`},          // an escaped backslash, then the escape
		{`{"a":"\ud800\\udc00"}`, "a", `(\ud800)`},      // not a pair: the low half is literal text
		{`{"evidence":{"bill\ud800":"B-1"}}`, "evidence", `key "bill\ud800" holds an unpaired UTF-16 surrogate escape (\ud800)`},
		{`{"a":1, "\udfff"  :2}`, "", `key "\udfff" holds an unpaired`},
		{`["\ud800"]`, "[0]", "unpaired"},
		{`"\ud800"`, "", "unpaired"},
		// An empty key is named as one, apart from its object.
		{`{"payload":{"":1,"":2}}`, `payload[""]`, "duplicate key"},
		{`{"":1e400}`, `[""]`, "outside the range"},
	}
	for _, tt := range tests {
		err := strictjson.Check([]byte(tt.in))
		var se *strictjson.Error
		if !errors.As(err, &se) || se.Path != tt.path || !strings.Contains(se.Problem, tt.want) {
			t.Errorf("Check(%s) = %v, want path %q and %q", tt.in, err, tt.path, tt.want)
		}
	}
	for _, ok := range []string{
		`{"payload":{"bill_id":"a","bill_ids":["b"]},"Payload2":{"bill_id":"c"}}`, // same key in two objects is fine
		`{"i":1,"\u0130":2,"\u0131":3}`,                                           // dotted and dotless i do not fold to i
		`{"a":1e-400,"b":-4.9e-324,"c":1.7976931348623157e308,"d":123456789012345678901234567890}`,
		// Surrogate pairs, U+FFFD sent as itself, escaped or as UTF-8, and
		// text that only looks like an escape.
		"{\"a\":\"\\ud83d\\ude00\",\"\\uD83D\\uDE00\":\"\\ufffd\",\"b\":\"\xef\xbf\xbd\",\"c\":\"\\\\ud800\",\"d\":\"ud800\"}",
	} {
		if err := strictjson.Check([]byte(ok)); err != nil {
			t.Errorf("Check(%s) = %v, want nil", ok, err)
		}
	}
}

// TestLoneSurrogate: the scanner Check and the JSON-RPC id check share.
func TestLoneSurrogate(t *testing.T) {
	for raw, want := range map[string]string{
		`"\ud800"`: "ud800", `"\uDBFF"`: "uDBFF", `"a\udc00b"`: "udc00", `"\ud800\ud800\udc00"`: "ud800",
		`"\ud83d\ude00\ude00"`: "ude00", `"\\\ud800"`: "ud800",
		`"\ud83d\ude00"`: "", `"\\ud800"`: "", `"\ufffd"`: "", `"\u0041\ud7ff\ue000"`: "", `"\ud800`: "ud800", `"\ud8`: "",
	} {
		got, lone := strictjson.LoneSurrogate([]byte(raw))
		if lone != (want != "") || (lone && "u"+got != want) {
			t.Errorf("LoneSurrogate(%s) = %q, %v; want %q", raw, got, lone, want)
		}
	}
}

// TestCheckHolding: the held value is passed over and returned; a fault in
// it is the caller's to find, a fault anywhere else is still reported.
func TestCheckHolding(t *testing.T) {
	const hold = "params.arguments"
	held, err := strictjson.CheckHolding([]byte(`{"id":1,"params":{"name":"t","arguments":{"a":1,"A":1e400}}}`), hold)
	if err != nil || string(held) != `{"a":1,"A":1e400}` {
		t.Fatalf("held %s, err %v", held, err)
	}
	for in, path := range map[string]string{
		`{"params":{"arguments":{"a":1},"name":"t","Name":"u"}}`: "params.Name",
		`{"params":{"arguments":{},"arguments":{}}}`:             "params.arguments",
		`{"params":{"arguments":{}},"id":1e400}`:                 "id",
	} {
		var se *strictjson.Error
		if _, err := strictjson.CheckHolding([]byte(in), hold); !errors.As(err, &se) || se.Path != path {
			t.Errorf("CheckHolding(%s) = %v, want a fault at %q", in, err, path)
		}
	}
	if _, err := strictjson.CheckHolding([]byte(`{"params":{"arguments":{"a":}}}`), hold); err == nil {
		t.Error("a malformed held value passed")
	}
	if held, err := strictjson.CheckHolding([]byte(`{"params":{}}`), hold); err != nil || held != nil {
		t.Errorf("absent held value: %s, %v", held, err)
	}
}

// TestFoldKeyIsEqualFold: FoldKey puts two runes in one class exactly when
// strings.EqualFold says they are equal, for every rune.
func TestFoldKeyIsEqualFold(t *testing.T) {
	class := map[string]rune{} // FoldKey → smallest rune of the orbit
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if !utf8.ValidRune(r) {
			continue
		}
		if unicode.SimpleFold(r) == r {
			// Alone in its class: it must fold to itself, which no other
			// class can, since each folds to one of its own runes.
			if strictjson.FoldKey(string(r)) != string(r) {
				t.Fatalf("%U folds to %q", r, strictjson.FoldKey(string(r)))
			}
			continue
		}
		m := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			m = min(m, f)
			if strictjson.FoldKey(string(f)) != strictjson.FoldKey(string(r)) {
				t.Fatalf("%U and %U are equal under EqualFold but fold apart", r, f)
			}
		}
		k := strictjson.FoldKey(string(r))
		if !strings.EqualFold(k, string(r)) {
			t.Fatalf("%U folds to %q, outside its class", r, k)
		}
		if prev, ok := class[k]; ok && prev != m {
			t.Fatalf("%U folds with %U, which EqualFold tells apart", r, prev)
		}
		class[k] = m
	}
	if strictjson.FoldKey("bill_id") != "bill_id" || strictjson.FoldKey("Bill_ID") != "bill_id" {
		t.Fatal("lower-case ASCII must fold to itself")
	}
}

func FuzzUnmarshal(f *testing.F) {
	f.Add([]byte(`{"step":"a","item":"b"}`))
	f.Add([]byte(`{"Step":"a"}`))
	f.Add([]byte(`{"features":{"a":[1,2,{"b":null}]}}`))
	f.Add([]byte(`{"features":{"bill_id":"a","Bill_id":"b"}}`))
	f.Add([]byte("{\"features\":{\"s\":1,\"\u017f\":2}}"))
	f.Add([]byte(`{"features":{"amount_usd":1e400}}`))
	f.Add([]byte(`{"features":{"bill_id":"\ud800"}}`))
	f.Add([]byte(`{"features":{"\udc00":"\ud83d\ude00"}}`))
	f.Add([]byte(`{"step":"\\\ud800\ufffd"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var b body
		_ = strictjson.Unmarshal(data, &b) // must not panic
		// Whatever Check accepts has no two sibling keys that EqualFold
		// matches, no number a float64 cannot hold and no unpaired
		// surrogate escape (backslashes stand only inside strings, so a
		// scan of the whole document checks what Check checked token by
		// token, without its shortcut for strings free of U+FFFD).
		if strictjson.Check(data) != nil {
			return
		}
		if esc, lone := strictjson.LoneSurrogate(data); lone {
			t.Fatalf("Check accepted %q with the unpaired surrogate \\u%s", data, esc)
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("Check accepted %q, which does not decode: %v", data, err)
		}
		var visit func(v any)
		visit = func(v any) {
			switch v := v.(type) {
			case map[string]any:
				keys := slices.Collect(maps.Keys(v))
				for i := range keys {
					for j := i + 1; j < len(keys); j++ {
						if strings.EqualFold(keys[i], keys[j]) {
							t.Fatalf("Check accepted %q with keys %q and %q", data, keys[i], keys[j])
						}
					}
					visit(v[keys[i]])
				}
			case []any:
				for _, e := range v {
					visit(e)
				}
			case json.Number:
				if _, err := strconv.ParseFloat(string(v), 64); err != nil {
					t.Fatalf("Check accepted %q with the number %s: %v", data, v, err)
				}
			}
		}
		visit(v)
	})
}

// TestFaultsNamedInAStableOrder: with several unknown keys the error names
// the same one every time (the first in sorted order), so a client, a log
// and a golden transcript see one answer for one body.
func TestFaultsNamedInAStableOrder(t *testing.T) {
	var v struct {
		Step string `json:"step"`
	}
	body := []byte(`{"zeta":1,"beta":2,"alpha":3,"step":"x","gamma":4}`)
	for range 50 {
		err := strictjson.Unmarshal(body, &v)
		var se *strictjson.Error
		if !errors.As(err, &se) || se.Path != "alpha" {
			t.Fatalf("error = %v, want the unknown field alpha named", err)
		}
	}
}

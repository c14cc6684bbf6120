package ladder

import (
	"bytes"
	"encoding/json"
	"regexp"
	"testing"
	"unicode/utf8"
)

// stepSeeds are records and near-records for the step fast path: the
// cases it answers and the ones it hands over.
var stepSeeds = []string{
	`{"item":"B-1","queue":"bills","step":"post_tms"}`,
	`{"call_id":"cl_1","result":{"entries":[{"amount":-125,"date":"2026-11-01"}],"ok":true},"status":"succeeded"}`,
	` { "queue" : "bills" , "step" : "post_tms" } `,
	`{"queue":3,"step":"post_tms"}`,
	`{"queue":null,"step":[1,2,{"a":"b"}]}`,
	`{"queue":"a","queue":"b"}`,
	`{"Queue":"a","queue":"b","QUEUE":"c"}`,
	`{"ſtep":"long s","STEP":"x"}`,
	`{"step":"a","step":null}`,
	`{"step":"a\"b"}`,
	`{"st\u0065p":"escaped key"}`,
	"{\"step\":\"\xff\"}",
	"{\"other\":\"\xff\",\"step\":\"s\"}",
	`{"payload":{"queue":"bills","step":"post_tms"}}`,
	`{"a":truex}`,
	`{"a":01}`,
	`{"a":1.}`,
	`{"a":-}`,
	`{"a":1e+}`,
	`{"a":"\u00e9\n"}`,
	`{"a":"\u00zz"}`,
	`{"a":"\q"}`,
	`{"a":"tab	here"}`,
	`{"a":[1,]}`,
	`{"a":{"b":1,}}`,
	`{"a":1}x`,
	`{"a":1}{}`,
	`{}`,
	`{`,
	`{"step":`,
	`{"step":"x"`,
	`[{"step":"x"}]`,
}

// TestAuditStepFast: the fast path answers for the records ladder writes,
// hands over what it does not handle, and agrees with encoding/json.
func TestAuditStepFast(t *testing.T) {
	for _, s := range stepSeeds {
		q, st, ok := auditStepFast([]byte(s))
		rq, rs := auditStepReference([]byte(s))
		if ok && (q != rq || st != rs) {
			t.Errorf("auditStepFast(%s) = %q, %q; encoding/json %q, %q", s, q, st, rq, rs)
		}
	}
	for _, tc := range []struct {
		data        string
		queue, step string
		fast        bool
	}{
		{`{"item":"B-1","queue":"bills","step":"post_tms"}`, "bills", "post_tms", true},
		{`{"Queue":"a","queue":"b","QUEUE":"c"}`, "c", "", true},
		{`{"ſtep":"long s"}`, "", "long s", true},
		{`{"step":"a","step":null}`, "", "a", true},
		{`{"queue":3,"step":{"id":"x"}}`, "", "", true},
		{`{"a":truex,"step":"s"}`, "", "", false},
		{`{"st\u0065p":"escaped key"}`, "", "escaped key", false},
		{`{"step":"a\"b"}`, "", `a"b`, false},
		{"{\"other\":\"\xff\",\"step\":\"s\"}", "", "s", true},
		{"{\"step\":\"\xff\"}", "", "\ufffd", false},
	} {
		if _, _, ok := auditStepFast([]byte(tc.data)); ok != tc.fast {
			t.Errorf("auditStepFast(%s) answered %v, want %v", tc.data, ok, tc.fast)
		}
		if q, st := AuditStepOf([]byte(tc.data)); q != tc.queue || st != tc.step {
			t.Errorf("AuditStepOf(%s) = %q, %q; want %q, %q", tc.data, q, st, tc.queue, tc.step)
		}
	}
}

// FuzzAuditStepFast: whenever the fast path answers, encoding/json
// decodes the same queue and step.
func FuzzAuditStepFast(f *testing.F) {
	for _, s := range stepSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		q, s, ok := auditStepFast(data)
		if !ok {
			return
		}
		if rq, rs := auditStepReference(data); q != rq || s != rs {
			t.Fatalf("auditStepFast(%q) = %q, %q; encoding/json %q, %q", data, q, s, rq, rs)
		}
	})
}

// jsonStringSeeds are string tokens for TestJSONString and FuzzJSONString.
var jsonStringSeeds = []string{
	`"plain"`, `""`, `"é日本"`, `"a\nb"`, `"\"\\\/\b\f\n\r\t"`, `"M\u00fcller"`, `"\u0000\u001F\u007f"`,
	`"\ud83d\ude00"`, `"\uD83D\uDE00x"`, `"\ufffd"`, `"\u2028\u2029"`, "\"raw \u2028\"",
	`"\ud800"`, `"\udc00"`, `"\ud800\ud800"`, `"\ude00\ud83d"`, `"\ud800x"`, `"\ud800\u0041"`, "\"\xff\"", "\"\\n\xff\"",
}

// TestJSONString: JSONString reads what encoding/json reads, and answers
// for every string but one with invalid UTF-8 or an unpaired surrogate.
func TestJSONString(t *testing.T) {
	declined := map[string]bool{`"\ud800"`: true, `"\udc00"`: true, `"\ud800\ud800"`: true, `"\ude00\ud83d"`: true,
		`"\ud800x"`: true, `"\ud800\u0041"`: true, "\"\xff\"": true, "\"\\n\xff\"": true}
	for _, s := range jsonStringSeeds {
		got, ok := JSONString([]byte(s))
		if ok == declined[s] {
			t.Errorf("JSONString(%q) answered %v", s, ok)
			continue
		}
		var want string
		if err := json.Unmarshal([]byte(s), &want); ok && (err != nil || got != want) {
			t.Errorf("JSONString(%q) = %q; encoding/json %q (%v)", s, got, want, err)
		}
	}
}

// surrogateEscape finds a surrogate escape, paired or not: a string
// FuzzJSONString sees declined must have one or invalid UTF-8.
var surrogateEscape = regexp.MustCompile(`\\u[dD][89a-fA-F]`)

// FuzzJSONString: whatever JSONString reads, encoding/json reads alike; it
// declines only strings with invalid UTF-8 or a surrogate escape.
func FuzzJSONString(f *testing.F) {
	for _, s := range jsonStringSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 2 || data[0] != '"' || data[len(data)-1] != '"' || !json.Valid(data) {
			return // not a string token: JSONObjectMembers never gives one
		}
		got, ok := JSONString(data)
		if !ok {
			if utf8.Valid(data) && !surrogateEscape.Match(data) {
				t.Fatalf("JSONString(%q) declined a valid string", data)
			}
			return
		}
		var want string
		if err := json.Unmarshal(data, &want); err != nil || got != want {
			t.Fatalf("JSONString(%q) = %q; encoding/json %q (%v)", data, got, want, err)
		}
	})
}

// jsonScalarSeeds are values for TestJSONScalar and FuzzJSONScalar.
var jsonScalarSeeds = []string{`0`, `-0`, `12.5`, `-1e400`, `1E+2`, `123456789012345678901234567890`, `true`, `false`, `null`,
	`"plain"`, `"a\nb"`, `"\ud800"`, `{}`, `[]`, `{"a":1}`, `[1,"x"]`}

// decodeAny is what a json.Decoder with UseNumber reads into an any.
func decodeAny(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

// TestJSONScalar: JSONScalar reads every scalar as the decoder does (a
// number as its literal) and leaves objects, arrays and the strings
// JSONString declines to it.
func TestJSONScalar(t *testing.T) {
	for _, s := range jsonScalarSeeds {
		got, ok := JSONScalar([]byte(s))
		want, err := decodeAny([]byte(s))
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		_, str := JSONString([]byte(s))
		if declines := s[0] == '{' || s[0] == '[' || s[0] == '"' && !str; ok == declines {
			t.Errorf("JSONScalar(%s) answered %v", s, ok)
			continue
		}
		if ok && got != want {
			t.Errorf("JSONScalar(%s) = %#v; the decoder %#v", s, got, want)
		}
	}
	if got, ok := JSONScalar([]byte(`1.`)); ok {
		t.Errorf("JSONScalar(1.) = %#v, not a number", got)
	}
}

// FuzzJSONScalar: whatever JSONScalar reads, a decoder with UseNumber
// reads alike; it answers for every number and literal.
func FuzzJSONScalar(f *testing.F) {
	for _, s := range append(jsonScalarSeeds, jsonStringSeeds...) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) || len(data) == 0 || bytes.TrimSpace(data)[0] != data[0] || len(bytes.TrimSpace(data)) != len(data) {
			return // not a value as JSONObjectMembers gives it
		}
		got, ok := JSONScalar(data)
		if !ok {
			if data[0] != '{' && data[0] != '[' && data[0] != '"' {
				t.Fatalf("JSONScalar(%q) declined a scalar", data)
			}
			return
		}
		want, err := decodeAny(data)
		if err != nil || got != want {
			t.Fatalf("JSONScalar(%q) = %#v; the decoder %#v (%v)", data, got, want, err)
		}
	})
}

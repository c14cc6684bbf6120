package ladder

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

// jsonStrings are strings encoding/json writes in each of its ways: as
// they are, with escapes, with HTML and line separators escaped, and with
// invalid UTF-8 replaced.
var jsonStrings = []string{
	"", "call_0000000000000000000001", "ticket6:readLedger", "Called ticket6:readLedger. Result: {\"balance\":80.5}",
	"a<b>&c", "tab\there\nnew\rline\b\f", "\x00\x01\x1f", "quote \" and back \\ slash", "line\u2028para\u2029",
	"caf\u00e9 \U0001F600", "bad \xff utf8 \xe2\x80", "\xed\xa0\x80", "</script>",
}

// jsonRaws are raw values: compact ones (copied), spaced and HTML-bearing
// ones (left to encoding/json), and values that are not JSON.
var jsonRaws = []string{
	`{"balance":80.5,"entries":[{"amount":125,"currency":"USD","date":"2026-10-01","description":"Referral commission, order 1042"}],"program":"partner-2027"}`,
	`{}`, `[]`, `null`, `true`, `0`, `-1.5e+10`, `"s"`, `{"a":"x<y"}`, `{"a":"\u003c"}`, `{"a":"line` + "\u2028" + `"}`,
	` {"a" : [1, 2] } `, "{\n\t\"a\": 1\r\n}", `{"a":"\"}"}`, `{"a":"\\"}`, `[1,2,{"b":[true,false,null]}]`,
	`{"a":1`, `{"a":1}x`, `truex`, `01`, `{"a":"` + "\x01" + `"}`, ``, ` `, `{"a":"\ud800"}`, `{"a":"` + "\xff" + `"}`,
	strings.Repeat("[", 70) + strings.Repeat("]", 70),
}

// jsonFloats are float64s encoding/json writes in each of its ways: plain,
// in exponent form on either side (with the exponent's leading zero
// dropped), the shortest form of an inexact sum, and the values it refuses.
var jsonFloats = []float64{
	0, 1, 0.05, 0.1 + 0.2, -2.5, 1e-6, 9.99e-7, 1e-7, 1.5e-300, 1e20, 1e21, 123456789e15, -1e-10, math.MaxFloat64,
	math.SmallestNonzeroFloat64, math.Copysign(0, -1), math.NaN(), math.Inf(1), math.Inf(-1),
}

// fill sets every field encoding/json writes to a value drawn from r, so a
// field added to the type without its appender fails the test.
func fill(t *testing.T, r *rand.Rand, v reflect.Value) {
	t.Helper()
	typ := v.Type()
	for i := range typ.NumField() {
		f, fv := typ.Field(i), v.Field(i)
		if !f.IsExported() || f.Tag.Get("json") == "-" {
			continue
		}
		if r.IntN(4) == 0 {
			continue // the zero value, which omitempty leaves out
		}
		switch x := fv.Addr().Interface().(type) {
		case *json.RawMessage:
			*x = json.RawMessage(jsonRaws[r.IntN(len(jsonRaws))])
		case *time.Time:
			*x = someTime(r)
		case **time.Time:
			tm := someTime(r)
			*x = &tm
		case *map[string]string:
			m := map[string]string{}
			for range r.IntN(4) {
				m[jsonStrings[r.IntN(len(jsonStrings))]] = jsonStrings[r.IntN(len(jsonStrings))]
			}
			*x = m
		default:
			switch fv.Kind() {
			case reflect.String:
				fv.SetString(jsonStrings[r.IntN(len(jsonStrings))])
			case reflect.Int, reflect.Int64:
				fv.SetInt(r.Int64N(1<<40) - 1<<39)
			case reflect.Bool:
				fv.SetBool(true)
			case reflect.Float64:
				fv.SetFloat(jsonFloats[r.IntN(len(jsonFloats))])
			default:
				t.Fatalf("%s.%s is a %s: teach fill (and the type's AppendJSON) about it", typ.Name(), f.Name, f.Type)
			}
		}
	}
}

func someTime(r *rand.Rand) time.Time {
	switch r.IntN(5) {
	case 0:
		return time.Time{}
	case 1:
		return time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) // json.Marshal refuses it
	case 2:
		return time.Date(2026, 12, 3, 17, 4, 5, 123456789, time.FixedZone("", 5*3600+1800))
	}
	return time.Unix(r.Int64N(1<<34), r.Int64N(1e9)).UTC()
}

// TestAppendJSONMatchesMarshal holds the call and the call result's
// appenders to json.Marshal: the same bytes, or an error where it fails.
func TestAppendJSONMatchesMarshal(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	check := func(v any, got []byte, gotErr error) {
		t.Helper()
		want, wantErr := json.Marshal(v)
		if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
			t.Fatalf("%#v:\nAppendJSON %s (%v)\njson.Marshal %s (%v)", v, got, gotErr, want, wantErr)
		}
	}
	for range 5000 {
		var c Call
		fill(t, r, reflect.ValueOf(&c).Elem())
		got, err := c.AppendJSON(nil)
		check(c, got, err)
		var cr CallResult
		fill(t, r, reflect.ValueOf(&cr).Elem())
		got, err = cr.AppendJSON([]byte("prefix"))
		if !bytes.HasPrefix(got, []byte("prefix")) {
			t.Fatalf("AppendJSON dropped what dst held: %q", got)
		}
		if got = got[len("prefix"):]; err != nil && len(got) > 0 {
			t.Fatalf("AppendJSON failed (%v) and still appended %q", err, got)
		}
		if err != nil {
			got = nil
		}
		check(cr, got, err)
		var rt Route
		fill(t, r, reflect.ValueOf(&rt).Elem())
		got, err = rt.AppendJSON(nil)
		check(rt, got, err)
		got, err = rt.AuditData()
		check(rt.auditData(), got, err)
	}
}

// TestCallJSONSize: a call whose strings need no escaping, with every
// field set and its times in the longest form they take, encodes within
// the room jsonSize makes for it, so AppendJSON allocates once.
func TestCallJSONSize(t *testing.T) {
	zone := time.FixedZone("", -(9*3600 + 30*60))
	started := time.Date(2026, 12, 6, 23, 59, 59, 999999999, zone)
	finished := started.Add(time.Second)
	c := Call{ID: "cl_" + strings.Repeat("a", 26), Workspace: "partner-programs", Capability: "ticket6:approveCommission",
		KeyID: "k_" + strings.Repeat("b", 22), IdempotencyKey: "bill-B-1042", Status: CallFailed,
		Payload: json.RawMessage(`{"bill_id":"B-1042","amount_usd":12.5}`), Scope: map[string]string{"program": "partner-2027", "relationship": "relationship:partner-2027:creator-1"},
		RouteID: "rt_" + strings.Repeat("c", 26), GateDecisionID: "gd_" + strings.Repeat("d", 26), EvidenceSHA256: strings.Repeat("e", 64),
		ApprovalID: "ap_" + strings.Repeat("f", 26), AuditSeq: 1<<62 - 1, Result: json.RawMessage(`{"content":[{"type":"text","text":"ok"}]}`),
		Error: "upstream answered 503", ErrorCode: CodeUpstreamFailed, UpstreamStatus: 503, StartedAt: started, FinishedAt: &finished}
	doc, err := c.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(doc) > c.jsonSize() {
		t.Errorf("a call of %d bytes of JSON, jsonSize %d: count what the new bytes are in jsonSize", len(doc), c.jsonSize())
	}
}

// TestRouteAuditDataMatchesMarshal holds a route's audit data to
// json.Marshal of routeAuditData (the fields of TestAppendJSONMatchesMarshal
// above), and its fields to Route's: a field added to one and not the
// other fails here.
func TestRouteAuditDataMatchesMarshal(t *testing.T) {
	rt := Route{Queue: "bills", Step: "post_tms", Item: "B-1", Decision: DecisionActAlone, Lane: LaneAuto, AuditRate: 0.05, LaneEpoch: 3}
	got, err := rt.AuditData()
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"audit":false,"audit_rate":0.05,"decision":"act_alone","features":null,"item":"B-1","lane":"auto","lane_epoch":3,"queue":"bills","step":"post_tms"}`
	if string(got) != want {
		t.Errorf("AuditData %s, want %s", got, want)
	}
	if c, err := CanonicalJSON(got); err != nil || string(c) != want {
		t.Errorf("AuditData is not canonical: %s (%v)", c, err)
	}
	routeFields := reflect.TypeFor[Route]()
	for f := range reflect.TypeFor[routeAuditData]().Fields() {
		rf, ok := routeFields.FieldByName(f.Name)
		if !ok || rf.Type != f.Type {
			t.Errorf("routeAuditData.%s (%s) is not a field of Route", f.Name, f.Type)
		}
	}
}

func FuzzAppendJSONString(f *testing.F) {
	for _, s := range jsonStrings {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := AppendJSONString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("%q: AppendJSONString %s, json.Marshal %s", s, got, want)
		}
	})
}

// FuzzAppendCompactJSON holds AppendCompactJSON to json.Compact and to
// json.Marshal of a json.RawMessage: the same bytes, and an error exactly
// where they fail.
func FuzzAppendCompactJSON(f *testing.F) {
	for _, s := range jsonRaws {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var b bytes.Buffer
		wantErr := json.Compact(&b, raw)
		want := b.Bytes()
		got, err := AppendCompactJSON([]byte("x"), raw, false)
		if (err != nil) != (wantErr != nil) || err == nil && !bytes.Equal(got, append([]byte("x"), want...)) {
			t.Fatalf("%q: AppendCompactJSON %q (%v), json.Compact %q (%v)", raw, got, err, want, wantErr)
		}
		want, wantErr = json.Marshal(json.RawMessage(raw))
		got, err = AppendCompactJSON(nil, raw, true)
		if raw == nil {
			return // json.Marshal writes a nil RawMessage as null; callers write null themselves
		}
		if (err != nil) != (wantErr != nil) || err == nil && !bytes.Equal(got, want) {
			t.Fatalf("%q: AppendCompactJSON %q (%v), json.Marshal %q (%v)", raw, got, err, want, wantErr)
		}
	})
}

// FuzzJSONObjectMembers holds JSONObjectMembers to json.Unmarshal into a
// map of raw members: whenever it reports an object (with no escaped key),
// encoding/json reads the same members, the later of a key sent twice
// winning in both.
func FuzzJSONObjectMembers(f *testing.F) {
	for _, s := range append(jsonRaws, `{"a":1,"a":[2, 3]}`, ` {"payload" : {"b":"\""}, "program":"p"} `, `{"\u0061":1}`, `{"a":1}{}`) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got := map[string]json.RawMessage{}
		if !JSONObjectMembers(data, func(key []byte, escaped bool, v []byte) bool {
			got[string(key)] = v
			return !escaped
		}) {
			return
		}
		var want map[string]json.RawMessage
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatalf("%q: JSONObjectMembers read %q, encoding/json refuses it: %v", data, got, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: JSONObjectMembers read %q, encoding/json %q", data, got, want)
		}
	})
}

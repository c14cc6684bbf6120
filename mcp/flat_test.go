package mcp

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/internal/mcpwire"
	"github.com/ladderhq/ladder/internal/strictjson"
)

// prefilled values: decodeFlat must leave them as json.Unmarshal does
// (members absent from the object keep them) and, when it declines, not
// touch them at all.
func prefilledEnvelope() envelope {
	return envelope{JSONRPC: "x", ID: json.RawMessage(`7`), Method: "m", Params: json.RawMessage(`{"p":1}`)}
}

func prefilledCallParams() mcpwire.CallParams {
	return mcpwire.CallParams{Name: "n", Arguments: json.RawMessage(`{"a":1}`), Meta: json.RawMessage(`{}`), Task: json.RawMessage(`null`)}
}

func prefilledRouteRequest() ladder.RouteRequest {
	return ladder.RouteRequest{Queue: "q", Step: "s", Item: "i", Features: json.RawMessage(`{"f":1}`)}
}

func sameRouteRequest(a, b ladder.RouteRequest) bool {
	return a.Queue == b.Queue && a.Step == b.Step && a.Item == b.Item && bytes.Equal(a.Features, b.Features) && (a.Features == nil) == (b.Features == nil)
}

func sameEnvelope(a, b envelope) bool {
	return a.JSONRPC == b.JSONRPC && a.Method == b.Method && bytes.Equal(a.ID, b.ID) && bytes.Equal(a.Params, b.Params) &&
		(a.ID == nil) == (b.ID == nil) && (a.Params == nil) == (b.Params == nil)
}

func sameCallParams(a, b mcpwire.CallParams) bool {
	return a.Name == b.Name && bytes.Equal(a.Arguments, b.Arguments) && bytes.Equal(a.Meta, b.Meta) && bytes.Equal(a.Task, b.Task) &&
		(a.Arguments == nil) == (b.Arguments == nil) && (a.Meta == nil) == (b.Meta == nil) && (a.Task == nil) == (b.Task == nil)
}

// TestDecodeFlatReadsUsualRequests: the requests agents send take the one
// scan, and read as UnmarshalChecked reads them; the shapes it leaves to
// UnmarshalChecked are left.
func TestDecodeFlatReadsUsualRequests(t *testing.T) {
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"route_item","arguments":{"step":"post_tms","item":"B-1"}}}`,
		` { "jsonrpc" : "2.0", "method" : "tools/list" , "id" : "a b", "params" : { } } `,
		`{"jsonrpc":"2.0","id":null,"method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ticket6:readLedger","arguments":{"program":"p"},"_meta":{"progressToken":1}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"é—日本"}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools\/list"}`, // escaped strings are read too
	} {
		var fast, ref envelope
		if !decodeFlat([]byte(body), envelopeFields(&fast)) {
			t.Errorf("decodeFlat declined %s", body)
			continue
		}
		if err := strictjson.UnmarshalChecked([]byte(body), &ref); err != nil || !sameEnvelope(fast, ref) {
			t.Errorf("%s: decodeFlat read %+v, UnmarshalChecked %+v (%v)", body, fast, ref, err)
		}
		if len(fast.Params) > 0 && fast.Params[0] == '{' && bytes.Contains(fast.Params, []byte(`"name"`)) {
			var cpFast, cpRef mcpwire.CallParams
			if !decodeFlat(fast.Params, callParamsFields(&cpFast)) {
				t.Errorf("decodeFlat declined params %s", fast.Params)
			} else if err := strictjson.UnmarshalChecked(fast.Params, &cpRef); err != nil || !sameCallParams(cpFast, cpRef) {
				t.Errorf("params %s: decodeFlat read %+v, UnmarshalChecked %+v (%v)", fast.Params, cpFast, cpRef, err)
			}
		}
	}
	for _, args := range []string{
		`{"step":"post_tms","item":"B-1"}`,
		` { "queue" : "bills", "step" : "post_tms", "item" : "B-1", "features" : {"weight": 1.50} } `,
		`{"step":"post_tms","item":"B-1","features":null}`,
		// Escapes as clients write them: Python's json.dumps (non-ASCII as
		// \u), PHP's json_encode (\/), quotes, a surrogate pair.
		`{"step":"post_tms","item":"M\u00fcller \"7\" INV\/2026 \ud83d\ude00 \n\t\u0000"}`,
	} {
		var fast, ref ladder.RouteRequest
		if !decodeFlat([]byte(args), routeRequestFields(&fast)) {
			t.Errorf("decodeFlat declined route_item arguments %s", args)
		} else if err := strictjson.UnmarshalChecked([]byte(args), &ref); err != nil || !sameRouteRequest(fast, ref) {
			t.Errorf("%s: decodeFlat read %+v, UnmarshalChecked %+v (%v)", args, fast, ref, err)
		}
	}
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"Method":"tools/list"}`,           // a key of another case
		`{"jsonrpc":"2.0","id":1,"method":"tools/list","x":1}`,     // an unknown key
		`{"jsonrpc":"2.0","id":1,"method":"a","method":"b"}`,       // a repeated key
		`{"jsonrpc":"2.0","id":1,"m\u0065thod":"tools/list"}`,      // an escaped key
		`{"jsonrpc":"2.0","id":1,"method":"a\ud800"}`,              // an unpaired surrogate
		`{"jsonrpc":"2.0","id":1,"method":"\udc00\ud800"}`,         // a pair in the wrong order
		`{"jsonrpc":"2.0","id":1,"method":null}`,                   // not a string
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\"}",       // invalid UTF-8
		`[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]`,         // not an object
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"} {}`,        // two values
		`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":}`, // bad grammar
	} {
		env := prefilledEnvelope()
		if decodeFlat([]byte(body), envelopeFields(&env)) {
			t.Errorf("decodeFlat read %s, which is UnmarshalChecked's to decide", body)
		}
		if !sameEnvelope(env, prefilledEnvelope()) {
			t.Errorf("decodeFlat declined %s but changed the envelope to %+v", body, env)
		}
	}
}

// FuzzDecodeFlat holds decodeFlat to strictjson.UnmarshalChecked: whatever
// it reads, UnmarshalChecked accepts and reads alike, into structs filled
// beforehand; whatever it declines, it leaves untouched.
func FuzzDecodeFlat(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"route_item","arguments":{"step":"post_tms"}}}`,
		`{"name":"t","arguments":{"a":[1,2,{"b":null}]},"_meta":{"k":"v"},"task":{"ttl":1}}`,
		`{"jsonrpc":"2.0","id":"\u00e9","method":"x"}`,
		`{"jsonrpc":"2.0","id":1,"method":"x","method":"y"}`,
		`{"name":"t","Name":"u"}`,
		`{"name":"t","arguments":null}`,
		`{"step":"post_tms","item":"B-1"}`,
		`{"queue":"bills","step":"post_tms","item":"B-\u0031","features":{"weight":1.50, "carrier":"x"}}`,
		`{"step":"post_tms","item":7}`,
		`{"step":"post_tms","features":null}`,
		`{}`, ` {} `, `null`, `[]`, `{"id":1e400}`,
		"{\"name\":\"\xed\xa0\x80\"}",
		"{\"name\":\"a\u2028b\"}",
		`{"step":"post_tms","item":"M\u00fcller \"7\" INV\/2026 \ud83d\ude00 \b\f\r"}`,
		`{"name":"\ud800","arguments":{}}`, `{"name":"\ud800\udc00x\udc00"}`, `{"item":"\ud83d\u0041"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkFlat(t, data, prefilledEnvelope, envelopeFields, sameEnvelope)
		checkFlat(t, data, prefilledCallParams, callParamsFields, sameCallParams)
		checkFlat(t, data, prefilledRouteRequest, routeRequestFields, sameRouteRequest)
	})
}

// checkFlat is FuzzDecodeFlat's check for one struct type T: decodeFlat
// into a prefilled T either reads what UnmarshalChecked reads into another
// or declines and leaves it as it was.
func checkFlat[T any](t *testing.T, data []byte, prefilled func() T, fields func(*T) []flatField, same func(a, b T) bool) {
	t.Helper()
	v := prefilled()
	if !decodeFlat(data, fields(&v)) {
		if !same(v, prefilled()) {
			t.Fatalf("decodeFlat declined %q but changed %T to %+v", data, v, v)
		}
		return
	}
	ref := prefilled()
	if err := strictjson.UnmarshalChecked(data, &ref); err != nil {
		t.Fatalf("decodeFlat read %q as %+v; UnmarshalChecked refuses it: %v", data, v, err)
	}
	if !same(v, ref) {
		t.Fatalf("%q: decodeFlat read %+v, UnmarshalChecked %+v", data, v, ref)
	}
}

// TestFlatFieldsFollowTags: the flat field lists name each field of the
// structs they fill as its json tag does, and every field that is read, so
// a field added or renamed in envelope, CallParams or RouteRequest without its list
// fails here rather than sending every request to the slow path or
// reading a member into the wrong place.
func TestFlatFieldsFollowTags(t *testing.T) {
	var env envelope
	var cp mcpwire.CallParams
	var rr ladder.RouteRequest
	for _, c := range []struct {
		v      any
		fields []flatField
	}{{&env, envelopeFields(&env)}, {&cp, callParamsFields(&cp)}, {&rr, routeRequestFields(&rr)}} {
		rv := reflect.ValueOf(c.v).Elem()
		var want []string
		for i := range rv.NumField() {
			f := rv.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			want = append(want, name)
			var at any
			for _, ff := range c.fields {
				if ff.name == name {
					if ff.str != nil {
						at = ff.str
					} else {
						at = ff.raw
					}
				}
			}
			if at != rv.Field(i).Addr().Interface() {
				t.Errorf("%s: the flat member %q does not fill field %s", rv.Type(), name, f.Name)
			}
		}
		if len(want) != len(c.fields) {
			t.Errorf("%s: json members %v, flat fields %d", rv.Type(), want, len(c.fields))
		}
	}
}

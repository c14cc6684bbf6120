package strictjson

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// fastTarget is a type for the differential test of matchFast: nested
// structs, a pointer, an embedded struct, a slice, a map and a raw value.
type fastTarget struct {
	fastEmbedded
	Name  string            `json:"name"`
	Inner *fastTarget       `json:"inner,omitempty"`
	List  []fastEmbedded    `json:"list"`
	Map   map[string]fastKV `json:"map"`
	Raw   json.RawMessage   `json:"raw"`
	Any   any               `json:"any"`
	Skip  string            `json:"-"`
}

type fastEmbedded struct {
	ID int `json:"id"`
}

type fastKV struct {
	K string `json:"k"`
}

var fastSeeds = []string{
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"route_item","arguments":{"step":"post_tms","item":"BENCH-1"}}}`,
	`{"id":1,"name":"x","inner":{"id":2,"list":[{"id":3}]},"map":{"a":{"k":"v"}},"raw":{"Any":1},"any":[1,{"X":2}]}`,
	`{"name":"x","Name":"y"}`, `{"nAme":1}`, `{"unknown":1}`, `{"inner":{"bad":1}}`, `{"list":[{"id":1,"x":2}]}`,
	`{"map":{"a":{"K":1}}}`, `{"map":{"\u0041":{"k":1}}}`, `{"name":"\ud800"}`, `{"name":"\ud83d\ude00"}`,
	`{"a":1,"a":2}`, `{"a":1e400}`, `{"a":1e4}`, `{"na\u006de":1}`, `{"id":"x"}`, `{"inner":"x"}`, `[1,2]`, `null`,
	`{"a":1} x`, `{"a":tru}`, "{\"a\":\"\xff\"}", `{"a\u0000":1}`, `{"K":1,"\u212a":2}`, `{"s":1,"ſ":2}`,
	`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`,
	`{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":0,"k11":1,"k12":2,"k13":3,"k14":4,"k15":5,"k16":6,"k17":7,"k18":8,"k19":9,"k20":0,"k21":1,"k22":2,"k23":3,"k24":4,"k25":5,"k26":6,"k27":7,"k28":8,"k29":9,"k30":0,"k31":1,"k32":2}`,
}

// TestFastPathsMatchReference: the fast check accepts only what Check's
// reference walk accepts, the fast key match only what matchType passes,
// and both answer for the common request.
func TestFastPathsMatchReference(t *testing.T) {
	for i, s := range fastSeeds {
		fastCheck, fastMatch := differential(t, []byte(s))
		if i == 0 && !fastCheck {
			t.Errorf("checkFast refused the common request %s", s)
		}
		if i == 1 && !fastMatch {
			t.Errorf("matchFast refused %s", s)
		}
	}
	if fastCheck, _ := differential(t, []byte(strings.Repeat("[", MaxDepth+1)+strings.Repeat("]", MaxDepth+1))); fastCheck {
		t.Error("checkFast accepted nesting deeper than MaxDepth")
	}
}

// differential runs both paths on data and fails when the fast one says
// yes and the reference one no.
func differential(t *testing.T, data []byte) (fastCheck, fastMatch bool) {
	t.Helper()
	if checkFast(data) {
		fastCheck = true
		if _, err := check(data, ""); err != nil {
			t.Fatalf("checkFast accepted %q; Check refuses it: %v", data, err)
		}
	}
	// UnmarshalChecked trusts its caller that data is well-formed, so
	// matchFast may meet anything: it must not fail on it, only be right
	// about well-formed data.
	if matchFast(data, reflect.TypeOf(&fastTarget{})) && json.Valid(data) {
		fastMatch = true
		if err := matchReference(data, &fastTarget{}); err != nil {
			t.Fatalf("matchFast passed %q; matchType refuses it: %v", data, err)
		}
	}
	return fastCheck, fastMatch
}

func FuzzFastPaths(f *testing.F) {
	for _, s := range fastSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { differential(t, data) })
}

// shadowFirst and shadowLast declare a JSON name twice, once through an
// embedded struct, in both orders; structFields keeps the later one.
type shadowFirst struct {
	fastEmbedded
	ID  string  `json:"id"`
	Ptr *fastKV `json:"ptr"`
}

type shadowLast struct {
	ID string `json:"id"`
	*fastEmbedded
	Plain  int
	Ignore int `json:"-"`
	fastKV
}

// TestFieldTypeIsStructFields: fieldType answers every name as the map
// structFields builds does, and refuses every name the map lacks.
func TestFieldTypeIsStructFields(t *testing.T) {
	for _, typ := range []reflect.Type{reflect.TypeOf(fastTarget{}), reflect.TypeOf(shadowFirst{}), reflect.TypeOf(shadowLast{}), reflect.TypeOf(fastKV{})} {
		fields := structFields(typ)
		for _, name := range []string{"id", "name", "inner", "list", "map", "raw", "any", "Skip", "-", "ptr", "Plain", "plain", "Ignore", "k", "K", "ID", ""} {
			want, wok := fields[name]
			got, ok := fieldType(typ, []byte(name))
			if ok != wok || got != want {
				t.Errorf("%v: fieldType(%q) = %v, %v; structFields has %v, %v", typ, name, got, ok, want, wok)
			}
		}
	}
}

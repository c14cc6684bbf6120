package gate

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func flatTestSchema() map[string]any {
	return map[string]any{
		"type":                 "object",
		"additionalProperties": false,
		"required":             []any{"b"},
		"properties": map[string]any{
			"b":    map[string]any{"type": "boolean", "description": "A flag."},
			"n":    map[string]any{"type": "number", "description": "A number.", "default": 0.5},
			"i":    map[string]any{"type": "integer", "description": "A count."},
			"s":    map[string]any{"type": "string", "description": "A text."},
			"a":    map[string]any{"type": "array", "description": "A list."},
			"o":    map[string]any{"type": "object", "description": "A map."},
			"sn":   map[string]any{"type": []any{"string", "null"}, "description": "Text or null."},
			"null": map[string]any{"type": "null", "description": "Always null."},
		},
	}
}

// TestFlatMatchesGeneral checks that the flat fast path and the general
// validator (jsonschema-go) agree, verdict and field, on random evidence.
func TestFlatMatchesGeneral(t *testing.T) {
	schema := flatTestSchema()
	var f compiledFn
	if err := f.compileSchema(schema); err != nil {
		t.Fatal(err)
	}
	if f.flat == nil {
		t.Fatal("compileFlat rejected a flat schema")
	}
	flat := f.flat
	values := []any{nil, true, false, 0.0, 1.0, 2.5, -3.0, 7, int64(8), "x", "", []any{1.0}, []string{"a"}, map[string]any{"k": 1.0}}
	keys := []string{"b", "n", "i", "s", "a", "o", "sn", "null", "extra"}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 5000 {
		ev := map[string]any{}
		for _, k := range keys {
			if rng.IntN(3) == 0 {
				ev[k] = values[rng.IntN(len(values))]
			}
		}
		f.flat = flat
		gotFlat := f.validate(ev)
		f.flat = nil
		gotGeneral := f.validate(ev)
		if (gotFlat == nil) != (gotGeneral == nil) {
			t.Fatalf("evidence %v: flat says %v, general says %v", ev, gotFlat, gotGeneral)
		}
		if gotFlat != nil && gotFlat.(*EvidenceError).Field != gotGeneral.(*EvidenceError).Field {
			t.Fatalf("evidence %v: flat names %v, general names %v", ev, gotFlat, gotGeneral)
		}
	}
}

func TestCompileFlat(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(s map[string]any)
		flat   bool
	}{
		{"flat", func(map[string]any) {}, true},
		{"additionalProperties schema", func(s map[string]any) { s["additionalProperties"] = map[string]any{"type": "string"} }, false},
		{"minimum on a property", func(s map[string]any) { s["properties"].(map[string]any)["n"].(map[string]any)["minimum"] = 0.0 }, false},
		{"allOf at the root", func(s map[string]any) { s["allOf"] = []any{} }, false},
		{"unknown type name", func(s map[string]any) { s["properties"].(map[string]any)["s"].(map[string]any)["type"] = "text" }, false},
	}
	for _, tt := range tests {
		s := flatTestSchema()
		tt.mutate(s)
		if got := compileFlat(s) != nil; got != tt.flat {
			t.Errorf("%s: compileFlat != nil is %v, want %v", tt.name, got, tt.flat)
		}
	}
}

// TestGeneralPathNamesField covers schemas outside the flat subset, which the
// general validator checks.
func TestGeneralPathNamesField(t *testing.T) {
	schema := map[string]any{
		"type":     "object",
		"required": []any{"share"},
		"properties": map[string]any{
			"share":  map[string]any{"type": "number", "minimum": 0.0, "maximum": 1.0, "description": "A share in [0,1]."},
			"status": map[string]any{"type": "string", "enum": []any{"open", "closed"}, "description": "The status."},
			"tags": map[string]any{"type": "array", "description": "Tags.", "items": map[string]any{
				"type": "object", "description": "A tag.",
				"properties": map[string]any{"k": map[string]any{"type": "string", "description": "The key."}},
			}},
		},
	}
	var f compiledFn
	if err := f.compileSchema(schema); err != nil {
		t.Fatal(err)
	}
	if f.flat != nil {
		t.Fatal("schema with minimum and enum took the flat path")
	}
	tests := []struct {
		ev   map[string]any
		want *EvidenceError // Problem is a substring
	}{
		{map[string]any{"share": 0.5, "status": "open"}, nil},
		{map[string]any{"status": "open"}, &EvidenceError{Field: "share", Problem: "required"}},
		{map[string]any{"share": 1.5}, &EvidenceError{Field: "share", Problem: "maximum"}},
		{map[string]any{"share": 0.5, "status": "pending"}, &EvidenceError{Field: "status", Problem: "enum"}},
		{map[string]any{"share": 0.5, "tags": []any{map[string]any{"k": 3.0}}}, &EvidenceError{Field: "tags", Problem: "type"}},
	}
	for _, tt := range tests {
		err := f.validate(tt.ev)
		if tt.want == nil {
			if err != nil {
				t.Errorf("validate(%v) = %v, want nil", tt.ev, err)
			}
			continue
		}
		var ee *EvidenceError
		if !errors.As(err, &ee) || ee.Field != tt.want.Field || !strings.Contains(ee.Problem, tt.want.Problem) {
			t.Errorf("validate(%v) = %v, want field %q, problem containing %q", tt.ev, err, tt.want.Field, tt.want.Problem)
		}
		if strings.Contains(fmt.Sprint(err), "validating ") {
			t.Errorf("validate(%v) = %v leaks schema paths", tt.ev, err)
		}
	}
}

// TestCostLimit checks that an expression iterating over evidence is cut off
// and fails closed, while a bounded one runs without the limit.
func TestCostLimit(t *testing.T) {
	c := Case{ID: "cost", Commits: []Commit{{ID: "c", Name: "commit", Fn: &Function{
		Name: "quadratic",
		Evidence: map[string]any{"type": "object", "properties": map[string]any{
			"items": map[string]any{"type": "array", "description": "Numbers."},
		}},
		R:  "evidence.items.exists(x, evidence.items.exists(y, y < 0.0)) ? 0.0 : 1.0",
		C:  "1.0",
		O:  "1.0",
		Ro: "1.0",
	}}}}
	g, err := Compile([]Case{c})
	if err != nil {
		t.Fatal(err)
	}
	items := make([]any, 1000)
	for i := range items {
		items[i] = float64(i)
	}
	d, err := g.Authorize("cost", "quadratic", map[string]any{"items": items})
	if err != nil {
		t.Fatal(err)
	}
	want := Decision{GateState: StateBypassToHuman, ReasonCode: ReasonEvaluatorFault}
	got := Decision{GateState: d.GateState, ReasonCode: d.ReasonCode}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("decision (-want +got):\n%s", diff)
	}
	if !strings.Contains(d.HumanReadable, "cost limit") {
		t.Errorf("HumanReadable = %q, want it to mention the cost limit", d.HumanReadable)
	}
	d, err = g.Authorize("cost", "quadratic", map[string]any{"items": items[:10]})
	if err != nil || d.GateState != StatePass {
		t.Errorf("small list: %v, %v; want PASS", d.GateState, err)
	}
}

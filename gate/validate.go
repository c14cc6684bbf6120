package gate

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strings"
)

// validate checks evidence against the function's schema and, on failure,
// returns an *EvidenceError naming the field at fault.
func (f *compiledFn) validate(ev map[string]any) error {
	if f.flat != nil {
		if ee := f.flat.check(ev); ee != nil {
			return ee
		}
		return nil
	}
	err := f.schema.Validate(ev)
	if err == nil {
		return nil
	}
	// The validator reports a schema path in prose; find the field by
	// checking the pieces one at a time instead of parsing it.
	for _, name := range f.required {
		if _, ok := ev[name]; !ok {
			return &EvidenceError{Field: name, Problem: problemMissing}
		}
	}
	names := make([]string, 0, len(ev))
	for name := range ev {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		ps, declared := f.props[name]
		if !declared {
			if f.closed {
				return &EvidenceError{Field: name, Problem: problemUndeclared}
			}
			continue
		}
		if perr := ps.Validate(ev[name]); perr != nil {
			return &EvidenceError{Field: name, Problem: cleanSchemaErr(perr)}
		}
	}
	return &EvidenceError{Problem: cleanSchemaErr(err)}
}

const (
	problemMissing    = "is required but missing; {{gate_functions}} shows its type and description"
	problemUndeclared = "is not declared in the evidence schema"
)

// cleanSchemaErr drops the validator's "validating <schema path>: " prefixes,
// which name schema locations the caller never sees.
func cleanSchemaErr(err error) string {
	msg := err.Error()
	for strings.HasPrefix(msg, "validating ") {
		i := strings.Index(msg, ": ")
		if i < 0 {
			break
		}
		msg = msg[i+2:]
	}
	return msg
}

// flatSchema validates the schema shape most evidence uses — an object of
// typed top-level properties, some required, perhaps closed — without the
// general validator, whose reflection cost about a third of an authorize
// call. compileFlat builds one only when the schema uses nothing else that
// affects validation, so both give the same verdict (a test checks that).
type flatSchema struct {
	types    map[string][]string // property → the JSON types it may take
	required []string
	closed   bool
}

// Keywords that do not change what validates (annotations), per level.
var (
	flatRootKeys = []string{"type", "properties", "required", "additionalProperties", "description", "title", "$schema", "$comment", "examples"}
	flatPropKeys = []string{"type", "description", "default", "title", "examples", "deprecated", "readOnly", "writeOnly", "$comment"}
	jsonTypes    = []string{"null", "boolean", "object", "array", "number", "string", "integer"}
)

// compileFlat returns a flatSchema for schema, or nil when schema uses more
// than the flat subset.
func compileFlat(schema map[string]any) *flatSchema {
	for k := range schema {
		if !slices.Contains(flatRootKeys, k) {
			return nil
		}
	}
	fs := &flatSchema{types: map[string][]string{}}
	switch ap := schema["additionalProperties"].(type) {
	case nil:
	case bool:
		fs.closed = !ap
	default:
		return nil
	}
	switch req := schema["required"].(type) {
	case nil:
	case []any:
		for _, r := range req {
			name, ok := r.(string)
			if !ok {
				return nil
			}
			fs.required = append(fs.required, name)
		}
	case []string:
		fs.required = slices.Clone(req)
	default:
		return nil
	}
	props, _ := schema["properties"].(map[string]any)
	for name, p := range props {
		pm, ok := p.(map[string]any)
		if !ok {
			return nil
		}
		for k := range pm {
			if !slices.Contains(flatPropKeys, k) {
				return nil
			}
		}
		var types []string
		switch t := pm["type"].(type) {
		case string:
			types = []string{t}
		case []any:
			for _, x := range t {
				s, ok := x.(string)
				if !ok {
					return nil
				}
				types = append(types, s)
			}
		default:
			return nil
		}
		for _, t := range types {
			if !slices.Contains(jsonTypes, t) {
				return nil
			}
		}
		fs.types[name] = types
	}
	return fs
}

// check validates ev, in the same order as the general path: required
// fields, then fields in name order, so both name the same field.
func (fs *flatSchema) check(ev map[string]any) *EvidenceError {
	for _, name := range fs.required {
		if _, ok := ev[name]; !ok {
			return &EvidenceError{Field: name, Problem: problemMissing}
		}
	}
	var bad []string // collected only on failure, then sorted
	for name, v := range ev {
		types, declared := fs.types[name]
		if !declared {
			if fs.closed {
				bad = append(bad, name)
			}
			continue
		}
		if !typeMatches(v, types) {
			bad = append(bad, name)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	sort.Strings(bad)
	name := bad[0]
	types, declared := fs.types[name]
	if !declared {
		return &EvidenceError{Field: name, Problem: problemUndeclared}
	}
	want := fmt.Sprintf("%q", types[0])
	if len(types) > 1 {
		want = "one of " + fmt.Sprintf("%q", types)
	}
	return &EvidenceError{Field: name, Problem: fmt.Sprintf("type: %v has type %q, want %s", ev[name], jsonTypeOf(ev[name]), want)}
}

func typeMatches(v any, types []string) bool {
	got := jsonTypeOf(v)
	for _, t := range types {
		if t == got || t == "number" && got == "integer" {
			return true
		}
	}
	return false
}

// jsonTypeOf names the JSON type of a decoded value; integral numbers are
// "integer", as JSON Schema counts them.
func jsonTypeOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	if x, ok := toFloat(v); ok {
		if x == math.Trunc(x) && !math.IsInf(x, 0) {
			return "integer"
		}
		return "number"
	}
	// Go callers may pass typed slices and maps; judge them by kind, as the
	// general validator does.
	switch reflect.ValueOf(v).Kind() {
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.Map:
		return "object"
	}
	return "unknown"
}

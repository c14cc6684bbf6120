// Package strictjson decodes JSON the way ladder's surfaces must: it rejects
// duplicate keys, keys that differ only in case from a known field (the
// smuggling class fixed in go-sdk, GHSA-q382-vc8q-7jhj), keys with NUL or
// invalid UTF-8, unknown fields, and nesting deeper than MaxDepth, each with
// an error that names the key and says what to do. encoding/json alone
// matches field names case-insensitively and keeps the last duplicate,
// which would let one caller's view of a request differ from another's.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"
)

// MaxDepth is the deepest nesting of objects and arrays accepted.
const MaxDepth = 64

// Error is a decoding error with the JSON path of the offending key.
type Error struct {
	Path    string // e.g. "features.weight"; "" for the whole body
	Problem string
}

func (e *Error) Error() string {
	if e.Path == "" {
		return e.Problem
	}
	return fmt.Sprintf("%s: %s", e.Path, e.Problem)
}

// Check validates data without a target type: well-formed, one value,
// no duplicate keys, no NUL or invalid UTF-8 in keys, depth ≤ MaxDepth.
func Check(data []byte) error {
	if !utf8.Valid(data) {
		return &Error{Problem: "body is not valid UTF-8"}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := walk(dec, "", 0); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return &Error{Problem: "unexpected data after the JSON value; send exactly one JSON value"}
	}
	return nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func walk(dec *json.Decoder, path string, depth int) error {
	tok, err := dec.Token()
	if err != nil {
		if err == io.EOF {
			return &Error{Path: path, Problem: "unexpected end of JSON"}
		}
		return &Error{Path: path, Problem: "malformed JSON: " + err.Error()}
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	if depth+1 > MaxDepth {
		return &Error{Path: path, Problem: fmt.Sprintf("nesting deeper than %d levels; flatten the value", MaxDepth)}
	}
	switch d {
	case '{':
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return &Error{Path: path, Problem: "malformed JSON: " + err.Error()}
			}
			key, _ := kt.(string)
			if strings.ContainsRune(key, 0) {
				return &Error{Path: path, Problem: fmt.Sprintf("key %q contains a NUL character; remove it", key)}
			}
			if !utf8.ValidString(key) || strings.ContainsRune(key, utf8.RuneError) {
				return &Error{Path: path, Problem: fmt.Sprintf("key %q is not valid UTF-8", key)}
			}
			if seen[key] {
				return &Error{Path: join(path, key), Problem: "duplicate key; send each key once"}
			}
			seen[key] = true
			if err := walk(dec, join(path, key), depth+1); err != nil {
				return err
			}
		}
		_, err = dec.Token() // '}'
	case '[':
		for i := 0; dec.More(); i++ {
			if err := walk(dec, fmt.Sprintf("%s[%d]", path, i), depth+1); err != nil {
				return err
			}
		}
		_, err = dec.Token() // ']'
	}
	if err != nil {
		return &Error{Path: path, Problem: "malformed JSON: " + err.Error()}
	}
	return nil
}

// Unmarshal checks data (see Check), then checks every object key against
// the fields of v's type exactly (case-sensitive, unknown fields refused),
// then decodes into v.
func Unmarshal(data []byte, v any) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return &Error{Problem: "empty body; send a JSON object"}
	}
	if err := Check(data); err != nil {
		return err
	}
	return UnmarshalChecked(data, v)
}

// UnmarshalChecked is Unmarshal for data that already passed Check (or is
// part of a document that did): it skips the token walk, which a request
// would otherwise pay once per layer that reads it.
func UnmarshalChecked(data []byte, v any) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return &Error{Problem: "empty body; send a JSON object"}
	}
	var generic any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&generic); err != nil {
		return &Error{Problem: "malformed JSON: " + err.Error()}
	}
	if err := matchType(generic, reflect.TypeOf(v), ""); err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return &Error{Path: te.Field, Problem: fmt.Sprintf("expected %s, got %s", te.Type, te.Value)}
		}
		return &Error{Problem: err.Error()}
	}
	return nil
}

var rawMessageType = reflect.TypeOf(json.RawMessage(nil))

func matchType(val any, t reflect.Type, path string) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t == rawMessageType {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := val.(map[string]any)
		if !ok {
			return nil // type mismatch is reported by json.Unmarshal
		}
		fields := structFields(t)
		// Keys in sorted order, so a body with two faults names the same
		// one every time.
		for _, key := range slices.Sorted(maps.Keys(obj)) {
			sub := obj[key]
			ft, ok := fields[key]
			if !ok {
				names := make([]string, 0, len(fields))
				for n := range fields {
					if strings.EqualFold(n, key) {
						return &Error{Path: join(path, key), Problem: fmt.Sprintf("key differs only in case from %q; field names are case-sensitive", n)}
					}
					names = append(names, n)
				}
				sort.Strings(names)
				return &Error{Path: join(path, key), Problem: fmt.Sprintf("unknown field; expected one of %s", strings.Join(names, ", "))}
			}
			if err := matchType(sub, ft, join(path, key)); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		arr, ok := val.([]any)
		if !ok {
			return nil
		}
		for i, sub := range arr {
			if err := matchType(sub, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case reflect.Map:
		obj, ok := val.(map[string]any)
		if !ok {
			return nil
		}
		for _, key := range slices.Sorted(maps.Keys(obj)) {
			if err := matchType(obj[key], t.Elem(), join(path, key)); err != nil {
				return err
			}
		}
	}
	return nil
}

// structFields maps the JSON names of t's exported fields (following
// embedded structs) to their types.
func structFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range structFields(ft) {
					out[k] = v
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

// Package strictjson decodes JSON the way ladder's surfaces must: it rejects
// duplicate keys and keys equal under Unicode case folding in the same
// object (at every depth: a payload's "bill_id" and "Bill_id" are refused as
// surely as an envelope's), keys that differ only in case from a known field
// (the smuggling class fixed in go-sdk, GHSA-q382-vc8q-7jhj), keys with NUL or
// invalid UTF-8, strings and keys with an unpaired UTF-16 surrogate escape,
// unknown fields, numbers outside the range of a 64-bit float, and nesting
// deeper than MaxDepth, each with an error that names the path and says
// what to do. encoding/json alone matches field names
// case-insensitively and keeps the last duplicate, and readers in other
// languages fold or pick differently, which would let one reader's view of a
// request differ from another's.
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
	"strconv"
	"strings"
	"sync"
	"unicode"
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

// Check validates data without a target type: well-formed, one value, no
// two keys of one object equal or equal under case folding, no NUL or
// invalid UTF-8 in keys, no unpaired surrogate escape in any string or key,
// every number within the range of a float64, depth ≤ MaxDepth.
func Check(data []byte) error {
	if checkFast(data) {
		return nil
	}
	_, err := check(data, "")
	return err
}

// CheckHolding is Check for a document one value of which its caller checks
// apart, so that a fault inside that value can be told from a fault in the
// rest: the value at path hold (in Error.Path notation, e.g.
// "params.arguments") is only required to be well-formed, and is returned as
// it is (nil when absent). Everything else is checked as Check does.
func CheckHolding(data []byte, hold string) (json.RawMessage, error) {
	return check(data, hold)
}

func check(data []byte, hold string) (json.RawMessage, error) {
	if !utf8.Valid(data) {
		return nil, &Error{Problem: "body is not valid UTF-8"}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	w := walker{data: data, dec: dec, hold: hold}
	if err := w.walk("", 0); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &Error{Problem: "unexpected data after the JSON value; send exactly one JSON value"}
	}
	return w.held, nil
}

// FoldKey returns the form under which two object keys are one key to
// Check: a and b collide exactly when FoldKey(a) == FoldKey(b), which is
// when strings.EqualFold(a, b). Code that merges keys from two objects into
// one uses it to refuse what Check would refuse in a single object.
func FoldKey(s string) string {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			return foldUnicode(s)
		}
		if 'A' <= c && c <= 'Z' {
			return foldUnicode(s)
		}
	}
	return s // the common key: lower-case ASCII, no allocation
}

// foldUnicode maps each rune to one representative of its simple case
// folding orbit, the class strings.EqualFold compares by (so "K", "k" and
// the Kelvin sign fold alike, as do "s" and "ſ"): the orbit's smallest rune,
// or its lower case when that is in the orbit too, which keeps lower-case
// ASCII as it is, as FoldKey's shortcut assumes. (unicode.ToLower alone
// would not do: it maps "İ" to "i", which EqualFold tells apart.)
func foldUnicode(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		m := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			m = min(m, f)
		}
		rep := m
		if l := unicode.ToLower(m); l != m {
			for f := unicode.SimpleFold(m); f != m; f = unicode.SimpleFold(f) {
				if f == l {
					rep = l
					break
				}
			}
		}
		b.WriteRune(rep)
	}
	return b.String()
}

func join(path, key string) string {
	if key == "" {
		// An empty key, told apart from the object that holds it ("a."
		// would read as a, and at the top as the whole body).
		return path + `[""]`
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

// walker is one pass of Check over a document.
type walker struct {
	data []byte // the document, to see a string token as it was sent
	dec  *json.Decoder
	hold string          // path of the value to pass over, "" for none
	held json.RawMessage // that value, once passed
}

func (w *walker) walk(path string, depth int) error {
	if w.hold != "" && path == w.hold {
		var raw json.RawMessage
		if err := w.dec.Decode(&raw); err != nil {
			return &Error{Path: path, Problem: "malformed JSON: " + err.Error()}
		}
		w.held = raw
		return nil
	}
	dec := w.dec
	start := dec.InputOffset()
	tok, err := dec.Token()
	if err != nil {
		if err == io.EOF {
			return &Error{Path: path, Problem: "unexpected end of JSON"}
		}
		return &Error{Path: path, Problem: "malformed JSON: " + err.Error()}
	}
	d, ok := tok.(json.Delim)
	if !ok {
		switch v := tok.(type) {
		case json.Number:
			return checkNumber(path, v)
		case string:
			if esc, lone := w.loneSurrogate(v, start); lone {
				return &Error{Path: path, Problem: fmt.Sprintf(`the string holds an unpaired UTF-16 surrogate escape (\u%s), which JSON readers turn into U+FFFD; escape a character outside the BMP as its surrogate pair, or send it as UTF-8`, esc)}
			}
		}
		return nil
	}
	if depth+1 > MaxDepth {
		return &Error{Path: path, Problem: fmt.Sprintf("nesting deeper than %d levels; flatten the value", MaxDepth)}
	}
	switch d {
	case '{':
		// Folded key → the key as sent, to name both in a refusal.
		seen := map[string]string{}
		for dec.More() {
			kstart := dec.InputOffset()
			kt, err := dec.Token()
			if err != nil {
				return &Error{Path: path, Problem: "malformed JSON: " + err.Error()}
			}
			key, _ := kt.(string)
			if esc, lone := w.loneSurrogate(key, kstart); lone {
				return &Error{Path: path, Problem: fmt.Sprintf(`key %s holds an unpaired UTF-16 surrogate escape (\u%s), which JSON readers turn into U+FFFD; send the key as documented`, shownKey(w.data[kstart:dec.InputOffset()]), esc)}
			}
			if strings.ContainsRune(key, 0) {
				return &Error{Path: path, Problem: fmt.Sprintf("key %q contains a NUL character; remove it", key)}
			}
			if !utf8.ValidString(key) || strings.ContainsRune(key, utf8.RuneError) {
				return &Error{Path: path, Problem: fmt.Sprintf("key %q is not valid UTF-8", key)}
			}
			folded := FoldKey(key)
			if other, dup := seen[folded]; dup {
				if other == key {
					return &Error{Path: join(path, key), Problem: "duplicate key; send each key once"}
				}
				// Readers disagree on which of the two a field is (Go's
				// structs take either, maps keep both, other languages
				// fold), so neither is safe to act on.
				return &Error{Path: join(path, key), Problem: fmt.Sprintf("key differs only in case from %q in the same object; send one key, spelled as documented", other)}
			}
			seen[folded] = key
			if err := w.walk(join(path, key), depth+1); err != nil {
				return err
			}
		}
		_, err = dec.Token() // '}'
	case '[':
		for i := 0; dec.More(); i++ {
			if err := w.walk(fmt.Sprintf("%s[%d]", path, i), depth+1); err != nil {
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

// loneSurrogate reports the first unpaired surrogate escape in the string
// token s was decoded from, which starts at or after offset start (after
// the separator and space before it). encoding/json decodes "\ud800" and
// "\ufffd" alike, so two requests that differ would read the same in a
// handler and in the log; only a decoded string holding U+FFFD can hide
// one, so the common string costs one scan of its decoded form.
func (w *walker) loneSurrogate(s string, start int64) (string, bool) {
	if !strings.ContainsRune(s, utf8.RuneError) {
		return "", false
	}
	return LoneSurrogate(w.data[start:w.dec.InputOffset()])
}

// LoneSurrogate returns the hex digits of the first \u escape of a UTF-16
// surrogate without its pair in raw, JSON text holding string tokens (a
// token with its quotes, or a whole document), and whether there is one.
// A high surrogate is paired only by a low one escaped right after it.
func LoneSurrogate(raw []byte) (string, bool) {
	hex := func(i int) (rune, bool) {
		if i+6 > len(raw) || raw[i] != '\\' || raw[i+1] != 'u' {
			return 0, false
		}
		var r rune // by hand: a string of a million escapes allocates nothing
		for _, c := range raw[i+2 : i+6] {
			switch {
			case '0' <= c && c <= '9':
				r = r<<4 | rune(c-'0')
			case 'a' <= c && c <= 'f':
				r = r<<4 | rune(c-'a'+10)
			case 'A' <= c && c <= 'F':
				r = r<<4 | rune(c-'A'+10)
			default:
				return 0, false
			}
		}
		return r, true
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		r, ok := hex(i)
		if !ok {
			i++ // a two-character escape: skip its second byte
			continue
		}
		switch {
		case 0xD800 <= r && r < 0xDC00:
			if lo, ok := hex(i + 6); ok && 0xDC00 <= lo && lo < 0xE000 {
				i += 11 // the pair
				continue
			}
			return string(raw[i+2 : i+6]), true
		case 0xDC00 <= r && r < 0xE000:
			return string(raw[i+2 : i+6]), true
		}
		i += 5
	}
	return "", false
}

// shownKey is a key token as it was sent, trimmed of the separator and
// space around it and shortened for an error message.
func shownKey(tok []byte) string {
	s := strings.TrimLeft(string(tok), " \t\r\n,")
	if r := []rune(s); len(r) > 48 {
		s = string(r[:32]) + "…" + string(r[len(r)-8:])
	}
	return s
}

// checkNumber refuses a number a float64 cannot hold: encoding/json fails
// on it deep inside a decode (with a message about the Go type, or as "not
// an object" one layer up), and json.Number would carry it on to a reader
// that takes it as infinity. A number too small to tell from zero is kept:
// it reads as 0 or a subnormal everywhere.
func checkNumber(path string, n json.Number) error {
	s := string(n)
	// Without an exponent, fewer than 309 characters cannot reach 1e308.
	if len(s) < 309 && !strings.ContainsAny(s, "eE") {
		return nil
	}
	if _, err := strconv.ParseFloat(s, 64); err == nil || !errors.Is(err, strconv.ErrRange) {
		return nil
	}
	shown := s
	if len(shown) > 32 {
		shown = shown[:16] + "…" + shown[len(shown)-8:]
	}
	return &Error{Path: path, Problem: fmt.Sprintf("%s is outside the range of a 64-bit float; send a finite number", shown)}
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
// part of a document that did): it skips the token walk, and the grammar
// check before the key check, which a request would otherwise pay once per
// layer that reads it. (Data that is not well-formed after all is still
// refused, by json.Unmarshal.)
func UnmarshalChecked(data []byte, v any) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return &Error{Problem: "empty body; send a JSON object"}
	}
	if !matchFast(data, reflect.TypeOf(v)) {
		if err := matchReference(data, v); err != nil {
			return err
		}
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

// matchReference is UnmarshalChecked's key check through a decode into Go
// values, for what matchFast does not handle; it words the refusals.
func matchReference(data []byte, v any) error {
	var generic any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&generic); err != nil {
		return &Error{Problem: "malformed JSON: " + err.Error()}
	}
	return matchType(generic, reflect.TypeOf(v), "")
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

// fieldType is structFields(t)[name] without building the map: the type
// of the field of t whose JSON name is name (the last one, following
// embedded structs, as the map keeps). The fast path looks up every key of
// every object this way; a struct has a handful of fields, so a walk of
// its cached list is cheaper than a map.
func fieldType(t reflect.Type, name []byte) (reflect.Type, bool) {
	fs := fieldsOf(t)
	for i := len(fs) - 1; i >= 0; i-- {
		if fs[i].name == string(name) {
			return fs[i].typ, true
		}
	}
	return nil, false
}

// field is one JSON field of a struct: its name and its Go type.
type field struct {
	name string
	typ  reflect.Type
}

// fieldCache holds fieldsOf's answer per struct type. Reading a type's
// fields by reflection (Field, its tag's Lookup) cost more than the rest
// of the fast path's check of a request; the types are the program's own,
// so the cache stays as small as the set of request types.
var fieldCache sync.Map // reflect.Type → []field

// fieldsOf lists t's JSON fields in eachField's order, once per type.
func fieldsOf(t reflect.Type) []field {
	if fs, ok := fieldCache.Load(t); ok {
		return fs.([]field)
	}
	fs := []field{}
	eachField(t, func(n string, ft reflect.Type) { fs = append(fs, field{n, ft}) })
	got, _ := fieldCache.LoadOrStore(t, fs)
	return got.([]field)
}

// structFields maps the JSON names of t's exported fields (following
// embedded structs) to their types.
func structFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	eachField(t, func(n string, ft reflect.Type) { out[n] = ft })
	return out
}

// eachField calls fn with the JSON name and type of each of t's exported
// fields in order, the fields of an embedded struct in its place.
func eachField(t reflect.Type, fn func(name string, ft reflect.Type)) {
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
				eachField(ft, fn)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fn(name, f.Type)
	}
}

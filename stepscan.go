package ladder

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// auditStepFast is AuditStepOf without encoding/json, for the record
// ladder writes: top-level keys without escapes, and queue and step values
// that are strings without escapes, in valid UTF-8. It checks the whole
// document's grammar as encoding/json does (a document it would refuse
// names no step) and reports false for anything it does not handle (an
// escaped top-level key, an escaped or non-UTF-8 queue or step, nesting
// deeper than canonicalMaxDepth, malformed JSON), so the caller decides
// with the reference. encoding/json decodes the whole record to find two
// fields, and every audit append does this (BENCHMARKS.md, issue 22,
// session 8); FuzzAuditStepFast requires the two to agree whenever the
// fast one answers.
func auditStepFast(data []byte) (queue, step string, ok bool) {
	ok = objectMembers(data, func(key []byte, escaped bool, v, end int) bool {
		if escaped {
			return false
		}
		// encoding/json's field match: the exact name or, failing that,
		// one equal under Unicode case folding (so "Step" and "ſtep");
		// a later key overwrites an earlier one, null leaves the field
		// as it was, and a value of another type is skipped.
		var dst *string
		switch {
		case bytes.EqualFold(key, []byte("queue")):
			dst = &queue
		case bytes.EqualFold(key, []byte("step")):
			dst = &step
		}
		if dst != nil && data[v] == '"' {
			raw := data[v+1 : end-1]
			if bytes.IndexByte(raw, '\\') >= 0 || !utf8.Valid(raw) {
				return false
			}
			*dst = string(raw)
		}
		return true
	})
	if !ok {
		return "", "", false
	}
	return queue, step, true
}

// objectMembers reports whether data is one JSON object, with space around
// it or not, telling members of each of its members in order.
func objectMembers(data []byte, members memberFunc) bool {
	s := jsonScan{in: data}
	i := s.space(0)
	if i >= len(data) || data[i] != '{' {
		return false
	}
	end, ok := s.container(i, 0, '}', members)
	return ok && s.space(end) == len(data)
}

// JSONObjectMembers reports whether data is one JSON object (space around
// it allowed), checking its grammar as encoding/json does, and calls fn
// with each member in order: its key as written between the quotes
// (escaped says it holds an escape or invalid UTF-8, so it is not yet the
// name encoding/json reads) and
// its value's bytes as written. fn returning false stops the scan, which
// then reports false; so does nesting deeper than 64 levels. It lets a
// caller read the few members it needs from a document without decoding
// the rest.
func JSONObjectMembers(data []byte, fn func(key []byte, escaped bool, value []byte) bool) bool {
	return objectMembers(data, func(key []byte, escaped bool, v, end int) bool {
		return fn(key, escaped || !utf8.Valid(key), data[v:end])
	})
}

// JSONPlainString returns the JSON string v (a value JSONObjectMembers
// gave) when it holds no escape and is valid UTF-8, so that its bytes are
// the string encoding/json would read; otherwise it reports false.
func JSONPlainString(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	s := v[1 : len(v)-1]
	if bytes.IndexByte(s, '\\') >= 0 || !utf8.Valid(s) {
		return "", false
	}
	return string(s), true
}

// JSONString is JSONPlainString for a string with escapes too: it returns
// the string encoding/json reads from v, decoding each escape as it does.
// It reports false, for the caller's own decoder to decide, on invalid
// UTF-8 and on an unpaired UTF-16 surrogate escape (which encoding/json
// reads as U+FFFD and strictjson refuses). v must be a string token
// JSONObjectMembers gave, whose grammar it has checked.
func JSONString(v []byte) (string, bool) {
	if s, ok := JSONPlainString(v); ok {
		return s, true
	}
	if len(v) < 2 || v[0] != '"' || !utf8.Valid(v) {
		return "", false
	}
	in := v[1 : len(v)-1]
	var out strings.Builder // one allocation: the decoded string is never longer
	out.Grow(len(in))
	for len(in) > 0 {
		i := bytes.IndexByte(in, '\\')
		if i < 0 {
			out.Write(in)
			break
		}
		out.Write(in[:i])
		r, n := unescapeJSON(in[i:])
		if n == 0 || n == 6 && utf16.IsSurrogate(hex4(in[i:])) {
			return "", false // malformed, or a surrogate without its pair
		}
		out.WriteRune(r)
		in = in[i+n:]
	}
	return out.String(), true
}

// JSONScalar returns the Go value a json.Decoder with UseNumber reads
// into an any from v, a value JSONObjectMembers gave, when v is a scalar:
// a string (as JSONString reads it), a number (its literal, as a
// json.Number), true, false or null. It reports false for an object or an
// array, and for a string JSONString declines, for the caller's own
// decoder: a decoder costs a buffer of its own for every value it reads.
func JSONScalar(v []byte) (any, bool) {
	if len(v) == 0 {
		return nil, false
	}
	switch b := v[0]; {
	case b == '"':
		return JSONString(v)
	case b == '-' || '0' <= b && b <= '9':
		if end, ok := numberEnd(v, 0); ok && end == len(v) {
			return json.Number(v), true
		}
	case string(v) == "true":
		return true, true
	case string(v) == "false":
		return false, true
	case string(v) == "null":
		return nil, true
	}
	return nil, false
}

// jsonScan checks JSON grammar without keeping anything.
// spaced records whether any space was skipped between tokens, which
// AppendCompactJSON must then remove.
type jsonScan struct {
	in     []byte
	spaced bool
}

func (s *jsonScan) space(i int) int {
	for i < len(s.in) {
		switch s.in[i] {
		case ' ', '\t', '\n', '\r':
			i++
			s.spaced = true
		default:
			return i
		}
	}
	return i
}

// value checks the value at in[i:] and returns the index after it.
func (s *jsonScan) value(i, depth int) (int, bool) {
	if i >= len(s.in) || depth > canonicalMaxDepth {
		return i, false
	}
	switch b := s.in[i]; {
	case b == '{':
		return s.container(i, depth, '}', skipMember)
	case b == '[':
		return s.container(i, depth, ']', nil)
	case b == '"':
		end, _, ok := s.str(i)
		return end, ok
	case b == '-' || ('0' <= b && b <= '9'):
		return numberEnd(s.in, i)
	}
	for _, lit := range [...]string{"true", "false", "null"} {
		if bytes.HasPrefix(s.in[i:], []byte(lit)) {
			return i + len(lit), true
		}
	}
	return i, false
}

// memberFunc is told of one object member: its key's bytes (without quotes,
// escapes as written), whether the key holds an escape, and where its
// value starts and ends in the document. Returning false stops the scan,
// which then reports failure.
type memberFunc func(key []byte, escaped bool, v, end int) bool

// skipMember is the member function of objects whose members are only
// checked.
func skipMember([]byte, bool, int, int) bool { return true }

// container checks an object (members non-nil: each member is passed to
// it) or an array (members nil) at in[i:] and returns the index after it.
// What follows each value must be a separator or the closing bracket, so
// a literal or number running into something else ("truex", "01") fails.
func (s *jsonScan) container(i, depth int, closing byte, members memberFunc) (int, bool) {
	i = s.space(i + 1)
	if i < len(s.in) && s.in[i] == closing {
		return i + 1, true
	}
	for {
		var (
			key     []byte
			escaped bool
		)
		if members != nil {
			if i >= len(s.in) || s.in[i] != '"' {
				return i, false
			}
			k := i + 1
			var ok bool
			if i, escaped, ok = s.str(i); !ok {
				return i, false
			}
			key = s.in[k : i-1]
			i = s.space(i)
			if i >= len(s.in) || s.in[i] != ':' {
				return i, false
			}
			i = s.space(i + 1)
		}
		v := i
		var ok bool
		if i, ok = s.value(i, depth+1); !ok {
			return i, false
		}
		if members != nil && !members(key, escaped, v, i) {
			return i, false
		}
		i = s.space(i)
		if i >= len(s.in) {
			return i, false
		}
		switch s.in[i] {
		case ',':
			i = s.space(i + 1)
		case closing:
			return i + 1, true
		default:
			return i, false
		}
	}
}

// str checks the string at in[i:] (the opening quote) and returns the
// index after its closing quote and whether it holds an escape. Any byte
// from 0x20 up is allowed, as encoding/json allows it (invalid UTF-8 it
// replaces when decoding).
func (s *jsonScan) str(i int) (end int, escaped, ok bool) {
	for j := i + 1; j < len(s.in); j++ {
		if j += plainRun(s.in[j:]); j >= len(s.in) {
			break
		}
		switch b := s.in[j]; {
		case b == '"':
			return j + 1, escaped, true
		case b < 0x20:
			return j, escaped, false
		case b == '\\':
			escaped = true
			j++
			if j >= len(s.in) {
				return j, escaped, false
			}
			switch s.in[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if hex4(s.in[j-1:]) < 0 {
					return j, escaped, false
				}
				j += 4
			default:
				return j, escaped, false
			}
		}
	}
	return len(s.in), escaped, false
}

// numberEnd returns the index after the JSON number literal at in[i:],
// checking its grammar (what follows it is its container's to check).
func numberEnd(in []byte, i int) (int, bool) {
	j := i
	digits := func() bool {
		k := j
		for j < len(in) && '0' <= in[j] && in[j] <= '9' {
			j++
		}
		return j > k
	}
	if in[j] == '-' {
		j++
	}
	if j < len(in) && in[j] == '0' {
		j++
	} else if !digits() {
		return j, false
	}
	if j < len(in) && in[j] == '.' {
		j++
		if !digits() {
			return j, false
		}
	}
	if j < len(in) && (in[j] == 'e' || in[j] == 'E') {
		j++
		if j < len(in) && (in[j] == '+' || in[j] == '-') {
			j++
		}
		if !digits() {
			return j, false
		}
	}
	return j, true
}

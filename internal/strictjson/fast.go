package strictjson

import (
	"bytes"
	"encoding/json"
	"reflect"
	"unicode/utf8"
)

// The fast paths below read the common request — keys of plain ASCII
// without escapes, a handful per object, short numbers — straight from the
// bytes, without json.Decoder's tokens or a decode into map[string]any,
// which were a quarter of a governed call's allocations. Each only ever
// says "this is fine"; anything it does not handle, and every fault, goes
// to the reference path, which words the refusal. FuzzFastPaths requires
// the fast answer to match the reference's whenever the fast path gives one.

// fastMaxKeys bounds the keys of one object the fast check compares
// pairwise; a larger object takes the reference path.
const fastMaxKeys = 32

// checkFast reports whether Check(data) is certainly nil.
func checkFast(data []byte) bool {
	if !utf8.Valid(data) || !json.Valid(data) {
		return false
	}
	s := scan{data: data}
	i, ok := s.checkValue(s.space(0), 0)
	return ok && s.space(i) == len(data)
}

// scan reads well-formed JSON (json.Valid has passed, or the reader gives
// up on what it does not expect).
type scan struct{ data []byte }

func (s *scan) space(i int) int {
	for i < len(s.data) {
		switch s.data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// str reads the string at data[i] (its opening quote); it returns its
// contents' bounds, whether it holds an escape, and the index after it.
func (s *scan) str(i int) (start, end int, escaped bool, next int, ok bool) {
	if i >= len(s.data) || s.data[i] != '"' {
		return 0, 0, false, i, false
	}
	for j := i + 1; j < len(s.data); j++ {
		switch s.data[j] {
		case '"':
			return i + 1, j, escaped, j + 1, true
		case '\\':
			escaped = true
			j++
		}
	}
	return 0, 0, false, len(s.data), false
}

// scalar reads a number or literal; it returns the index after it.
func (s *scan) scalar(i int) int {
	for i < len(s.data) {
		switch s.data[i] {
		case ',', ']', '}', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}

// checkValue is Check's walk for the value at data[i].
func (s *scan) checkValue(i, depth int) (int, bool) {
	if i >= len(s.data) {
		return i, false
	}
	switch c := s.data[i]; c {
	case '"':
		start, end, escaped, next, ok := s.str(i)
		if ok && escaped {
			if _, lone := LoneSurrogate(s.data[start-1 : end+1]); lone {
				return next, false
			}
		}
		return next, ok
	case '{', '[':
		if depth+1 > MaxDepth {
			return i, false
		}
		if c == '[' {
			return s.each(i, ']', func(j int) (int, bool) { return s.checkValue(j, depth+1) })
		}
		var keys [fastMaxKeys][]byte
		n := 0
		return s.each(i, '}', func(j int) (int, bool) {
			start, end, escaped, next, ok := s.str(j)
			if !ok || escaped || n == fastMaxKeys {
				return next, false
			}
			key := s.data[start:end]
			for _, b := range key {
				if b == 0 || b >= utf8.RuneSelf {
					return next, false
				}
			}
			for _, k := range keys[:n] {
				if bytes.EqualFold(k, key) { // ASCII: what FoldKey compares
					return next, false
				}
			}
			keys[n] = key
			n++
			next = s.space(next)
			if next >= len(s.data) || s.data[next] != ':' {
				return next, false
			}
			return s.checkValue(s.space(next+1), depth+1)
		})
	default:
		end := s.scalar(i)
		if c == '-' || ('0' <= c && c <= '9') {
			// What checkNumber lets through without parsing.
			if end-i >= 309 || bytes.ContainsAny(s.data[i:end], "eE") {
				return end, false
			}
		}
		return end, true
	}
}

// each walks the members of the object or array at data[i] (open is its
// closing delimiter), calling member at the start of each.
func (s *scan) each(i int, closing byte, member func(int) (int, bool)) (int, bool) {
	i = s.space(i + 1)
	if i < len(s.data) && s.data[i] == closing {
		return i + 1, true
	}
	for {
		var ok bool
		if i, ok = member(i); !ok {
			return i, false
		}
		i = s.space(i)
		if i >= len(s.data) {
			return i, false
		}
		switch s.data[i] {
		case ',':
			i = s.space(i + 1)
		case closing:
			return i + 1, true
		default:
			return i, false
		}
	}
}

// skip passes over the value at data[i].
func (s *scan) skip(i, depth int) (int, bool) {
	if i >= len(s.data) || depth > MaxDepth {
		return i, false
	}
	switch s.data[i] {
	case '"':
		_, _, _, next, ok := s.str(i)
		return next, ok
	case '[':
		return s.each(i, ']', func(j int) (int, bool) { return s.skip(j, depth+1) })
	case '{':
		return s.each(i, '}', func(j int) (int, bool) { return s.skipMember(j, depth) })
	}
	return s.scalar(i), true
}

// skipMember passes over "key": value, returning where the value starts.
func (s *scan) memberValue(i int) (key []byte, escaped bool, value int, ok bool) {
	start, end, escaped, next, ok := s.str(i)
	if !ok {
		return nil, false, next, false
	}
	next = s.space(next)
	if next >= len(s.data) || s.data[next] != ':' {
		return nil, false, next, false
	}
	return s.data[start:end], escaped, s.space(next + 1), true
}

func (s *scan) skipMember(i, depth int) (int, bool) {
	_, _, v, ok := s.memberValue(i)
	if !ok {
		return v, false
	}
	return s.skip(v, depth+1)
}

// matchFast reports whether matchType would pass data against t: every key
// of every object read into a struct is one of its fields, spelled exactly.
func matchFast(data []byte, t reflect.Type) bool {
	s := scan{data: data}
	i, ok := s.match(s.space(0), t, 0)
	return ok && s.space(i) == len(data)
}

func (s *scan) match(i int, t reflect.Type, depth int) (int, bool) {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if i >= len(s.data) || depth > MaxDepth {
		return i, false
	}
	c := s.data[i]
	if t == nil || t == rawMessageType {
		return s.skip(i, depth)
	}
	switch k := t.Kind(); {
	case k == reflect.Struct && c == '{':
		return s.each(i, '}', func(j int) (int, bool) {
			key, escaped, v, ok := s.memberValue(j)
			if !ok || escaped {
				return v, false
			}
			ft, ok := fieldType(t, key)
			if !ok {
				return v, false
			}
			return s.match(v, ft, depth+1)
		})
	case (k == reflect.Slice || k == reflect.Array) && c == '[':
		return s.each(i, ']', func(j int) (int, bool) { return s.match(j, t.Elem(), depth+1) })
	case k == reflect.Map && c == '{':
		return s.each(i, '}', func(j int) (int, bool) {
			_, _, v, ok := s.memberValue(j)
			if !ok {
				return v, false
			}
			return s.match(v, t.Elem(), depth+1)
		})
	}
	return s.skip(i, depth)
}

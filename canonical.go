package ladder

import (
	"bytes"
	"slices"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// canonicalFast appends the canonical form of raw (one JSON value, with
// nothing but space after it) to dst without decoding it into Go values,
// which is what CanonicalJSON's reference path costs: every audit record's
// data passes through it twice (when the entry is made and when the store
// writes it). It handles the common document — valid UTF-8, keys written
// as they are (no escape) and unique within their object — and reports
// false for anything else (including malformed JSON), so the caller falls
// back to the reference path; FuzzCanonicalFast requires the two to agree
// whenever the fast one answers.
func canonicalFast(dst, raw []byte) ([]byte, bool) {
	return canonicalRun(canonicalizer{jsonScan: jsonScan{in: raw}, out: dst})
}

// canonicalRun runs c over its whole input: canonicalFast's body, and
// canonicalBytes' (with a step to note for CanonicalAuditData).
func canonicalRun(c canonicalizer) ([]byte, bool) {
	i, ok := c.value(c.space(0), 0)
	if !ok || c.space(i) != len(c.in) {
		return nil, false
	}
	return c.out, true
}

// canonicalMaxDepth bounds the fast path's recursion; deeper documents take
// the reference path.
const canonicalMaxDepth = 64

// canonicalizer reads in with jsonScan's helpers and writes out.
type canonicalizer struct {
	jsonScan
	out     []byte
	scratch []byte // reordering space for objects whose keys are unsorted
	// step, when set, notes the queue and step the top-level object
	// names as it passes (CanonicalAuditData).
	step *auditStep
}

// auditStep is AuditStepOf's answer gathered while canonicalising: of the
// top-level members whose key matches "queue" (or "step") as
// encoding/json matches a field, the one with a string value that comes
// last in the canonical order, which is the greatest key, since the
// canonical form sorts keys and the fast path refuses a repeated one.
type auditStep struct {
	queue, step       string
	queueKey, stepKey string // "" while none seen; a key is never ""
}

// note takes the member key: value, a string whose contents are value's
// bytes when verbatim. It reports false for a queue or step member whose
// value was written again from escapes (not its bytes), which the
// reference path must then read.
func (a *auditStep) note(key, value []byte, verbatim bool) bool {
	switch {
	case bytes.EqualFold(key, []byte("queue")):
		if !verbatim {
			return false
		}
		if a.queueKey == "" || string(key) > a.queueKey {
			a.queueKey, a.queue = string(key), string(value)
		}
	case bytes.EqualFold(key, []byte("step")):
		if !verbatim {
			return false
		}
		if a.stepKey == "" || string(key) > a.stepKey {
			a.stepKey, a.step = string(key), string(value)
		}
	}
	return true
}

// value copies the value at in[i:] to out and returns the index after it.
func (c *canonicalizer) value(i, depth int) (int, bool) {
	if i >= len(c.in) || depth > canonicalMaxDepth {
		return i, false
	}
	switch b := c.in[i]; {
	case b == '{':
		return c.object(i, depth)
	case b == '[':
		return c.array(i, depth)
	case b == '"':
		i, _, ok := c.str(i)
		return i, ok
	case b == '-' || ('0' <= b && b <= '9'):
		return c.number(i)
	case bytes.HasPrefix(c.in[i:], []byte("true")):
		c.out = append(c.out, "true"...)
		return i + 4, c.delimited(i + 4)
	case bytes.HasPrefix(c.in[i:], []byte("false")):
		c.out = append(c.out, "false"...)
		return i + 5, c.delimited(i + 5)
	case bytes.HasPrefix(c.in[i:], []byte("null")):
		c.out = append(c.out, "null"...)
		return i + 4, c.delimited(i + 4)
	}
	return i, false
}

// delimited reports whether a literal ending at i is followed by something
// that may follow a value (so "truex" is not taken for true).
func (c *canonicalizer) delimited(i int) bool {
	if i >= len(c.in) {
		return true
	}
	switch c.in[i] {
	case ' ', '\t', '\n', '\r', ',', ']', '}':
		return true
	}
	return false
}

// str copies a string to out as the reference path writes it back. Most
// strings are copied byte for byte; one with an escape or a raw U+2028 or
// U+2029 is written again from its value (strRewrite). verbatim reports
// the first case, in which the bytes between the quotes are the string's
// value. Invalid UTF-8 and malformed strings are handed over (ok false).
func (c *canonicalizer) str(i int) (next int, verbatim, ok bool) {
	j := i + 1
	for j < len(c.in) {
		if j += plainRun(c.in[j:]); j >= len(c.in) {
			break
		}
		b := c.in[j]
		switch {
		case b == '"':
			c.out = append(c.out, c.in[i:j+1]...)
			return j + 1, true, true
		case b == '\\':
			c.out = append(c.out, c.in[i:j]...)
			return c.strRewrite(j)
		case b < 0x20:
			return j, false, false
		default: // plainRun stops at ASCII only for the three above
			r, n := utf8.DecodeRune(c.in[j:])
			if r == utf8.RuneError && n == 1 {
				return j, false, false
			}
			if r == '\u2028' || r == '\u2029' {
				c.out = append(c.out, c.in[i:j]...)
				return c.strRewrite(j)
			}
			j += n
		}
	}
	return j, false, false
}

// strRewrite finishes str from in[j], the first byte the reference path
// writes differently, with out holding the string up to it: each escape is
// decoded as encoding/json decodes it and every character written as
// json.Encoder writes it with HTML escaping off (appendCanonicalRune). A
// note, a memo or a payload with a newline or a quote in it took the
// reference path's decode and encode, ten times the cost (BENCHMARKS.md,
// issue 22, session 15).
func (c *canonicalizer) strRewrite(j int) (next int, verbatim, ok bool) {
	for j < len(c.in) {
		k := j + plainRun(c.in[j:])
		c.out = append(c.out, c.in[j:k]...)
		if j = k; j >= len(c.in) {
			break
		}
		var r rune
		n := 0
		switch b := c.in[j]; {
		case b == '"':
			c.out = append(c.out, '"')
			return j + 1, false, true
		case b < 0x20:
			return j, false, false
		case b == '\\':
			r, n = unescapeJSON(c.in[j:])
		default:
			if r, n = utf8.DecodeRune(c.in[j:]); r == utf8.RuneError && n == 1 {
				n = 0
			}
		}
		if n == 0 {
			return j, false, false
		}
		c.out = appendCanonicalRune(c.out, r)
		j += n
	}
	return j, false, false
}

// unescapeJSON decodes the escape at the start of s (s[0] is '\\') as
// encoding/json does: a surrogate pair's two escapes make one character,
// an unpaired surrogate is U+FFFD. It returns the character and the bytes
// it took, 0 for an escape the JSON grammar does not allow.
func unescapeJSON(s []byte) (rune, int) {
	if len(s) < 2 {
		return 0, 0
	}
	switch s[1] {
	case '"', '\\', '/':
		return rune(s[1]), 2
	case 'b':
		return '\b', 2
	case 'f':
		return '\f', 2
	case 'n':
		return '\n', 2
	case 'r':
		return '\r', 2
	case 't':
		return '\t', 2
	case 'u':
		r := hex4(s)
		if r < 0 {
			return 0, 0
		}
		if utf16.IsSurrogate(r) {
			if len(s) >= 12 && s[6] == '\\' {
				if d := utf16.DecodeRune(r, hex4(s[6:])); d != unicode.ReplacementChar {
					return d, 12
				}
			}
			return unicode.ReplacementChar, 6
		}
		return r, 6
	}
	return 0, 0
}

// hex4 is the character of a \uXXXX escape at the start of s, or -1.
func hex4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var r rune
	for _, h := range s[2:6] {
		switch {
		case '0' <= h && h <= '9':
			h -= '0'
		case 'a' <= h && h <= 'f':
			h -= 'a' - 10
		case 'A' <= h && h <= 'F':
			h -= 'A' - 10
		default:
			return -1
		}
		r = r<<4 | rune(h)
	}
	return r
}

// appendCanonicalRune appends r as json.Encoder writes it inside a string
// with HTML escaping off: the quote, the backslash and control characters
// escaped (\b, \f, \n, \r, \t by name, the others as \u00xx), U+2028
// and U+2029 escaped, everything else as its UTF-8.
func appendCanonicalRune(dst []byte, r rune) []byte {
	const hex = "0123456789abcdef"
	switch {
	case r == '"' || r == '\\':
		return append(dst, '\\', byte(r))
	case r == '\b':
		return append(dst, '\\', 'b')
	case r == '\f':
		return append(dst, '\\', 'f')
	case r == '\n':
		return append(dst, '\\', 'n')
	case r == '\r':
		return append(dst, '\\', 'r')
	case r == '\t':
		return append(dst, '\\', 't')
	case r < 0x20:
		return append(dst, '\\', 'u', '0', '0', hex[r>>4], hex[r&0xf])
	case r == '\u2028' || r == '\u2029':
		return append(dst, '\\', 'u', '2', '0', '2', hex[r&0xf])
	}
	return utf8.AppendRune(dst, r)
}

// number copies a number literal as it is (the reference path decodes with
// UseNumber, which keeps the literal), after checking its JSON grammar.
func (c *canonicalizer) number(i int) (int, bool) {
	j, ok := numberEnd(c.in, i)
	if !ok || !c.delimited(j) {
		return j, false
	}
	c.out = append(c.out, c.in[i:j]...)
	return j, true
}

func (c *canonicalizer) array(i, depth int) (int, bool) {
	c.out = append(c.out, '[')
	i = c.space(i + 1)
	if i < len(c.in) && c.in[i] == ']' {
		c.out = append(c.out, ']')
		return i + 1, true
	}
	for {
		var ok bool
		if i, ok = c.value(i, depth+1); !ok {
			return i, false
		}
		i = c.space(i)
		if i >= len(c.in) {
			return i, false
		}
		switch c.in[i] {
		case ',':
			c.out = append(c.out, ',')
			i = c.space(i + 1)
		case ']':
			c.out = append(c.out, ']')
			return i + 1, true
		default:
			return i, false
		}
	}
}

// member is one key and value of an object as written to out: the key's
// bytes without quotes are out[key:keyEnd], the member is out[start:end].
type member struct{ start, key, keyEnd, end int }

func (c *canonicalizer) object(i, depth int) (int, bool) {
	c.out = append(c.out, '{')
	i = c.space(i + 1)
	if i < len(c.in) && c.in[i] == '}' {
		c.out = append(c.out, '}')
		return i + 1, true
	}
	var stack [16]member
	members := stack[:0]
	sorted := true
	for {
		if i >= len(c.in) || c.in[i] != '"' {
			return i, false
		}
		m := member{start: len(c.out), key: len(c.out) + 1}
		var ok, verbatim bool
		// Keys are sorted and compared as written, which is their order
		// and equality only when they are written as they are.
		if i, verbatim, ok = c.str(i); !ok || !verbatim {
			return i, false
		}
		m.keyEnd = len(c.out) - 1
		i = c.space(i)
		if i >= len(c.in) || c.in[i] != ':' {
			return i, false
		}
		c.out = append(c.out, ':')
		v := len(c.out)
		if i = c.space(i + 1); i < len(c.in) && c.in[i] == '"' {
			i, verbatim, ok = c.str(i)
		} else {
			i, ok = c.value(i, depth+1)
		}
		if !ok {
			return i, false
		}
		m.end = len(c.out)
		if depth == 0 && c.step != nil && c.out[v] == '"' {
			if !c.step.note(c.key(m), c.out[v+1:m.end-1], verbatim) {
				return i, false
			}
		}
		if n := len(members); n > 0 {
			switch bytes.Compare(c.key(members[n-1]), c.key(m)) {
			case 0:
				return i, false // a duplicate: the reference path keeps the last
			case 1:
				sorted = false
			}
		}
		members = append(members, m)
		i = c.space(i)
		if i >= len(c.in) {
			return i, false
		}
		switch c.in[i] {
		case ',':
			c.out = append(c.out, ',')
			i = c.space(i + 1)
			continue
		case '}':
		default:
			return i, false
		}
		break
	}
	if !sorted && !c.reorder(members) {
		return i, false
	}
	c.out = append(c.out, '}')
	return i + 1, true
}

func (c *canonicalizer) key(m member) []byte { return c.out[m.key:m.keyEnd] }

// insertionSortMax is the most members reorder sorts by insertion, which
// is quadratic: past it, slices.SortFunc.
const insertionSortMax = 16

// reorder rewrites an object's members, already in out, in key order. It
// reports false on a duplicate key.
func (c *canonicalizer) reorder(members []member) bool {
	if len(members) <= insertionSortMax {
		// Insertion sort: most objects are small, and it needs no closure.
		for a := 1; a < len(members); a++ {
			for b := a; b > 0 && bytes.Compare(c.key(members[b-1]), c.key(members[b])) > 0; b-- {
				members[b-1], members[b] = members[b], members[b-1]
			}
		}
	} else {
		// An agent chooses the keys of its features and payloads: an
		// object of 60,000 keys in reverse order, sorted by insertion, cost
		// 13 s of CPU a request (BENCHMARKS.md, issue 22, session 15).
		slices.SortFunc(members, func(x, y member) int { return bytes.Compare(c.key(x), c.key(y)) })
	}
	for a := 1; a < len(members); a++ {
		if bytes.Equal(c.key(members[a-1]), c.key(members[a])) {
			return false
		}
	}
	lo, hi := len(c.out), 0
	for _, m := range members {
		lo, hi = min(lo, m.start), max(hi, m.end)
	}
	c.scratch = append(c.scratch[:0], c.out[lo:hi]...)
	c.out = c.out[:lo]
	for k, m := range members {
		if k > 0 {
			c.out = append(c.out, ',')
		}
		c.out = append(c.out, c.scratch[m.start-lo:m.end-lo]...)
	}
	return true
}

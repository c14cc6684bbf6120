package ladder

import (
	"bytes"
	"unicode/utf8"
)

// canonicalFast appends the canonical form of raw (one JSON value, with
// nothing but space after it) to dst without decoding it into Go values,
// which is what CanonicalJSON's reference path costs: every audit record's
// data passes through it twice (when the entry is made and when the store
// writes it). It only handles the common document — strings without
// escapes or U+2028/U+2029, keys unique within their object — and reports
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

// note takes the member key: value (a string's contents, which the fast
// path only passes unescaped, so its bytes are its value).
func (a *auditStep) note(key, value []byte) {
	switch {
	case bytes.EqualFold(key, []byte("queue")):
		if a.queueKey == "" || string(key) > a.queueKey {
			a.queueKey, a.queue = string(key), string(value)
		}
	case bytes.EqualFold(key, []byte("step")):
		if a.stepKey == "" || string(key) > a.stepKey {
			a.stepKey, a.step = string(key), string(value)
		}
	}
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
		return c.str(i)
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

// str copies a string that encoding/json would write back byte for byte:
// no escapes, no control characters, valid UTF-8, no U+2028/U+2029.
func (c *canonicalizer) str(i int) (int, bool) {
	j := i + 1
	for j < len(c.in) {
		if j += plainRun(c.in[j:]); j >= len(c.in) {
			break
		}
		b := c.in[j]
		switch {
		case b == '"':
			c.out = append(c.out, c.in[i:j+1]...)
			return j + 1, true
		case b == '\\' || b < 0x20:
			return j, false
		default: // plainRun stops at ASCII only for the three above
			r, n := utf8.DecodeRune(c.in[j:])
			if r == utf8.RuneError && n == 1 || r == '\u2028' || r == '\u2029' {
				return j, false
			}
			j += n
		}
	}
	return j, false
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
		var ok bool
		if i, ok = c.str(i); !ok {
			return i, false
		}
		m.keyEnd = len(c.out) - 1
		i = c.space(i)
		if i >= len(c.in) || c.in[i] != ':' {
			return i, false
		}
		c.out = append(c.out, ':')
		v := len(c.out)
		if i, ok = c.value(c.space(i+1), depth+1); !ok {
			return i, false
		}
		m.end = len(c.out)
		if depth == 0 && c.step != nil && c.out[v] == '"' {
			c.step.note(c.key(m), c.out[v+1:m.end-1])
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

// reorder rewrites an object's members, already in out, in key order. It
// reports false on a duplicate key.
func (c *canonicalizer) reorder(members []member) bool {
	// Insertion sort: objects are small, and it needs no closure.
	for a := 1; a < len(members); a++ {
		for b := a; b > 0 && bytes.Compare(c.key(members[b-1]), c.key(members[b])) > 0; b-- {
			members[b-1], members[b] = members[b], members[b-1]
		}
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

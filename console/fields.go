package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ladderhq/ladder"
)

// shownField is one field of a payload, an output or an audit record as a
// person reads it: a plain label and a formatted value.
type shownField struct {
	Label, Value string
}

// maxShown bounds one shown value; the raw JSON is beside it in full.
const maxShown = 160

// fieldLabel turns a JSON field name into a label: fuel_surcharge_usd →
// "Fuel surcharge" (the value says dollars), bill_id → "Bill id".
func fieldLabel(k string) string {
	k = strings.TrimSuffix(k, "_usd")
	k = strings.ReplaceAll(k, "_", " ")
	if k == "" {
		return k
	}
	r, n := utf8.DecodeRuneInString(k)
	return strings.ToUpper(string(r)) + k[n:]
}

// fieldValue formats one JSON value for reading: dollars for *_usd fields,
// grouped digits for numbers, yes/no for booleans, compact JSON for the
// rest, cut at maxShown characters.
func fieldValue(k string, raw json.RawMessage) string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return cut(string(raw))
	}
	switch x := v.(type) {
	case nil:
		return "—"
	case bool:
		if x {
			return "yes"
		}
		return "no"
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			return x.String()
		}
		if strings.HasSuffix(k, "_usd") {
			return usd(f)
		}
		return groupDigits(strconv.FormatFloat(f, 'f', -1, 64))
	case string:
		return cut(x)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return cut(string(raw))
	}
	return cut(buf.String())
}

func cut(s string) string {
	if utf8.RuneCountInString(s) <= maxShown {
		return s
	}
	return string([]rune(s)[:maxShown]) + "…"
}

// objectFields lays a JSON object out as fields, id fields first, then by
// name; anything else (null, a list, a number) is one unnamed field, and
// nothing at all is no fields.
func objectFields(raw json.RawMessage) []shownField {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" {
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(t, &m); err != nil || m == nil {
		return []shownField{{Value: fieldValue("", t)}}
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		ai, aj := strings.HasSuffix(keys[i], "_id"), strings.HasSuffix(keys[j], "_id")
		if ai != aj {
			return ai
		}
		return keys[i] < keys[j]
	})
	out := make([]shownField, 0, len(keys))
	for _, k := range keys {
		out = append(out, shownField{Label: fieldLabel(k), Value: fieldValue(k, m[k])})
	}
	return out
}

// businessItem names the work item an approval is about, as the business
// knows it: the step's item (read from the payload field the capability
// names), else the payload's first *_id field, required ones first. Never
// the idempotency key, which only makes a retry safe.
func businessItem(a ladder.Approval, c ladder.Capability) string {
	if a.Item != "" {
		return a.Item
	}
	var pl map[string]json.RawMessage
	if json.Unmarshal(a.Payload, &pl) != nil {
		return ""
	}
	names, _, _ := schemaProps(c)
	if c.Item != "" {
		names = append([]string{c.Item}, names...)
	}
	for k := range pl {
		names = append(names, k)
	}
	for _, n := range names {
		if n != c.Item && !strings.HasSuffix(n, "_id") {
			continue
		}
		var s string
		if raw, ok := pl[n]; ok && json.Unmarshal(raw, &s) == nil && s != "" {
			return s
		}
	}
	return ""
}

// auditFirst are the audit data fields a person looks for first, in order.
var auditFirst = []string{"item", "queue", "step", "decision", "lane", "capability", "event", "status", "verdict", "gate_state", "reason_code", "from", "to", "rule", "reason"}

// auditFields lays an audit record's data out as fields: the telling ones
// first, empty ones left out, a nested object as its own fields in one
// value (payload: bill id BILL-7, amount $1,200.00).
func auditFields(raw json.RawMessage) []shownField {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return objectFields(raw)
	}
	rank := func(k string) int {
		for i, f := range auditFirst {
			if f == k {
				return i
			}
		}
		return len(auditFirst)
	}
	keys := make([]string, 0, len(m))
	for k, v := range m {
		switch strings.TrimSpace(string(v)) {
		case `""`, "null", "{}", "[]":
			continue
		}
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if ri, rj := rank(keys[i]), rank(keys[j]); ri != rj {
			return ri < rj
		}
		return keys[i] < keys[j]
	})
	out := make([]shownField, 0, len(keys))
	for _, k := range keys {
		v := m[k]
		if t := bytes.TrimSpace(v); len(t) > 0 && t[0] == '{' {
			var parts []string
			for _, f := range objectFields(t) {
				parts = append(parts, strings.ToLower(f.Label)+" "+f.Value)
			}
			out = append(out, shownField{Label: fieldLabel(k), Value: cut(strings.Join(parts, ", "))})
			continue
		}
		out = append(out, shownField{Label: fieldLabel(k), Value: fieldValue(k, v)})
	}
	return out
}

// countText says n with a noun, pluralised: 1 approval, 1,204 reviews.
func countText(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%s %ss", groupDigits(strconv.Itoa(n)), noun)
}

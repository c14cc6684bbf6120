package config

import (
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// maxNodes bounds the walk over the YAML tree. Aliases are followed, so a
// small file of nested aliases can expand to billions of nodes; past this many
// the file is refused rather than walked. A large real config has a few
// thousand nodes.
const maxNodes = 1 << 18

// walker checks a YAML node tree against the Go type it will be decoded
// into, before it is decoded. yaml.v3 can reject unknown fields, but only
// one at a time, without the field path and without telling a typo in case
// from a field that does not exist; so the walk does those checks itself,
// collects every fault, and records the line of every field path on the way
// for the later validation messages.
type walker struct {
	file  string
	pos   map[string]int  // field path → line of its key (or item)
	block map[string]bool // field paths whose value is a block scalar (| or >)
	errs  *errorList
	nodes int
	// alias counts the aliases the walk is inside. Positions are not
	// recorded there: they would point at the anchor anyway, and an
	// expanded alias can hold very many paths.
	alias int
}

// walk checks n against type t; path names n ("" for the root).
func (w *walker) walk(n *yaml.Node, t reflect.Type, path string) {
	if n.Kind == yaml.AliasNode {
		w.alias++
		defer func() { w.alias-- }()
	}
	n = w.deref(n, path)
	if n == nil || isNull(n) {
		return
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		if !w.expect(n, yaml.MappingNode, path) {
			return
		}
		w.walkStruct(n, t, path, map[string]int{}, false)
	case reflect.Map:
		if !w.expect(n, yaml.MappingNode, path) {
			return
		}
		w.eachPair(n, path, func(k, v *yaml.Node, at string) { w.walk(v, t.Elem(), at) })
	case reflect.Slice:
		if !w.expect(n, yaml.SequenceNode, path) {
			return
		}
		for i, item := range n.Content {
			at := fmt.Sprintf("%s[%d]", path, i)
			w.mark(at, item)
			w.walk(item, t.Elem(), at)
		}
	case reflect.Interface:
		w.walkAny(n, path)
	case reflect.Bool:
		w.scalar(n, path, "true or false", "!!bool")
	case reflect.Int, reflect.Int64, reflect.Int32:
		w.scalar(n, path, "a whole number", "!!int")
	case reflect.Float64, reflect.Float32:
		w.scalar(n, path, "a number", "!!int", "!!float")
	case reflect.String:
		w.scalar(n, path, "a string")
	default:
		// The file types use only the kinds above; reaching here is a bug.
		w.errs.add(w.file, n.Line, path, fmt.Sprintf("internal error: no check for Go kind %s", t.Kind()))
	}
}

// walkStruct checks the keys of mapping n against the fields of struct t.
// seen carries the keys already given. Merge keys ("<<") are taken after the
// mapping's own keys, because keys given explicitly win over merged ones, as
// YAML says; merged is true while walking a merged mapping.
func (w *walker) walkStruct(n *yaml.Node, t reflect.Type, path string, seen map[string]int, merged bool) {
	fields := yamlFields(t)
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if isMerge(k) {
			merges = append(merges, v)
			continue
		}
		if !w.key(k, path) {
			continue
		}
		at := join(path, k.Value)
		if line, dup := seen[k.Value]; dup {
			if !merged {
				w.errs.add(w.file, k.Line, at, fmt.Sprintf("duplicate key %q; it is already given at line %d", k.Value, line))
			}
			continue
		}
		seen[k.Value] = k.Line
		f, ok := fields[k.Value]
		if !ok {
			w.errs.add(w.file, k.Line, at, unknownField(k.Value, fields))
			continue
		}
		w.mark(at, k)
		w.noteBlock(at, v)
		w.walk(v, f.Type, at)
	}
	for _, v := range merges {
		w.alias++
		for _, m := range mergeSources(w.deref(v, path)) {
			w.walkStruct(m, t, path, seen, true)
		}
		w.alias--
	}
}

// walkAny checks free-form data (a JSON Schema, say): keys must be strings,
// unique, and not differ from each other only in case, because the JSON this
// data becomes is decoded with those rules.
func (w *walker) walkAny(n *yaml.Node, path string) {
	if n.Kind == yaml.AliasNode {
		w.alias++
		defer func() { w.alias-- }()
	}
	n = w.deref(n, path)
	if n == nil {
		return
	}
	switch n.Kind {
	case yaml.MappingNode:
		w.eachPair(n, path, func(k, v *yaml.Node, at string) { w.walkAny(v, at) })
	case yaml.SequenceNode:
		for i, item := range n.Content {
			at := fmt.Sprintf("%s[%d]", path, i)
			w.mark(at, item)
			w.walkAny(item, at)
		}
	case yaml.ScalarNode:
		if n.ShortTag() == "!!float" {
			// .nan and .inf have no JSON form.
			l := strings.ToLower(n.Value)
			if strings.Contains(l, "nan") || strings.Contains(l, "inf") {
				w.errs.add(w.file, n.Line, path, fmt.Sprintf("%s is not a JSON number", n.Value))
			}
		}
	}
}

// eachPair checks the keys of a map-typed mapping (string, unique, no case
// variants of each other) and calls fn for each pair. Merged pairs come after
// the mapping's own and lose to them, as in walkStruct.
func (w *walker) eachPair(n *yaml.Node, path string, fn func(k, v *yaml.Node, at string)) {
	seen := map[string]int{}
	folded := map[string]string{}
	var visit func(n *yaml.Node, merged bool)
	visit = func(n *yaml.Node, merged bool) {
		var merges []*yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if isMerge(k) {
				merges = append(merges, v)
				continue
			}
			if !w.key(k, path) {
				continue
			}
			at := join(path, k.Value)
			if line, dup := seen[k.Value]; dup {
				if !merged {
					w.errs.add(w.file, k.Line, at, fmt.Sprintf("duplicate key %q; it is already given at line %d", k.Value, line))
				}
				continue
			}
			if other, ok := folded[strings.ToLower(k.Value)]; ok {
				w.errs.add(w.file, k.Line, at, fmt.Sprintf("key %q differs from key %q only in case; JSON readers treat them as one, so use one spelling", k.Value, other))
				continue
			}
			seen[k.Value] = k.Line
			folded[strings.ToLower(k.Value)] = k.Value
			w.mark(at, k)
			w.noteBlock(at, v)
			fn(k, v, at)
		}
		for _, v := range merges {
			w.alias++
			for _, m := range mergeSources(w.deref(v, path)) {
				visit(m, true)
			}
			w.alias--
		}
	}
	visit(n, false)
}

// deref follows an alias and counts the node against the budget. It returns
// nil when the budget is spent.
func (w *walker) deref(n *yaml.Node, path string) *yaml.Node {
	w.nodes++
	if w.nodes == maxNodes {
		w.errs.add(w.file, n.Line, path, fmt.Sprintf("the document expands to more than %d nodes (aliases?); refusing to read it", maxNodes))
	}
	if w.nodes >= maxNodes {
		return nil
	}
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

func (w *walker) mark(path string, n *yaml.Node) {
	if w.alias > 0 {
		return
	}
	if _, ok := w.pos[path]; !ok {
		w.pos[path] = n.Line
	}
}

// noteBlock records that the value at path is a block scalar (| or >), whose
// text starts on the line after its key; CEL error lines need to know.
func (w *walker) noteBlock(path string, v *yaml.Node) {
	if w.alias == 0 && v.Kind == yaml.ScalarNode && v.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0 {
		w.block[path] = true
	}
}

func (w *walker) key(k *yaml.Node, path string) bool {
	k = w.deref(k, path)
	if k == nil {
		return false
	}
	if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" {
		w.errs.add(w.file, k.Line, path, fmt.Sprintf("key %s is not a string; keys are names", describe(k)))
		return false
	}
	return true
}

func (w *walker) expect(n *yaml.Node, kind yaml.Kind, path string) bool {
	if n.Kind == kind {
		return true
	}
	want := map[yaml.Kind]string{yaml.MappingNode: "a mapping (key: value lines)", yaml.SequenceNode: "a list (- item lines)"}[kind]
	w.errs.add(w.file, n.Line, path, fmt.Sprintf("got %s; expected %s", describe(n), want))
	return false
}

// scalar checks that n is a scalar and, when tags are given, has one of them.
func (w *walker) scalar(n *yaml.Node, path, want string, tags ...string) {
	if n.Kind != yaml.ScalarNode {
		w.errs.add(w.file, n.Line, path, fmt.Sprintf("got %s; expected %s", describe(n), want))
		return
	}
	if len(tags) == 0 {
		return
	}
	tag := n.ShortTag()
	for _, t := range tags {
		if tag == t {
			return
		}
	}
	w.errs.add(w.file, n.Line, path, fmt.Sprintf("%s is not %s", quoteValue(n), want))
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" }

func isMerge(k *yaml.Node) bool {
	return k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge"
}

// mergeSources returns the mappings a merge key's value names: one mapping
// or a list of them.
func mergeSources(v *yaml.Node) []*yaml.Node {
	if v == nil {
		return nil
	}
	switch v.Kind {
	case yaml.MappingNode:
		return []*yaml.Node{v}
	case yaml.SequenceNode:
		var out []*yaml.Node
		for _, item := range v.Content {
			for item != nil && item.Kind == yaml.AliasNode {
				item = item.Alias
			}
			if item != nil && item.Kind == yaml.MappingNode {
				out = append(out, item)
			}
		}
		return out
	}
	return nil
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return quoteValue(n)
	}
	return "nothing"
}

// quoteValue shows a scalar as the file spells it, cut short if long.
func quoteValue(n *yaml.Node) string {
	v := n.Value
	if len(v) > 40 {
		v = v[:40] + "…"
	}
	return fmt.Sprintf("%q", v)
}

// yamlFields maps the yaml names of a struct's fields to the fields.
func yamlFields(t reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name := yamlName(f)
		if name == "-" {
			continue
		}
		out[name] = f
	}
	return out
}

func yamlName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if name == "" {
		// yaml.v3's own default for an untagged field.
		return strings.ToLower(f.Name)
	}
	return name
}

// unknownField words the error for a key no field has: the right spelling
// when the key differs only in case, else the nearest name or the list.
func unknownField(key string, fields map[string]reflect.StructField) string {
	names := make([]string, 0, len(fields))
	for name := range fields {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if strings.EqualFold(name, key) {
			return fmt.Sprintf("unknown field %q; the field is spelled %q (names are case-sensitive)", key, name)
		}
	}
	if near := nearest(key, names); near != "" {
		return fmt.Sprintf("unknown field %q; did you mean %q?", key, near)
	}
	return fmt.Sprintf("unknown field %q; expected one of %s", key, strings.Join(names, ", "))
}

// nearest returns the name within edit distance 2 of s, or "".
func nearest(s string, names []string) string {
	best, bestD := "", 3
	for _, name := range names {
		if d := editDistance(strings.ToLower(s), name); d < bestD {
			best, bestD = name, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 99 // not a typo of a field name; skip the quadratic work
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

var plainKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// join appends a key to a field path: a.b for plain keys, a["x.y"] otherwise,
// so a path always reads back to one place in the file.
func join(path, key string) string {
	if !plainKey.MatchString(key) {
		return fmt.Sprintf("%s[%q]", path, key)
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

package mcp

import (
	"encoding/json"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/internal/mcpwire"
	"github.com/ladderhq/ladder/internal/strictjson"
)

// flatField is one member decodeFlat reads: its JSON name and where its
// value goes, a string (str) or the value's bytes as written (raw).
type flatField struct {
	name string
	str  *string
	raw  *json.RawMessage
}

// maxFlatFields bounds the members of one flat object (an envelope has
// four, a tools/call's params four, route_item's arguments four).
const maxFlatFields = 4

// decodeFlat is strictjson.UnmarshalChecked for the flat objects every
// request is framed in (the JSON-RPC envelope, a tools/call's params):
// their members are strings and values kept raw. UnmarshalChecked checks
// the keys against the type by reflection and then runs json.Unmarshal,
// which scans the bytes twice more; for a request that is one object
// whose every key is, exactly and unescaped, one of fields' names at most
// once, and whose string members are valid UTF-8 without an unpaired
// surrogate escape (ladder.JSONString), decodeFlat reads the same values
// in one scan (ladder.JSONObjectMembers, which checks the grammar as
// encoding/json does). It reports whether it
// did; when it did not, it changed nothing and the caller takes
// UnmarshalChecked, which decides (and words) everything else.
// FuzzDecodeFlat holds it to UnmarshalChecked.
func decodeFlat(data []byte, fields []flatField) bool {
	if len(fields) > maxFlatFields {
		return false
	}
	var vals [maxFlatFields][]byte
	var seen [maxFlatFields]bool
	var strs [maxFlatFields]string
	ok := ladder.JSONObjectMembers(data, func(key []byte, escaped bool, value []byte) bool {
		if escaped {
			return false
		}
		for i := range fields {
			if fields[i].name != string(key) {
				continue
			}
			if seen[i] {
				return false
			}
			if fields[i].str != nil {
				s, plain := ladder.JSONString(value)
				if !plain {
					return false
				}
				strs[i] = s
			}
			seen[i], vals[i] = true, value
			return true
		}
		return false
	})
	if !ok {
		return false
	}
	for i, f := range fields {
		switch {
		case !seen[i]:
		case f.str != nil:
			*f.str = strs[i]
		default:
			// As json.RawMessage's UnmarshalJSON keeps it.
			*f.raw = append((*f.raw)[0:0], vals[i]...)
		}
	}
	return true
}

// unmarshalEnvelope reads body's JSON-RPC envelope into env: decodeFlat's
// one scan for the usual request, strictjson.UnmarshalChecked for the rest.
func unmarshalEnvelope(body []byte, env *envelope) error {
	if decodeFlat(body, envelopeFields(env)) {
		return nil
	}
	return strictjson.UnmarshalChecked(body, env)
}

// unmarshalCallParams reads a tools/call's params into cp as
// unmarshalEnvelope reads the envelope.
func unmarshalCallParams(params []byte, cp *mcpwire.CallParams) error {
	if decodeFlat(params, callParamsFields(cp)) {
		return nil
	}
	return strictjson.UnmarshalChecked(params, cp)
}

// envelopeFields are envelope's JSON members, as its tags name them.
func envelopeFields(env *envelope) []flatField {
	return []flatField{
		{name: "jsonrpc", str: &env.JSONRPC},
		{name: "id", raw: &env.ID},
		{name: "method", str: &env.Method},
		{name: "params", raw: &env.Params},
	}
}

// callParamsFields are mcpwire.CallParams' JSON members, as its tags name
// them.
func callParamsFields(cp *mcpwire.CallParams) []flatField {
	return []flatField{
		{name: "name", str: &cp.Name},
		{name: "arguments", raw: &cp.Arguments},
		{name: "_meta", raw: &cp.Meta},
		{name: "task", raw: &cp.Task},
	}
}

// routeRequestFields are ladder.RouteRequest's JSON members, as its tags
// name them: route_item's arguments.
func routeRequestFields(in *ladder.RouteRequest) []flatField {
	return []flatField{
		{name: "queue", str: &in.Queue},
		{name: "step", str: &in.Step},
		{name: "item", str: &in.Item},
		{name: "features", raw: &in.Features},
	}
}

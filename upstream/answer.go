package upstream

import (
	"bytes"
	"encoding/json"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/internal/mcpwire"
)

// decodeAnswer reads one JSON-RPC message from an upstream MCP server, as
// json.Unmarshal into a toolMessage does. The message may share data's
// bytes (its id and its result's content): data must stay unchanged while
// the message is used. Both callers read data for one answer and change
// it no more once the answer is found: a JSON body read whole, and an
// event stream whose reader is left once its answer has come.
func decodeAnswer(data []byte) (toolMessage, error) {
	if m, ok := decodeAnswerFast(data); ok {
		return m, nil
	}
	var m toolMessage
	err := json.Unmarshal(data, &m)
	return m, err
}

// decodeAnswerFast is decodeAnswer for the answer every proxied call
// reads: a result with content, structured content and isError, under
// keys spelled exactly and without escapes. encoding/json scans such an
// answer twice (a check, then the decode) and compacts nothing; this
// checks it once with the scanner the audit log's fast paths use, keeps
// the id and the structured content as the bytes sent (as encoding/json
// keeps a json.RawMessage), and leaves the content blocks as sent for
// ToolResult.Texts, which only an error or an answer without structured
// content needs. Anything else (an error or a request, a key of another
// case, a key sent twice, a null, a value of another type) reports false,
// and the caller decodes with encoding/json; FuzzDecodeAnswer requires the
// two to agree whenever this one answers, but for content encoding/json
// would refuse, which Texts then refuses.
func decodeAnswerFast(data []byte) (m toolMessage, ok bool) {
	var result []byte
	seen := 0
	ok = ladder.JSONObjectMembers(data, func(key []byte, escaped bool, v []byte) bool {
		if escaped {
			return false
		}
		switch string(key) {
		case "jsonrpc":
			s, plain := ladder.JSONPlainString(v)
			m.JSONRPC = s
			return plain && once(&seen, 1)
		case "id":
			m.ID = v // data's own bytes (see decodeAnswer)
			return string(v) != "null" && once(&seen, 2)
		case "result":
			result = v
			return v[0] == '{' && once(&seen, 4)
		}
		return !foldsTo(key, "jsonrpc", "id", "method", "params", "result", "error")
	})
	if !ok || result == nil {
		return toolMessage{}, false
	}
	r := &mcpwire.ToolResult{}
	var content []byte
	seen = 0
	ok = ladder.JSONObjectMembers(result, func(key []byte, escaped bool, v []byte) bool {
		if escaped {
			return false
		}
		switch string(key) {
		case "content":
			content = v
			return v[0] == '[' && once(&seen, 1)
		case "structuredContent":
			r.StructuredContent = v
			return string(v) != "null" && once(&seen, 2)
		case "isError":
			r.IsError = string(v) == "true"
			return (r.IsError || string(v) == "false") && once(&seen, 4)
		}
		return !foldsTo(key, "content", "structuredContent", "isError")
	})
	if !ok {
		return toolMessage{}, false
	}
	r.RawContent = content
	m.Result = r
	return m, true
}

// once marks bit in seen and reports whether it was clear: a key sent
// twice is left to encoding/json.
func once(seen *int, bit int) bool {
	first := *seen&bit == 0
	*seen |= bit
	return first
}

// foldsTo reports whether key matches one of names as encoding/json
// matches a field: equal under Unicode case folding.
func foldsTo(key []byte, names ...string) bool {
	for _, n := range names {
		if bytes.EqualFold(key, []byte(n)) {
			return true
		}
	}
	return false
}

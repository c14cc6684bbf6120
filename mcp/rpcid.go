package mcp

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/internal/strictjson"
)

// Request ids.
//
// The front door echoes an id as the bytes it was sent; go-sdk reads it
// into a float64 and converts that to an int64 (jsonrpc2.MakeID), so 1.5
// comes back as 1, 1e2 as 100, 9007199254740993 as 9007199254740992 and
// 1.5e300 as -9223372036854775808. A client that matches answers to
// requests by id would lose those answers, and the same request would get
// one id back on a refusal and another on success. MCP allows only strings
// and integers as ids, so the front door refuses, with -32600 and the id
// echoed as sent, every id go-sdk cannot carry unchanged; every id that
// passes comes back with the same value on every path.

// maxExactID is the largest integer every float64 reader (go-sdk, and
// JavaScript clients) holds exactly: 2^53 - 1.
const maxExactID = 1<<53 - 1

// checkID refuses a request id that would not come back unchanged. An
// absent id (a notification) and null are the SDK's to answer.
func checkID(id json.RawMessage) *ladder.Error {
	if len(id) == 0 || string(id) == "null" {
		return nil
	}
	refuse := func(format string, args ...any) *ladder.Error {
		return &ladder.Error{Code: ladder.CodeInvalidArgument, Message: "The request id would not come back unchanged.",
			Hint:    "id: " + fmt.Sprintf(format, args...),
			RPCCode: jsonrpc.CodeInvalidRequest, Data: map[string]any{"field": "id"}}
	}
	switch c := id[0]; {
	case c == '"':
		if s, ok := strictjson.LoneSurrogate(id); ok {
			return refuse(`the string holds an unpaired UTF-16 surrogate (\u%s), which no JSON reader can give back unchanged; send an id of valid characters`, s)
		}
		return nil
	case c == '-' || ('0' <= c && c <= '9'):
		s := string(id)
		n, err := strconv.ParseInt(s, 10, 64)
		switch {
		case err != nil && !isInteger(s):
			return refuse("%s is not an integer; MCP request ids are strings or integers, so send a string or an integer id", s)
		case err != nil || n > maxExactID || n < -maxExactID:
			return refuse("%s is beyond ±%d, the integers that come back exactly; send a smaller integer or a string id", s, maxExactID)
		case s == "-0":
			return refuse("-0 would come back as 0; send 0, another integer or a string id")
		}
		return nil
	default:
		return refuse("must be a string or an integer (MCP request ids are), not %s", jsonKind(c))
	}
}

// isInteger reports whether a JSON number token has no fraction and no
// exponent.
func isInteger(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '.' || c == 'e' || c == 'E' {
			return false
		}
	}
	return true
}

func jsonKind(c byte) string {
	switch c {
	case '{':
		return "an object"
	case '[':
		return "an array"
	default:
		return "a boolean"
	}
}

// echoID is the id a refusal carries: the id as it was sent when it is a
// string or a number, null otherwise (JSON-RPC has no other id types).
func echoID(id json.RawMessage) json.RawMessage {
	if len(id) > 0 && (id[0] == '"' || id[0] == '-' || ('0' <= id[0] && id[0] <= '9')) {
		return id
	}
	return nil
}

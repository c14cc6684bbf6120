package mcpwire

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/ladderhq/ladder/internal/strictjson"
)

// Request ids.
//
// go-sdk reads a request id into a float64 and converts that to an int64
// (jsonrpc2.MakeID), so 1.5 comes back as 1, 1e2 as 100,
// 9007199254740993 as 9007199254740992 and 1.5e300 as
// -9223372036854775808. A peer that matches answers to requests by id
// would lose those answers. MCP allows only strings and integers as ids,
// so ladder refuses every id go-sdk cannot carry unchanged (CheckID), and
// sends only ids that come back byte for byte (SimpleID).

// MaxExactID is the largest integer every float64 reader (go-sdk, and
// JavaScript clients) holds exactly: 2^53 - 1.
const MaxExactID = 1<<53 - 1

// IDError says why a request id would not come back unchanged.
type IDError struct {
	// Reason is the sentence that says what is wrong with the id and what
	// to send instead.
	Reason string
}

// Error names the field and says what is wrong with it: the hint a
// refusal of the id carries.
func (e *IDError) Error() string { return "id: " + e.Reason }

// CheckID refuses a request id that would not come back unchanged through
// go-sdk. An absent id (a notification) and null are not checked: they
// are the SDK's to answer.
func CheckID(id json.RawMessage) *IDError {
	if len(id) == 0 || string(id) == "null" {
		return nil
	}
	refuse := func(format string, args ...any) *IDError {
		return &IDError{Reason: fmt.Sprintf(format, args...)}
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
		case err != nil || n > MaxExactID || n < -MaxExactID:
			return refuse("%s is beyond ±%d, the integers that come back exactly; send a smaller integer or a string id", s, MaxExactID)
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

// jsonKind names the kind of JSON value that starts with c, for a value
// that is neither a string nor a number nor null.
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

// EchoID is the id a refusal carries: the id as it was sent when it is a
// string or a number, nil (written as null) otherwise (JSON-RPC has no
// other id types).
func EchoID(id json.RawMessage) json.RawMessage {
	if len(id) > 0 && (id[0] == '"' || id[0] == '-' || ('0' <= id[0] && id[0] <= '9')) {
		return id
	}
	return nil
}

// SimpleID reports whether id is one go-sdk echoes byte for byte: an
// integer of at most 15 digits (the SDK reads ids as float64 and writes
// them back in its own spelling, so longer ones may not round-trip as the
// same bytes), or a string of printable ASCII with nothing to escape. An
// absent id is a notification, which is not answered at all.
func SimpleID(id json.RawMessage) bool {
	if len(id) == 0 {
		return false
	}
	if id[0] == '"' {
		if len(id) < 2 || id[len(id)-1] != '"' {
			return false
		}
		for _, c := range id[1 : len(id)-1] {
			if c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
				return false
			}
		}
		return true
	}
	digits := id
	if digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 15 || (digits[0] == '0' && len(id) > 1) {
		return false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// ClientID is the id of a client's n-th request on a session: a string,
// so no reader turns it into a float, and a SimpleID, so the answer
// carries it back byte for byte and matches it by bytes.Equal.
func ClientID(n int64) json.RawMessage {
	return json.RawMessage(`"ladder-` + strconv.FormatInt(n, 10) + `"`)
}

// Package mcpwire is MCP's streamable-HTTP wire as go-sdk speaks it, for
// ladder's two hand-written shortcuts around go-sdk: the server's tools/call
// fast path (mcp/fastpath.go) and the client's direct call to an upstream
// tool (upstream/direct.go).
//
// Both shortcuts exist because go-sdk is slow on the hot path
// (BENCHMARKS.md), and both are only correct while they say and read
// exactly what go-sdk does: the JSON-RPC framing, which ids come back
// unchanged, the protocol versions and headers, the event-stream framing,
// the shape of a tools/call result. Keeping one copy of that here means a
// change in go-sdk's wire is found and fixed once, for both sides; the
// differential tests that compare each side with go-sdk are listed in
// mcp/sdkversion_test.go, which fails when the go-sdk version changes.
package mcpwire

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ladderhq/ladder"
)

// Version is the JSON-RPC version every message carries.
const Version = "2.0"

// Message is one JSON-RPC message as go-sdk frames it (jsonrpc2's
// wireCombined, its fields in its order): a request, a notification or a
// response. R is the type of the result: json.RawMessage to write one, the
// expected result's type (a pointer, so an absent result is nil) to read
// one in a single decode.
type Message[R any] struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  R               `json:"result,omitempty"`
	// Error is go-sdk's own error type, whose JSON is jsonrpc2's WireError,
	// so errors.As finds it whichever path produced the error.
	Error *jsonrpc.Error `json:"error,omitempty"`
}

// IsRequest reports whether m is a request the receiver must answer: it
// has a method and an id. A method without an id is a notification; no
// method is a response.
func (m *Message[R]) IsRequest() bool { return m.Method != "" && len(m.ID) > 0 }

// Encode marshals v as go-sdk writes a message: with an encoder that does
// not escape HTML, and without the encoder's trailing newline.
func Encode(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// WireError is the error a response carries for err, as jsonrpc2's
// toWireError makes it: a *jsonrpc.Error as it is, the code of one
// wrapped in err with err's message (its data dropped), and code 0 for any
// other error.
func WireError(err error) *jsonrpc.Error {
	var je *jsonrpc.Error
	switch {
	case errors.As(err, &je) && je == err:
		return &jsonrpc.Error{Code: je.Code, Message: je.Message, Data: je.Data}
	case je != nil:
		return &jsonrpc.Error{Code: je.Code, Message: err.Error()}
	default:
		return &jsonrpc.Error{Message: err.Error()}
	}
}

// ToolResponse frames the answer to a tools/call with request id id as
// go-sdk does: callErr as a JSON-RPC error, or else res marshalled by
// encoding/json (which runs CallToolResult.MarshalJSON). For a
// 2026-07-28 client (stateless) go-sdk marks a result complete
// (resultType, the last field CallToolResult.MarshalJSON writes); the
// field is unexported, so it is appended here.
func ToolResponse(id json.RawMessage, res *sdk.CallToolResult, callErr error, stateless bool) ([]byte, error) {
	return AppendToolResponse(nil, id, res, callErr, stateless)
}

// AppendToolResponse is ToolResponse appending to dst, so a server that
// answers many calls can frame each in a buffer it reuses once written.
func AppendToolResponse(dst []byte, id json.RawMessage, res *sdk.CallToolResult, callErr error, stateless bool) ([]byte, error) {
	msg := Message[json.RawMessage]{JSONRPC: Version, ID: id}
	if callErr != nil {
		msg.Error = WireError(callErr)
		b, err := Encode(&msg)
		return append(dst, b...), err
	}
	// Encode(&msg) written out, the frame, the result and its resultType
	// in one buffer: the encoder would walk the message by reflection and
	// copy the result through its compactor once more, and written apart
	// the result was copied into the frame and again to append the field.
	// TestFrameResultMatchesEncode and FuzzFrameResult hold this to
	// Encode's bytes.
	out, err := appendFrameHead(slices.Grow(dst, resultSizeHint(id, res)), id)
	if err != nil {
		return nil, err
	}
	out = append(out, `,"result":`...)
	start := len(out)
	if out, err = appendResult(out, res); err != nil {
		return nil, err
	}
	if stateless && len(out)-start > 2 && out[len(out)-1] == '}' {
		out = append(out[:len(out)-1], `,"resultType":"complete"}`...)
	}
	return append(out, '}'), nil
}

// resultSizeHint is room enough for most answers ToolResponse frames:
// the frame, the text escaped at worst, and a route's or a call's
// structured content (a larger one grows the buffer once or twice).
func resultSizeHint(id json.RawMessage, res *sdk.CallToolResult) int {
	n := 640 + len(id)
	if text, ok := plainText(res); ok {
		n += 2 * len(text)
	}
	return n
}

// marshalResult is json.Marshal(res) written out for the result every
// ladder tool answers with: one text content and structured content,
// nothing else set. json.Marshal would walk CallToolResult and TextContent
// by reflection and run each one's MarshalJSON, then validate and compact
// what each returned, twice over (a tenth of a route_item's CPU with the
// structured value's own encoding, BENCHMARKS.md). Any other shape goes to
// json.Marshal. TestMarshalResultMatchesSDK and FuzzFrameResult hold the
// two to the same bytes.
func marshalResult(res *sdk.CallToolResult) ([]byte, error) { return appendResult(nil, res) }

// appendResult appends marshalResult's bytes to out.
func appendResult(out []byte, res *sdk.CallToolResult) ([]byte, error) {
	text, ok := plainText(res)
	if !ok {
		b, err := json.Marshal(res)
		return append(out, b...), err
	}
	// AppendJSONString escapes HTML, as the reflecting encoder does inside
	// json.Marshal(res).
	out = append(ladder.AppendJSONString(append(out, `{"content":[{"type":"text","text":`...), text), `}]`...)
	if res.StructuredContent != nil {
		out = append(out, `,"structuredContent":`...)
		var err error
		// A capability call's answer (its upstream's result inside) and a
		// route_item's are written without encoding/json's reflection and
		// its second pass over what it wrote. Values only: a nil pointer
		// is json.Marshal's "null".
		switch sc := res.StructuredContent.(type) {
		case ladder.CallResult:
			out, err = sc.AppendJSON(out)
		case ladder.Route:
			out, err = sc.AppendJSON(out)
		default:
			var b []byte
			b, err = json.Marshal(sc)
			out = append(out, b...)
		}
		if err != nil {
			return nil, err
		}
	}
	if res.IsError {
		out = append(out, `,"isError":true`...)
	}
	return append(out, '}'), nil
}

// plainText returns the text of res's one content when that and the
// structured content and the error flag are all res holds.
func plainText(res *sdk.CallToolResult) (string, bool) {
	if res == nil || res.Meta != nil || len(res.Content) != 1 || res.InputRequests != nil || res.RequestState != "" {
		return "", false
	}
	tc, ok := res.Content[0].(*sdk.TextContent)
	if !ok || tc == nil || tc.Meta != nil || tc.Annotations != nil {
		return "", false
	}
	return tc.Text, true
}

// appendFrameHead appends a response frame's opening to out: the version
// and the id, compacted as the encoder does (json.Compact does not escape
// HTML, as Encode does not). An id with no space in it (a client's number or
// plain string, as nearly every id is) is compact already and copied as
// it is; the others go through json.Compact, which also refuses one that
// is not JSON.
func appendFrameHead(out []byte, id json.RawMessage) ([]byte, error) {
	out = append(out, `{"jsonrpc":"`+Version+`"`...)
	if len(id) == 0 {
		return out, nil
	}
	out = append(out, `,"id":`...)
	if !bytes.ContainsAny(id, " \t\r\n") && json.Valid(id) {
		return append(out, id...), nil
	}
	b := bytes.NewBuffer(out)
	if err := json.Compact(b, id); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// CallParams are the params of a tools/call request. A client sends the
// name and the arguments; _meta and task are read so the server can tell a
// plain call (PlainCall) from one go-sdk must see.
type CallParams struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Meta      json.RawMessage `json:"_meta,omitempty"`
	Task      json.RawMessage `json:"task,omitempty"`
}

// CallRequest frames a plain tools/call of tool with the JSON object args
// as request id.
func CallRequest(id json.RawMessage, tool string, args json.RawMessage) ([]byte, error) {
	return CallRequestMeta(id, tool, args, nil)
}

// CallRequestMeta is CallRequest with params._meta (the trace context, as
// the OpenTelemetry MCP conventions carry it); nil meta leaves it out.
// The bytes are json.Marshal's of the Message holding the CallParams,
// written out so the arguments are checked and compacted once, not twice.
func CallRequestMeta(id json.RawMessage, tool string, args, meta json.RawMessage) ([]byte, error) {
	out := append(make([]byte, 0, len(`{"jsonrpc":"2.0","id":,"method":"tools/call","params":{"name":,"arguments":,"_meta":}}`)+len(id)+len(tool)+len(args)+len(meta)+8),
		`{"jsonrpc":"`+Version+`"`...)
	out, err := appendRawMember(out, `,"id":`, id)
	if err != nil {
		return nil, err
	}
	out = ladder.AppendJSONString(append(out, `,"method":"tools/call","params":{"name":`...), tool)
	if out, err = appendRawMember(out, `,"arguments":`, args); err != nil {
		return nil, err
	}
	if out, err = appendRawMember(out, `,"_meta":`, meta); err != nil {
		return nil, err
	}
	return append(out, "}}"...), nil
}

// appendRawMember appends key and v, as json.Marshal writes a
// json.RawMessage field tagged omitempty: nothing when v is empty.
func appendRawMember(out []byte, key string, v json.RawMessage) ([]byte, error) {
	if len(v) == 0 {
		return out, nil
	}
	return ladder.AppendCompactJSON(append(out, key...), v, true)
}

// ToolResult is a tools/call result as a client reads it: the content
// blocks, the structured content as sent, and whether the tool failed.
type ToolResult struct {
	Content           []Content       `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent"`
	IsError           bool            `json:"isError"`
	// RawContent is the content array as sent, when the decoder left it
	// for Texts: a proxied call that has structured content and no error
	// never reads the text, and decoding it (a copy of the structured
	// content, escaped) cost as much as the rest of the answer.
	RawContent json.RawMessage `json:"-"`
}

// Texts returns the text of r's text content blocks, in order, decoding
// RawContent first where the decoder left it; content encoding/json
// refuses is an error.
func (r *ToolResult) Texts() ([]string, error) {
	if r.RawContent != nil {
		var content []Content
		if err := json.Unmarshal(r.RawContent, &content); err != nil {
			return nil, err
		}
		r.Content, r.RawContent = content, nil
	}
	var texts []string
	for _, c := range r.Content {
		if c.Type == "text" {
			texts = append(texts, c.Text)
		}
	}
	return texts, nil
}

// Content is one content block of a tool result; a client that keeps only
// text reads the text of blocks of type "text".
type Content struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

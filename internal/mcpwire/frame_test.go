package mcpwire

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ladderhq/ladder"
)

// frameCases are ids as clients send them (numbers, strings with HTML
// characters, escapes and non-ASCII, padded with space, none at all, not
// JSON) and texts whose results json.Marshal escapes.
var (
	frameIDs   = []string{`1`, `0`, `-12.5e3`, `"abc"`, `"<a&b>"`, `"\u00e9\"\\"`, `"é"`, ` 7 `, "\t\"x\"\n", ``, `null`, `{`, `"unterminated`, `1 2`}
	frameTexts = []string{"", "ok", "<b>&</b>", "line\nbreak \u2028", "é\x01"}
)

// TestFrameResultMatchesEncode holds the answers ToolResponse frames, and
// the results marshalResult writes, to encoding/json's: the same bytes, or
// an error from both, for every id and result shape.
func TestFrameResultMatchesEncode(t *testing.T) {
	for _, id := range frameIDs {
		for _, text := range frameTexts {
			for _, stateless := range []bool{false, true} {
				checkFrame(t, []byte(id), text, stateless)
			}
		}
	}
}

// FuzzFrameResult is TestFrameResultMatchesEncode on any id and text.
func FuzzFrameResult(f *testing.F) {
	for _, id := range frameIDs {
		for _, text := range frameTexts {
			f.Add([]byte(id), text, false)
		}
	}
	f.Fuzz(func(t *testing.T, id []byte, text string, stateless bool) { checkFrame(t, id, text, stateless) })
}

func checkFrame(t *testing.T, id []byte, text string, stateless bool) {
	t.Helper()
	for _, res := range resultShapes(text) {
		checkMarshalResult(t, res)
		checkToolResponse(t, id, res, stateless)
	}
}

// checkToolResponse holds ToolResponse, which writes the frame and the
// result in one buffer, to Encode of the message holding json.Marshal's
// result (with go-sdk's resultType for a stateless client): the same
// bytes, or an error from both.
func checkToolResponse(t *testing.T, id []byte, res *sdk.CallToolResult, stateless bool) {
	t.Helper()
	want, werr := json.Marshal(res)
	if werr == nil {
		if stateless && len(want) > 2 && want[len(want)-1] == '}' {
			want = append(want[:len(want)-1:len(want)-1], `,"resultType":"complete"}`...)
		}
		want, werr = Encode(&Message[json.RawMessage]{JSONRPC: Version, ID: id, Result: want})
	}
	got, gerr := ToolResponse(id, res, nil, stateless)
	if (werr != nil) != (gerr != nil) {
		t.Fatalf("id %q %+v: reference error %v, ToolResponse error %v", id, res, werr, gerr)
	}
	if werr == nil && !bytes.Equal(got, want) {
		t.Fatalf("id %q %+v:\nToolResponse %s\nreference    %s", id, res, got, want)
	}
}

// routeLike is a structured value shaped as ladder's answers are: a struct
// with tags, omitempty fields, a raw JSON field and a time.
type routeLike struct {
	ID       string          `json:"route_id"`
	Reason   string          `json:"reason"`
	Rate     float64         `json:"audit_rate,omitempty"`
	Features json.RawMessage `json:"features,omitempty"`
	At       time.Time       `json:"at"`
}

// marshalsBadly returns JSON that is not valid, which json.Marshal refuses.
type marshalsBadly struct{}

func (marshalsBadly) MarshalJSON() ([]byte, error) { return []byte(`{"a":`), nil }

// resultShapes are results with text: the shape marshalResult writes out
// (structured content of every kind, none, an error) and the shapes it
// leaves to json.Marshal (two contents, other content, metadata,
// annotations, request state).
func resultShapes(text string) []*sdk.CallToolResult {
	one := func() []sdk.Content { return []sdk.Content{&sdk.TextContent{Text: text}} }
	var nilRoute *routeLike
	return []*sdk.CallToolResult{
		{Content: one()},
		{Content: one(), IsError: true},
		{Content: one(), StructuredContent: map[string]string{"t": text}},
		{Content: one(), StructuredContent: routeLike{ID: "rt_1", Reason: text, Rate: 0.25, Features: json.RawMessage(` {"a": [1, 2]} `), At: time.Date(2026, 12, 2, 10, 0, 0, 5, time.UTC)}, IsError: true},
		{Content: one(), StructuredContent: &routeLike{Reason: text}},
		{Content: one(), StructuredContent: nilRoute},
		{Content: one(), StructuredContent: json.RawMessage(` [ "` + strings.ReplaceAll(text, `"`, ``) + `" ] `)},
		{Content: one(), StructuredContent: marshalsBadly{}},
		{Content: one(), StructuredContent: 7},
		{Content: one(), StructuredContent: ladder.CallResult{Status: ladder.CallResultExecuted, Capability: "ticket6:readLedger", Message: text,
			Result: json.RawMessage(`{"balance":80.5,"entries":[{"description":"` + strings.ReplaceAll(text, `"`, ``) + `"}]}`), CallID: "call_1", AuditSeq: 9}},
		{Content: one(), StructuredContent: ladder.CallResult{Status: ladder.CallResultExecuted, Message: text, Result: json.RawMessage(` {"a" : "<b>"} `), Replayed: true}, IsError: true},
		{Content: one(), StructuredContent: ladder.CallResult{Status: ladder.CallResultExpired, Result: json.RawMessage(`{"a":`)}},
		{Content: one(), StructuredContent: ladder.Route{ID: "rt_1", Workspace: "w", Queue: "bills", Step: "post_tms", Item: text, Decision: ladder.DecisionActAlone,
			Lane: ladder.LaneAuto, AuditRate: 0.05, Reason: text, Features: json.RawMessage(` {"w": [1.50, "<b>"]} `), At: time.Date(2026, 12, 4, 8, 0, 0, 123456000, time.UTC), LaneEpoch: 2}},
		{Content: one(), StructuredContent: ladder.Route{Reason: text, AuditRate: 1e-7, Audit: true}, IsError: true},
		{Content: one(), StructuredContent: ladder.Route{AuditRate: math.NaN()}},
		{Content: one(), StructuredContent: (*ladder.Route)(nil)},
		{Content: one(), StructuredContent: &ladder.Route{ID: "rt_2", Reason: text}},
		{Content: []sdk.Content{&sdk.TextContent{Text: text}, &sdk.TextContent{Text: "two"}}},
		{Content: []sdk.Content{}},
		{Content: []sdk.Content{&sdk.ImageContent{Data: []byte(text), MIMEType: "image/png"}}},
		{Content: []sdk.Content{&sdk.TextContent{Text: text, Annotations: &sdk.Annotations{Priority: 1}}}},
		{Content: []sdk.Content{&sdk.TextContent{Text: text, Meta: sdk.Meta{"k": text}}}},
		{Content: one(), Meta: sdk.Meta{"k": "v"}},
		{Content: one(), RequestState: text + "s"},
	}
}

// TestMarshalResultMatchesSDK holds marshalResult to json.Marshal of the
// same result (which runs go-sdk's MarshalJSON): the same bytes, or an
// error from both.
func TestMarshalResultMatchesSDK(t *testing.T) {
	for _, text := range frameTexts {
		for _, res := range resultShapes(text) {
			checkMarshalResult(t, res)
		}
	}
}

func checkMarshalResult(t *testing.T, res *sdk.CallToolResult) {
	t.Helper()
	want, werr := json.Marshal(res)
	got, gerr := marshalResult(res)
	if (werr != nil) != (gerr != nil) {
		t.Fatalf("%+v: json.Marshal error %v, marshalResult error %v", res, werr, gerr)
	}
	if werr == nil && !bytes.Equal(got, want) {
		t.Fatalf("%+v:\nmarshalResult %s\njson.Marshal  %s", res, got, want)
	}
}

// callRequestReference is CallRequestMeta as json.Marshal writes it: the
// params marshalled, then the message holding them.
func callRequestReference(id json.RawMessage, tool string, args, meta json.RawMessage) ([]byte, error) {
	params, err := json.Marshal(CallParams{Name: tool, Arguments: args, Meta: meta})
	if err != nil {
		return nil, err
	}
	return json.Marshal(Message[json.RawMessage]{JSONRPC: Version, ID: id, Method: "tools/call", Params: params})
}

// TestCallRequestMatchesMarshal holds CallRequestMeta to json.Marshal of
// the message it writes out: the same bytes, or an error from both.
func TestCallRequestMatchesMarshal(t *testing.T) {
	args := []string{``, `{}`, `{"program":"partner-2027","since":"2026-10-01"}`, ` {"a" : [1, 2]} `, `{"a":"<b>&"}`, `{"a":`, `{"a":1}x`}
	metas := []string{``, `{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}`, `{"k":"\u2028"}`, `[`}
	for _, id := range frameIDs {
		for _, tool := range frameTexts {
			for _, a := range args {
				for _, m := range metas {
					var idRaw, aRaw, mRaw json.RawMessage
					if id != "" {
						idRaw = json.RawMessage(id)
					}
					if a != "" {
						aRaw = json.RawMessage(a)
					}
					if m != "" {
						mRaw = json.RawMessage(m)
					}
					want, werr := callRequestReference(idRaw, tool, aRaw, mRaw)
					got, gerr := CallRequestMeta(idRaw, tool, aRaw, mRaw)
					if (werr != nil) != (gerr != nil) || werr == nil && !bytes.Equal(got, want) {
						t.Fatalf("id %q tool %q args %q meta %q:\nCallRequestMeta %s (%v)\njson.Marshal    %s (%v)", id, tool, a, m, got, gerr, want, werr)
					}
				}
			}
		}
	}
}

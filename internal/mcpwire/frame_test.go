package mcpwire

import (
	"bytes"
	"encoding/json"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// frameCases are ids as clients send them (numbers, strings with HTML
// characters, escapes and non-ASCII, padded with space, none at all, not
// JSON) and texts whose results json.Marshal escapes.
var (
	frameIDs   = []string{`1`, `0`, `-12.5e3`, `"abc"`, `"<a&b>"`, `"\u00e9\"\\"`, `"é"`, ` 7 `, "\t\"x\"\n", ``, `null`, `{`, `"unterminated`, `1 2`}
	frameTexts = []string{"", "ok", "<b>&</b>", "line\nbreak \u2028", "é\x01"}
)

// TestFrameResultMatchesEncode holds frameResult to Encode of the message
// it writes out: the same bytes, or an error from both.
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
	raw, err := json.Marshal(&sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: text}}, StructuredContent: map[string]string{"t": text}})
	if err != nil {
		t.Fatal(err)
	}
	if stateless {
		raw = append(raw[:len(raw)-1:len(raw)-1], `,"resultType":"complete"}`...)
	}
	want, werr := Encode(&Message[json.RawMessage]{JSONRPC: Version, ID: id, Result: raw})
	got, gerr := frameResult(id, raw)
	if (werr != nil) != (gerr != nil) {
		t.Fatalf("id %q: Encode error %v, frameResult error %v", id, werr, gerr)
	}
	if werr == nil && !bytes.Equal(got, want) {
		t.Fatalf("id %q text %q:\nframeResult %s\nEncode      %s", id, text, got, want)
	}
}

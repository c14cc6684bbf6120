package mcpwire_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ladderhq/ladder/internal/mcpwire"
	"github.com/ladderhq/ladder/internal/strictjson"
)

// TestToolResponseRoundTrip: what the server frames, as a JSON body or as
// an event, the client reads back as the result or the error it was.
func TestToolResponseRoundTrip(t *testing.T) {
	rpcErr := &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "UNKNOWN_CAPABILITY", Data: json.RawMessage(`{"code":"UNKNOWN_CAPABILITY"}`)}
	for _, tc := range []struct {
		name    string
		res     *sdk.CallToolResult
		err     error
		want    *mcpwire.ToolResult
		wantErr *jsonrpc.Error
	}{
		{"text", &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "hello <&> \u2028"}}},
			nil, &mcpwire.ToolResult{Content: []mcpwire.Content{{Type: "text", Text: "hello <&> \u2028"}}}, nil},
		{"structured", &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: `{"n":1}`}}, StructuredContent: map[string]any{"n": 1}},
			nil, &mcpwire.ToolResult{Content: []mcpwire.Content{{Type: "text", Text: `{"n":1}`}}, StructuredContent: json.RawMessage(`{"n":1}`)}, nil},
		{"isError", &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "no"}}, IsError: true},
			nil, &mcpwire.ToolResult{Content: []mcpwire.Content{{Type: "text", Text: "no"}}, IsError: true}, nil},
		{"no content", &sdk.CallToolResult{Content: []sdk.Content{}}, nil, &mcpwire.ToolResult{Content: []mcpwire.Content{}}, nil},
		{"a JSON-RPC error", nil, rpcErr, nil, rpcErr},
		{"a wrapped JSON-RPC error", nil, fmt.Errorf("calling: %w", rpcErr), nil,
			&jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "calling: UNKNOWN_CAPABILITY"}},
		{"any other error", nil, errors.New("boom"), nil, &jsonrpc.Error{Message: "boom"}},
	} {
		for _, stateless := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stateless=%v", tc.name, stateless), func(t *testing.T) {
				id := mcpwire.ClientID(3)
				body, err := mcpwire.ToolResponse(id, tc.res, tc.err, stateless)
				if err != nil {
					t.Fatal(err)
				}
				if bytes.ContainsAny(body, "\n") {
					t.Fatalf("framed answer %q holds a newline", body)
				}
				if got := stateless && tc.err == nil; got != bytes.HasSuffix(body, []byte(`,"resultType":"complete"}}`)) {
					t.Errorf("stateless=%v, answer %s: resultType marked %v", stateless, body, !got)
				}
				var sse bytes.Buffer
				if err := mcpwire.WriteEvent(&sse, body); err != nil {
					t.Fatal(err)
				}
				event, err := mcpwire.NewEventReader(&sse, 1<<20).Next()
				if err != nil {
					t.Fatal(err)
				}
				for how, data := range map[string][]byte{"JSON body": body, "event": event} {
					var m mcpwire.Message[*mcpwire.ToolResult]
					if err := json.Unmarshal(data, &m); err != nil {
						t.Fatalf("%s: %v", how, err)
					}
					if !bytes.Equal(m.ID, id) || m.JSONRPC != mcpwire.Version || m.IsRequest() {
						t.Errorf("%s: %s is not the response to %s", how, data, id)
					}
					if diff := cmp.Diff(tc.want, m.Result); diff != "" {
						t.Errorf("%s: result (-want +got):\n%s", how, diff)
					}
					if diff := cmp.Diff(tc.wantErr, m.Error); diff != "" {
						t.Errorf("%s: error (-want +got):\n%s", how, diff)
					}
				}
			})
		}
	}
}

// TestEncodeDoesNotEscapeHTML: the SDK's encoder leaves <, > and & as
// they are and ends without a newline.
func TestEncodeDoesNotEscapeHTML(t *testing.T) {
	got, err := mcpwire.Encode(map[string]string{"a": "<&>"})
	if err != nil || string(got) != `{"a":"<&>"}` {
		t.Fatalf("Encode = %q, %v", got, err)
	}
}

// TestClientCallIsPlain: the tools/call the client sends under each plain
// protocol is one the server's fast path takes, read as the server reads
// it (strictly); under 2026-07-28 it is not, which is why the client goes
// direct only under a plain protocol.
func TestClientCallIsPlain(t *testing.T) {
	versions := sdk.SupportedProtocolVersions()
	for _, v := range versions {
		t.Run(v, func(t *testing.T) {
			id := mcpwire.ClientID(9)
			body, err := mcpwire.CallRequest(id, "route_item", json.RawMessage(`{"step":"post_tms","item":"<B-1>"}`))
			if err != nil {
				t.Fatal(err)
			}
			r, err := mcpwire.NewPost(context.Background(), "http://upstream.test/mcp", body, v, "s-1")
			if err != nil {
				t.Fatal(err)
			}
			if r.Header.Get(mcpwire.HeaderSessionID) != "s-1" || r.Header.Get(mcpwire.HeaderProtocolVersion) != v {
				t.Errorf("headers %v: want the session and the version", r.Header)
			}
			sent, _ := io.ReadAll(r.Body)
			var env struct {
				JSONRPC string          `json:"jsonrpc"`
				ID      json.RawMessage `json:"id"`
				Method  string          `json:"method"`
				Params  json.RawMessage `json:"params"`
			}
			var cp mcpwire.CallParams
			if err := strictjson.Unmarshal(sent, &env); err != nil {
				t.Fatalf("the server refuses %s: %v", sent, err)
			}
			if err := strictjson.Unmarshal(env.Params, &cp); err != nil {
				t.Fatalf("the server refuses the params %s: %v", env.Params, err)
			}
			if env.JSONRPC != "2.0" || env.Method != "tools/call" || !bytes.Equal(env.ID, id) || cp.Name != "route_item" || string(cp.Arguments) != `{"step":"post_tms","item":"\u003cB-1\u003e"}` {
				t.Errorf("sent %s", sent)
			}
			if got, want := mcpwire.PlainCall(r, env.ID, cp), mcpwire.PlainProtocol(v); got != want {
				t.Errorf("PlainCall = %v, want %v (plain protocol %v)", got, want, want)
			}
		})
	}
}

// TestPlainProtocol: every protocol go-sdk speaks is plain or the
// stateless one, and only those (and an absent header) are plain.
func TestPlainProtocol(t *testing.T) {
	versions := sdk.SupportedProtocolVersions()
	if !slices.Contains(versions, mcpwire.StatelessProtocol) {
		t.Errorf("go-sdk does not speak %s: %v", mcpwire.StatelessProtocol, versions)
	}
	for _, v := range versions {
		if mcpwire.PlainProtocol(v) == (v == mcpwire.StatelessProtocol) {
			t.Errorf("protocol %s: plain %v", v, mcpwire.PlainProtocol(v))
		}
	}
	for _, tc := range []struct {
		v    string
		want bool
	}{{"", true}, {"2025-11-25", true}, {"2024-11-05", true}, {"2026-07-28", false}, {"2025-01-01", false}, {"2025-11-25 ", false}, {"latest", false}} {
		if got := mcpwire.PlainProtocol(tc.v); got != tc.want {
			t.Errorf("PlainProtocol(%q) = %v, want %v", tc.v, got, tc.want)
		}
	}
}

// TestAccepts reads Accept headers as go-sdk does: lists, parameters,
// wildcards, case, several header lines.
func TestAccepts(t *testing.T) {
	for _, tc := range []struct {
		name             string
		values           []string
		jsonOK, streamOK bool
	}{
		{"the client's", []string{mcpwire.Accept}, true, true},
		{"none", nil, false, false},
		{"JSON only", []string{"application/json"}, true, false},
		{"stream only", []string{"text/event-stream"}, false, true},
		{"any", []string{"*/*"}, true, true},
		{"type wildcards", []string{"application/*, text/*"}, true, true},
		{"parameters and spaces", []string{" application/json ; q=0.9 ,text/event-stream;q=1"}, true, true},
		{"upper case", []string{"Application/JSON, TEXT/EVENT-STREAM"}, true, true},
		{"two header lines", []string{"application/json", "text/event-stream"}, true, true},
		{"others", []string{"text/html, application/xml"}, false, false},
		{"a prefix is not a match", []string{"application/jsonx, text/event-streams"}, false, false},
		{"empty tokens", []string{"", ",, ;q=1,", " , application/json,"}, true, false},
		// strings.ToLower maps U+0130 to 'i', so go-sdk takes this one.
		{"a capital I with a dot", []string{"applİcation/json, text/event-stream"}, true, true},
		// and maps U+017F (long s) to itself: no match, as in go-sdk.
		{"a long s", []string{"application/jſon, text/event-stream"}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			jsonOK, streamOK := mcpwire.Accepts(tc.values)
			if jsonOK != tc.jsonOK || streamOK != tc.streamOK {
				t.Errorf("Accepts(%q) = %v, %v, want %v, %v", tc.values, jsonOK, streamOK, tc.jsonOK, tc.streamOK)
			}
		})
	}
}

// TestHeaderValue: the header names looked up without canonicalising are
// canonical, and HeaderValue answers as Header.Get for each, whatever case
// the sender wrote the name in.
func TestHeaderValue(t *testing.T) {
	for _, key := range []string{mcpwire.HeaderProtocolVersion, mcpwire.HeaderSessionID, mcpwire.HeaderMethod, mcpwire.HeaderName, mcpwire.HeaderLastEventID, "Content-Type", "Accept", "Authorization", "Origin"} {
		if c := textproto.CanonicalMIMEHeaderKey(key); c != key {
			t.Errorf("%q is looked up as written, but its canonical form is %q", key, c)
		}
		for _, sent := range []string{key, strings.ToLower(key), strings.ToUpper(key)} {
			h := http.Header{}
			h.Add(sent, "v1")
			h.Add(sent, "v2")
			if got, want := mcpwire.HeaderValue(h, key), h.Get(key); got != want || got != "v1" {
				t.Errorf("header sent as %q: HeaderValue(%q) = %q, Get = %q", sent, key, got, want)
			}
		}
		if got := mcpwire.HeaderValue(http.Header{}, key); got != "" {
			t.Errorf("HeaderValue(%q) of no headers = %q", key, got)
		}
	}
}

// TestPlainCall: the requests the server may answer without go-sdk, and
// each thing that hands one to go-sdk instead.
func TestPlainCall(t *testing.T) {
	meta := `{"` + sdk.MetaKeyProtocolVersion + `":"2026-07-28","` + sdk.MetaKeyClientCapabilities + `":{}}`
	for _, tc := range []struct {
		name    string
		headers map[string]string // an empty value removes a header
		id      string
		cp      mcpwire.CallParams
		want    bool
	}{
		{"plain", nil, `1`, mcpwire.CallParams{Name: "t"}, true},
		{"no protocol header", map[string]string{mcpwire.HeaderProtocolVersion: ""}, `1`, mcpwire.CallParams{Name: "t"}, true},
		{"an unknown protocol", map[string]string{mcpwire.HeaderProtocolVersion: "2099-01-01"}, `1`, mcpwire.CallParams{Name: "t"}, false},
		{"_meta under a plain protocol", nil, `1`, mcpwire.CallParams{Name: "t", Meta: json.RawMessage(`{}`)}, false},
		{"a task", nil, `1`, mcpwire.CallParams{Name: "t", Task: json.RawMessage(`{}`)}, false},
		{"a notification", nil, ``, mcpwire.CallParams{Name: "t"}, false},
		{"an id that may not come back as sent", nil, `1234567890123456`, mcpwire.CallParams{Name: "t"}, false},
		{"JSON only", map[string]string{"Accept": "application/json"}, `1`, mcpwire.CallParams{Name: "t"}, false},
		{"a content type with a charset", map[string]string{"Content-Type": "application/json; charset=utf-8"}, `1`, mcpwire.CallParams{Name: "t"}, false},
		{"resuming a stream", map[string]string{mcpwire.HeaderLastEventID: "0_1"}, `1`, mcpwire.CallParams{Name: "t"}, false},
		{"stateless", map[string]string{mcpwire.HeaderProtocolVersion: "2026-07-28", mcpwire.HeaderMethod: "tools/call", mcpwire.HeaderName: "t"}, `1`, mcpwire.CallParams{Name: "t", Meta: json.RawMessage(meta)}, true},
		{"stateless without _meta", map[string]string{mcpwire.HeaderProtocolVersion: "2026-07-28", mcpwire.HeaderMethod: "tools/call", mcpwire.HeaderName: "t"}, `1`, mcpwire.CallParams{Name: "t"}, false},
		{"stateless naming another tool", map[string]string{mcpwire.HeaderProtocolVersion: "2026-07-28", mcpwire.HeaderMethod: "tools/call", mcpwire.HeaderName: "u"}, `1`, mcpwire.CallParams{Name: "t", Meta: json.RawMessage(meta)}, false},
		{"stateless with a bound parameter", map[string]string{mcpwire.HeaderProtocolVersion: "2026-07-28", mcpwire.HeaderMethod: "tools/call", mcpwire.HeaderName: "t", "mcp-param-x": "1"}, `1`, mcpwire.CallParams{Name: "t", Meta: json.RawMessage(meta)}, false},
		{"stateless with a progress token", map[string]string{mcpwire.HeaderProtocolVersion: "2026-07-28", mcpwire.HeaderMethod: "tools/call", mcpwire.HeaderName: "t"}, `1`, mcpwire.CallParams{Name: "t", Meta: json.RawMessage(strings.TrimSuffix(meta, "}") + `,"progressToken":1}`)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := mcpwire.NewPost(context.Background(), "http://ladder.test/mcp", nil, "2025-11-25", "")
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.headers {
				if v == "" {
					r.Header.Del(k)
					continue
				}
				r.Header.Set(k, v)
			}
			if got := mcpwire.PlainCall(r, json.RawMessage(tc.id), tc.cp); got != tc.want {
				t.Errorf("PlainCall = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestEventFramingMatchesSDK is the event stream's differential test:
// go-sdk's own server, answering a tools/call as an event stream, writes
// exactly the bytes WriteEvent writes around the answer ToolResponse
// frames, and the reader gives that answer back.
func TestEventFramingMatchesSDK(t *testing.T) {
	server := sdk.NewServer(&sdk.Implementation{Name: "wire", Version: "1"}, nil)
	// A raw tool handler: sdk.AddTool's typed one adds structured content.
	server.AddTool(&sdk.Tool{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		var in struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
			return nil, err
		}
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: in.Text}}}, nil
	})
	srv := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return server }, &sdk.StreamableHTTPOptions{Stateless: true}))
	defer srv.Close()
	for _, text := range []string{"plain", "<&> and \u2028", "two\nlines"} {
		t.Run(text, func(t *testing.T) {
			id := mcpwire.ClientID(1)
			args, _ := json.Marshal(map[string]string{"text": text})
			body, err := mcpwire.CallRequest(id, "echo", args)
			if err != nil {
				t.Fatal(err)
			}
			req, err := mcpwire.NewPost(context.Background(), srv.URL, body, "2025-11-25", "")
			if err != nil {
				t.Fatal(err)
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if ct := resp.Header.Get("Content-Type"); ct != mcpwire.ContentTypeEventStream {
				t.Fatalf("go-sdk answered %s as %q: %s", body, ct, got)
			}
			answer, err := mcpwire.ToolResponse(id, &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: text}}}, nil, false)
			if err != nil {
				t.Fatal(err)
			}
			var want bytes.Buffer
			if err := mcpwire.WriteEvent(&want, answer); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want.String(), string(got)); diff != "" {
				t.Errorf("go-sdk's event stream (-ours +go-sdk's):\n%s", diff)
			}
			data, err := mcpwire.NewEventReader(bytes.NewReader(got), 1<<20).Next()
			if err != nil || !bytes.Equal(data, answer) {
				t.Errorf("read %q, %v; want %q", data, err, answer)
			}
		})
	}
}

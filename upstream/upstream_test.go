package upstream_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/upstream"
)

type echoArgs struct {
	Bill    string `json:"bill_id" jsonschema:"the bill"`
	Program string `json:"program" jsonschema:"the scope"`
}

type echoOut struct {
	Bill    string `json:"bill_id"`
	Program string `json:"program"`
}

// ledger starts a go-sdk server with one tool, echo, answering versions
// (all of go-sdk's when empty), and returns its URL and the
// MCP-Protocol-Version headers of the tools/call requests it received.
func ledger(t *testing.T, versions []string) (string, func() []string) {
	t.Helper()
	s := sdk.NewServer(&sdk.Implementation{Name: "ledger", Version: "1"}, &sdk.ServerOptions{SupportedProtocolVersions: versions})
	sdk.AddTool(s, &sdk.Tool{Name: "echo", Description: "Echo the bill."},
		func(ctx context.Context, req *sdk.CallToolRequest, in echoArgs) (*sdk.CallToolResult, echoOut, error) {
			return nil, echoOut{Bill: in.Bill, Program: in.Program}, nil
		})
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, &sdk.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	var (
		mu   sync.Mutex
		seen []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte(`"tools/call"`)) {
			mu.Lock()
			seen = append(seen, r.Header.Get("Mcp-Protocol-Version"))
			mu.Unlock()
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen)
	}
}

func call(t *testing.T, p *upstream.Pool, url string) upstream.Result {
	t.Helper()
	x := ladder.Executor{Kind: ladder.ExecMCP, URL: url, Tool: "echo"}
	res, err := p.Execute(context.Background(), x, upstream.Request{CallID: "c1", Payload: json.RawMessage(`{"bill_id":"B-7"}`),
		Scope: map[string]string{"program": "p-1"}})
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	var out echoOut
	if err := json.Unmarshal(res.Body, &out); err != nil || out != (echoOut{Bill: "B-7", Program: "p-1"}) {
		t.Fatalf("result %s (%v), want the tool's structured content with the payload and the scope", res.Body, err)
	}
	return res
}

// The pool asks an upstream for protocol 2025-11-25 first: it costs less per
// call than 2026-07-28 on both ends and says the same for a tools/call.
func TestSessionSpeaksTheOlderProtocol(t *testing.T) {
	url, seen := ledger(t, nil)
	p := upstream.NewPool(nil, nil)
	defer p.Close()
	for range 3 {
		call(t, p, url)
	}
	if got := seen(); !slices.Equal(got, []string{upstream.SessionProtocolVersion, upstream.SessionProtocolVersion, upstream.SessionProtocolVersion}) {
		t.Fatalf("tools/call MCP-Protocol-Version headers %q, want %s on each of the 3 calls", got, upstream.SessionProtocolVersion)
	}
}

// A server that speaks only the newest protocol is still reached.
func TestSessionFallsBackToTheNewestProtocol(t *testing.T) {
	url, seen := ledger(t, []string{"2026-07-28"})
	p := upstream.NewPool(nil, nil)
	defer p.Close()
	call(t, p, url)
	if got := seen(); len(got) != 1 || got[0] != "2026-07-28" {
		t.Fatalf("tools/call MCP-Protocol-Version headers %q, want the one call at 2026-07-28", got)
	}
}

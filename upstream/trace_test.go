package upstream_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/upstream"
)

// seenTrace is what an upstream saw of the trace context of each call:
// the traceparent header of the POST carrying it and, for MCP, the one in
// params._meta.
type seenTrace struct {
	mu      sync.Mutex
	headers []string
	metas   []string
}

func (s *seenTrace) record(r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	var m struct {
		Method string `json:"method"`
		Params struct {
			Meta map[string]any `json:"_meta"`
		} `json:"params"`
	}
	_ = json.Unmarshal(body, &m)
	if m.Method != "" && m.Method != "tools/call" {
		return // initialize and notifications are not the call
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.headers = append(s.headers, r.Header.Get("traceparent"))
	if m.Method == "tools/call" {
		tp, _ := m.Params.Meta["traceparent"].(string)
		s.metas = append(s.metas, tp)
	}
}

// TestTraceContextUpstream: each kind of upstream call is a client span
// under the caller's, and the upstream gets that span as its parent in the
// traceparent header and, for an MCP tool, in params._meta too, whichever
// way the pool calls the tool (plain POST or go-sdk's client, stateless
// JSON or a session with event streams). The session id is recorded
// hashed, never as sent.
func TestTraceContextUpstream(t *testing.T) {
	tests := []struct {
		name     string
		kind     string
		stateful bool
		sdkOnly  bool
		spanName string
	}{
		{name: "http", kind: ladder.ExecHTTP, spanName: "ladder.upstream POST"},
		{name: "mcp plain POST", kind: ladder.ExecMCP, spanName: "tools/call echo"},
		{name: "mcp session with event streams", kind: ladder.ExecMCP, stateful: true, spanName: "tools/call echo"},
		{name: "mcp through go-sdk's client", kind: ladder.ExecMCP, sdkOnly: true, spanName: "tools/call echo"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seen := &seenTrace{}
			var h http.Handler
			if tt.kind == ladder.ExecHTTP {
				h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{"ok":true}`)) })
			} else {
				s := sdk.NewServer(&sdk.Implementation{Name: "ledger", Version: "1"}, nil)
				sdk.AddTool(s, &sdk.Tool{Name: "echo", Description: "Echo."},
					func(ctx context.Context, req *sdk.CallToolRequest, in echoArgs) (*sdk.CallToolResult, echoOut, error) {
						return nil, echoOut(in), nil
					})
				h = sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, &sdk.StreamableHTTPOptions{Stateless: !tt.stateful, JSONResponse: !tt.stateful})
			}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodPost {
					seen.record(r)
				}
				h.ServeHTTP(w, r)
			}))
			defer srv.Close()

			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			pool := upstream.NewPool(nil, nil)
			if tt.sdkOnly {
				pool = upstream.SDKOnly(pool)
			}
			defer pool.Close()
			pool.Trace(tp, propagation.TraceContext{})
			ctx, parent := tp.Tracer("test").Start(context.Background(), "caller")
			x := ladder.Executor{Kind: tt.kind, URL: srv.URL, Tool: "echo"}
			if _, err := pool.Execute(ctx, x, upstream.Request{CallID: "cl_1", Workspace: "acme", Capability: "acme:echo", Payload: json.RawMessage(`{"bill_id":"B-1"}`), Scope: map[string]string{"program": "p-1"}}); err != nil {
				t.Fatal(err)
			}
			parent.End()

			var span sdktrace.ReadOnlySpan
			for _, s := range rec.Ended() {
				if s.Name() == tt.spanName {
					span = s
				}
			}
			if span == nil {
				t.Fatalf("no span %q", tt.spanName)
			}
			if span.Parent().SpanID() != parent.SpanContext().SpanID() || span.SpanKind() != trace.SpanKindClient {
				t.Errorf("span %q: parent %s kind %v, want %s client", span.Name(), span.Parent().SpanID(), span.SpanKind(), parent.SpanContext().SpanID())
			}
			attrs := map[string]string{}
			for _, kv := range span.Attributes() {
				attrs[string(kv.Key)] = kv.Value.String()
			}
			if attrs["ladder.call_id"] != "cl_1" || attrs["ladder.workspace"] != "acme" || attrs["ladder.capability"] != "acme:echo" {
				t.Errorf("attributes %v", attrs)
			}
			if tt.kind == ladder.ExecMCP && (attrs["mcp.method.name"] != "tools/call" || attrs["gen_ai.tool.name"] != "echo") {
				t.Errorf("MCP attributes %v", attrs)
			}
			if sid := attrs["mcp.session.id"]; tt.stateful != (sid != "") || len(sid) > 0 && len(sid) != 16 {
				t.Errorf("mcp.session.id %q (stateful %v), want a 16-digit hash for a session only", sid, tt.stateful)
			}

			want := "00-" + span.SpanContext().TraceID().String() + "-" + span.SpanContext().SpanID().String() + "-01"
			seen.mu.Lock()
			defer seen.mu.Unlock()
			if d := cmp.Diff([]string{want}, seen.headers); d != "" {
				t.Errorf("traceparent headers (-want +got):\n%s", d)
			}
			var wantMeta []string
			if tt.kind == ladder.ExecMCP {
				wantMeta = []string{want}
			}
			if d := cmp.Diff(wantMeta, seen.metas); d != "" {
				t.Errorf("params._meta.traceparent (-want +got):\n%s", d)
			}
		})
	}
}

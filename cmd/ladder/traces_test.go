package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/ladderhq/ladder"
)

// otlpReceiver is an OTLP/HTTP trace receiver: it decodes each export as
// the collector would (ExportTraceServiceRequest, protobuf) and keeps the
// spans with their service name.
type otlpReceiver struct {
	t     *testing.T
	mu    sync.Mutex
	spans []*tracepb.Span
	names map[string]bool // service.name values seen
}

func newOTLPReceiver(t *testing.T) (*otlpReceiver, *httptest.Server) {
	r := &otlpReceiver{t: t, names: map[string]bool{}}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return r, srv
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		o.t.Errorf("OTLP export: %s %s (%s), want POST /v1/traces as protobuf", r.Method, r.URL.Path, r.Header.Get("Content-Type"))
		http.Error(w, "no", http.StatusBadRequest)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		o.t.Errorf("OTLP export: %v", err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	for _, rs := range req.ResourceSpans {
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.Key == "service.name" {
				o.names[kv.GetValue().GetStringValue()] = true
			}
		}
		for _, ss := range rs.ScopeSpans {
			o.spans = append(o.spans, ss.Spans...)
		}
	}
	o.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

// trace waits until the trace holds a span named last and returns its
// spans by name (a name seen twice keeps every span).
func (o *otlpReceiver) trace(traceID []byte, last string, within time.Duration) map[string][]*tracepb.Span {
	o.t.Helper()
	deadline := time.Now().Add(within)
	for {
		got := map[string][]*tracepb.Span{}
		o.mu.Lock()
		for _, s := range o.spans {
			if bytes.Equal(s.TraceId, traceID) {
				got[s.Name] = append(got[s.Name], s)
			}
		}
		o.mu.Unlock()
		if len(got[last]) > 0 {
			return got
		}
		if time.Now().After(deadline) {
			o.t.Fatalf("trace %x: no span %q within %s; spans: %v", traceID, last, within, spanNames(got))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func spanNames(m map[string][]*tracepb.Span) []string {
	var names []string
	for n := range m {
		names = append(names, n)
	}
	return sortedStrings(names)
}

// attrs returns a span's string and int attributes as strings.
func attrs(s *tracepb.Span) map[string]string {
	m := map[string]string{}
	for _, kv := range s.Attributes {
		if v, ok := kv.Value.Value.(*commonpb.AnyValue_StringValue); ok {
			m[kv.Key] = v.StringValue
		} else {
			m[kv.Key] = fmt.Sprint(kv.Value.GetIntValue())
		}
	}
	return m
}

// tracedUpstream is an MCP server (go-sdk, streamable HTTP) with one tool,
// pay, that keeps the traceparent of every tools/call: from the HTTP
// headers and from params._meta.
type tracedUpstream struct {
	mu      sync.Mutex
	headers []string // traceparent headers of tools/call POSTs
	metas   []string // params._meta.traceparent of pay calls
}

func newTracedUpstream(t *testing.T) (*tracedUpstream, *httptest.Server) {
	u := &tracedUpstream{}
	s := sdk.NewServer(&sdk.Implementation{Name: "payments", Version: "1"}, nil)
	s.AddTool(&sdk.Tool{Name: "pay", Description: "Pay a bill.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			u.mu.Lock()
			tp, _ := req.Params.Meta["traceparent"].(string)
			u.metas = append(u.metas, tp)
			u.mu.Unlock()
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "paid"}}}, nil
		})
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, &sdk.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"tools/call"`)) {
			u.mu.Lock()
			u.headers = append(u.headers, r.Header.Get("traceparent"))
			u.mu.Unlock()
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return u, srv
}

func (u *tracedUpstream) seen() (headers, metas []string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.headers...), append([]string(nil), u.metas...)
}

// tracedConfig is one workspace whose capability ops:pay goes through
// every step a call can: a route decision on an auto step, the evidence
// gate, the audit write, and an upstream MCP tool.
func tracedConfig(t *testing.T, upstreamURL string) string {
	t.Helper()
	cfg := `workspaces:
  - id: ops
    queues:
      - id: q
        steps:
          - {id: s1, name: Step one, lane: auto}
    gate_cases:
      - id: pay
        name: Pay
        commits:
          - id: pay_it
            name: Pay it
            precondition_fn:
              name: score_pay
              doc: A payment needs checked evidence.
              evidence:
                type: object
                required: [bill_id]
                properties:
                  bill_id: {type: string, description: The bill the checks were made for.}
                  ok: {type: boolean, description: Whether the checks passed.}
              R: "evidence.ok ? 1.0 : 0.0"
              C: "1.0"
              O: "1.0"
              Ro: "1.0"
    capabilities:
      - id: ops:pay
        title: Pay a bill
        description: Pays a bill through the payments system once its checks pass.
        payload_schema: {type: object, required: [bill_id], properties: {bill_id: {type: string, description: The bill.}}}
        step: q/s1
        item: bill_id
        gate: {case: pay, precondition_fn: score_pay, bind: {bill_id: bill_id}}
        executor: {kind: mcp, url: "` + upstreamURL + `", tool: pay}
`
	path := filepath.Join(t.TempDir(), "ladder.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// mcpCall sends one tools/call of ops:pay to /mcp with the given
// traceparent in the headers and in params._meta (none when empty), and
// fails unless the tool ran.
func mcpCall(t *testing.T, url, key, bill, traceparent, metaTraceparent string) {
	t.Helper()
	meta := ""
	if metaTraceparent != "" {
		meta = fmt.Sprintf(`,"_meta":{"traceparent":%q}`, metaTraceparent)
	}
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ops:pay","arguments":{"bill_id":%q,"idempotency_key":%q,"evidence":{"bill_id":%q,"ok":true}}%s}}`, bill, bill, bill, meta)
	req, _ := http.NewRequest(http.MethodPost, url+"/mcp", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if traceparent != "" {
		req.Header.Set("traceparent", traceparent)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !bytes.Contains(out, []byte("ran (call cl_")) {
		t.Fatalf("tools/call ops:pay: HTTP %d %s", resp.StatusCode, out)
	}
}

// TestTraceOfCapabilityCall: `ladder serve` with OTEL_EXPORTER_OTLP_ENDPOINT
// pointing at an in-test OTLP receiver exports, for one capability call
// over MCP to an upstream MCP tool, the request's span with children for
// authentication, the MCP request, the route decision, the gate, the audit
// write (with the group-commit wait under it) and the upstream call, parent
// links intact and the MCP conventions' attributes set; the upstream sees
// the trace in its traceparent header and in params._meta. A caller's
// traceparent is continued: the same trace id, the caller's span as parent;
// one sent in params._meta only is continued by the MCP span; over REST the
// same spans hang under the request's span, named by its route.
func TestTraceOfCapabilityCall(t *testing.T) {
	rcv, collector := newOTLPReceiver(t)
	up, upSrv := newTracedUpstream(t)
	_, admin, _ := ladder.NewKeyToken()
	srv := startServe(t, "traced", tracedConfig(t, upSrv.URL), filepath.Join(t.TempDir(), "ladder.db"),
		"LADDER_ADMIN_KEY="+admin, "LADDER_AUDIT_SECRET=trace-test",
		"OTEL_EXPORTER_OTLP_ENDPOINT="+collector.URL, "OTEL_SERVICE_NAME=ladder-trace-test", "OTEL_BSP_SCHEDULE_DELAY=50")
	agent := agentKey(t, srv.URL, admin, "agent")

	// A caller that sends a traceparent has its trace continued.
	const callerTrace, callerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	mcpCall(t, srv.URL, agent, "B-1", "00-"+callerTrace+"-"+callerSpan+"-01", "")
	traceID, _ := hex.DecodeString(callerTrace)
	upName := "tools/call pay"
	spans := rcv.trace(traceID, "POST /mcp", 20*time.Second)
	// The group commit's spans may come in a later export than the
	// upstream's: wait for the one under the audit write too.
	for deadline := time.Now().Add(10 * time.Second); ; {
		if audit := spans["ladder.audit.write"]; len(audit) == 1 && childOf(spans["ladder.groupcommit.wait"], audit[0]) != nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
		spans = rcv.trace(traceID, "POST /mcp", time.Second)
	}

	one := func(name string) *tracepb.Span {
		t.Helper()
		if len(spans[name]) != 1 {
			t.Fatalf("%d spans named %q in the trace, want 1; spans: %v", len(spans[name]), name, spanNames(spans))
		}
		return spans[name][0]
	}
	server := one("POST /mcp")
	if got := hex.EncodeToString(server.ParentSpanId); got != callerSpan {
		t.Errorf("the request span's parent is %q, want the caller's span %s", got, callerSpan)
	}
	if server.Kind != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("request span kind %v", server.Kind)
	}
	mcpSpan := one("tools/call ops:pay")
	parents := []struct{ child, parent *tracepb.Span }{
		{one("ladder.authenticate"), server},
		{mcpSpan, server},
		{one("ladder.route"), mcpSpan},
		{one("ladder.gate"), mcpSpan},
		{one("ladder.audit.write"), mcpSpan},
		{one(upName), mcpSpan},
	}
	for _, p := range parents {
		if !bytes.Equal(p.child.ParentSpanId, p.parent.SpanId) {
			t.Errorf("span %q: parent %x, want %q (%x)", p.child.Name, p.child.ParentSpanId, p.parent.Name, p.parent.SpanId)
		}
	}
	if childOf(spans["ladder.groupcommit.wait"], one("ladder.audit.write")) == nil {
		t.Errorf("no ladder.groupcommit.wait span under ladder.audit.write; spans: %v", spanNames(spans))
	}

	route := attrs(one("ladder.route"))
	for k, want := range map[string]string{"ladder.workspace": "ops", "ladder.step": "q/s1", "ladder.lane": "auto", "ladder.decision": "act_alone"} {
		if route[k] != want {
			t.Errorf("route span %s = %q, want %q", k, route[k], want)
		}
	}
	if !strings.HasPrefix(route["ladder.route_id"], "rt_") {
		t.Errorf("route span ladder.route_id = %q", route["ladder.route_id"])
	}
	if got := attrs(one("ladder.gate"))["ladder.gate.state"]; got != "PASS" {
		t.Errorf("gate span ladder.gate.state = %q, want PASS", got)
	}
	want := map[string]string{"mcp.method.name": "tools/call", "gen_ai.tool.name": "ops:pay", "jsonrpc.request.id": "7", "gen_ai.operation.name": "execute_tool"}
	got := attrs(mcpSpan)
	for k := range got {
		if _, ok := want[k]; !ok {
			delete(got, k)
		}
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("MCP server span attributes (-want +got):\n%s", d)
	}
	upSpan := one(upName)
	ua := attrs(upSpan)
	if ua["mcp.method.name"] != "tools/call" || ua["gen_ai.tool.name"] != "pay" || ua["jsonrpc.request.id"] == "" || ua["ladder.workspace"] != "ops" || upSpan.Kind != tracepb.Span_SPAN_KIND_CLIENT {
		t.Errorf("upstream span %v attributes %v", upSpan.Kind, ua)
	}

	// The upstream saw the trace, with the upstream call's span as parent,
	// in its headers and in params._meta.
	wantTP := "00-" + callerTrace + "-" + hex.EncodeToString(upSpan.SpanId) + "-01"
	headers, metas := up.seen()
	if d := cmp.Diff([]string{wantTP}, headers); d != "" {
		t.Errorf("traceparent headers of the upstream's tools/call (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{wantTP}, metas); d != "" {
		t.Errorf("params._meta.traceparent at the upstream (-want +got):\n%s", d)
	}

	// Without a caller's traceparent the request span starts a trace.
	mcpCall(t, srv.URL, agent, "B-2", "", "")
	var fresh *tracepb.Span
	for deadline := time.Now().Add(20 * time.Second); fresh == nil; {
		rcv.mu.Lock()
		for _, s := range rcv.spans {
			if s.Name == "POST /mcp" && !bytes.Equal(s.TraceId, traceID) {
				fresh = s
			}
		}
		rcv.mu.Unlock()
		if fresh == nil && time.Now().After(deadline) {
			t.Fatal("no request span of the second call")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(fresh.ParentSpanId) != 0 {
		t.Errorf("the second call's request span has parent %x, want none", fresh.ParentSpanId)
	}

	// A client that sends its trace context in params._meta only (the MCP
	// conventions' place) has it continued by the MCP span, which links
	// the request's span.
	const metaTrace, metaSpan = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	mcpCall(t, srv.URL, agent, "B-3", "", "00-"+metaTrace+"-"+metaSpan+"-01")
	metaID, _ := hex.DecodeString(metaTrace)
	continued := rcv.trace(metaID, "tools/call ops:pay", 20*time.Second)
	ms := continued["tools/call ops:pay"][0]
	if got := hex.EncodeToString(ms.ParentSpanId); got != metaSpan {
		t.Errorf("the MCP span continued from _meta has parent %q, want %s", got, metaSpan)
	}
	if len(ms.Links) != 1 || len(ms.Links[0].SpanId) == 0 {
		t.Errorf("the MCP span continued from _meta has links %v, want the request's span", ms.Links)
	}
	if r := continued["ladder.route"]; len(r) != 1 || !bytes.Equal(r[0].ParentSpanId, ms.SpanId) {
		t.Errorf("route span under the continued MCP span: %v", spanNames(continued))
	}

	// Over REST the service's spans hang under the request's span, named
	// by its route.
	const restTrace, restSpan = "5b8aa5a2d2c872e8321cf37308d69df2", "051581bf3cb55c13"
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/capabilities/ops:pay/call",
		strings.NewReader(`{"bill_id":"B-4","idempotency_key":"B-4","evidence":{"bill_id":"B-4","ok":true}}`))
	req.Header.Set("Authorization", "Bearer "+agent)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+restTrace+"-"+restSpan+"-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("REST call: HTTP %d", resp.StatusCode)
	}
	restID, _ := hex.DecodeString(restTrace)
	const restName = "POST /v1/capabilities/{id}/call"
	rest := rcv.trace(restID, restName, 20*time.Second)
	if got := hex.EncodeToString(rest[restName][0].ParentSpanId); got != restSpan {
		t.Errorf("REST request span's parent %q, want %s", got, restSpan)
	}
	if got := attrs(rest[restName][0])["http.route"]; got != "/v1/capabilities/{id}/call" {
		t.Errorf("http.route = %q", got)
	}
	for _, name := range []string{"ladder.authenticate", "ladder.route", "ladder.gate", "ladder.audit.write", upName} {
		if s := rest[name]; len(s) != 1 || !bytes.Equal(s[0].ParentSpanId, rest[restName][0].SpanId) {
			t.Errorf("REST trace: span %q not under the request span; spans: %v", name, spanNames(rest))
		}
	}

	rcv.mu.Lock()
	names := rcv.names
	rcv.mu.Unlock()
	if !names["ladder-trace-test"] {
		t.Errorf("service names %v, want ladder-trace-test (OTEL_SERVICE_NAME)", names)
	}
}

// childOf returns the span of spans whose parent is parent, or nil.
func childOf(spans []*tracepb.Span, parent *tracepb.Span) *tracepb.Span {
	for _, s := range spans {
		if bytes.Equal(s.ParentSpanId, parent.SpanId) {
			return s
		}
	}
	return nil
}

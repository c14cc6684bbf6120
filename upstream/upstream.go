// Package upstream executes capability calls: an HTTP POST, a tool on an
// upstream MCP server (over streamable HTTP, one reused session per
// server), or nothing at all (record). Every call has an explicit timeout,
// the caller's ladder key is never forwarded, and upstream credentials come
// from the config's headers or from environment variables it names.
package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	neturl "net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/internal/mcpwire"
	"github.com/ladderhq/ladder/internal/tracing"
)

// DefaultTimeout bounds a call whose executor declares none.
const DefaultTimeout = 10 * time.Second

// SessionProtocolVersion is the MCP protocol version ladder asks of an
// upstream server first. Protocol 2026-07-28 puts the client's info and
// capabilities in every request's _meta, which go-sdk parses several times
// on both ends of each call; for a tools/call the older protocol says the
// same thing and costs a quarter less per call (BENCHMARKS.md). A server
// that refuses it is asked again with go-sdk's newest.
const SessionProtocolVersion = "2025-11-25"

// Request is one call to execute.
type Request struct {
	CallID         string            `json:"call_id"`
	Workspace      string            `json:"workspace"`
	Capability     string            `json:"capability"`
	Payload        json.RawMessage   `json:"payload"`
	Scope          map[string]string `json:"scope,omitempty"`
	IdempotencyKey string            `json:"idempotency_key,omitempty"`
}

// Result is what the upstream answered.
type Result struct {
	Body   json.RawMessage // the upstream's JSON answer (or {"recorded": true})
	Status int             // HTTP status, for http executors
}

// Executor runs capability calls. Pool is the implementation; tests may
// substitute their own.
type Executor interface {
	Execute(ctx context.Context, x ladder.Executor, req Request) (Result, error)
}

// Pool executes calls and keeps one MCP session per upstream server.
type Pool struct {
	getenv func(string) string
	log    *slog.Logger
	http   *http.Client
	// transport is http's, shared by the MCP sessions.
	transport *http.Transport
	// Rewrite maps an executor URL to the one to dial (the demo's "demo:"
	// URLs to its in-process upstream). Nil leaves URLs as they are.
	Rewrite func(url string) string

	// Observe, when set, is told of every call Execute runs: the executor
	// kind, the capability, the outcome (ok, failed or timeout) and how long
	// it took. Set it before the first call.
	Observe func(executor, capability, outcome string, d time.Duration)

	// tracer and prop make the upstream call's span and carry its trace
	// context to the upstream (Trace); nil when tracing is off.
	tracer trace.Tracer
	prop   propagation.TextMapPropagator

	// sdkOnly sends every tools/call through go-sdk's client (tests compare
	// the two paths).
	sdkOnly bool

	mu    sync.Mutex
	slots map[string]*sessionSlot // by upstream URL
}

// sessionSlot holds one upstream's session. Its own lock is held while the
// session is opened, so a slow or unreachable upstream holds up only the
// calls to it, not the calls to every other upstream.
type sessionSlot struct {
	mu sync.Mutex
	s  *mcpSession
}

// NewPool returns a pool. getenv resolves headers_from_env.
func NewPool(getenv func(string) string, log *slog.Logger) *Pool {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// One transport for both kinds of executor, keeping enough idle
	// connections per upstream for the calls in flight: with
	// http.DefaultTransport's 2, concurrent MCP calls to one upstream opened
	// and closed a TCP connection almost every call.
	tr := &http.Transport{Proxy: http.ProxyFromEnvironment, MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second, ForceAttemptHTTP2: true}
	return &Pool{getenv: getenv, log: log, slots: map[string]*sessionSlot{}, transport: tr,
		http: &http.Client{Transport: tr}}
}

// Trace makes a client span of every call to an upstream with tp's tracer
// and sends its trace context with prop: in the HTTP headers of both kinds
// of executor (traceparent, tracestate) and, for an MCP tool, in the call's
// params._meta too, as the OpenTelemetry MCP conventions say. A nil tp
// leaves tracing off. Call it before the first call.
func (p *Pool) Trace(tp trace.TracerProvider, prop propagation.TextMapPropagator) {
	p.tracer = tracing.Tracer(tp)
	if p.tracer != nil {
		p.prop = prop
	}
}

// startSpan starts the span of one upstream call (nothing for a record
// executor, which calls nobody).
func (p *Pool) startSpan(ctx context.Context, x ladder.Executor, req Request) (context.Context, tracing.Span) {
	if p.tracer == nil || (x.Kind != ladder.ExecHTTP && x.Kind != ladder.ExecMCP) {
		return ctx, tracing.Span{}
	}
	name := tracing.SpanUpstreamHTTP
	if x.Kind == ladder.ExecMCP {
		name = tracing.MCPSpanName("tools/call", x.Tool)
	}
	ctx, sp := tracing.Start(ctx, p.tracer, name, trace.WithSpanKind(trace.SpanKindClient))
	if sp.Recording() {
		sp.Set(tracing.Workspace.String(req.Workspace), tracing.Capability.String(req.Capability), tracing.CallID.String(req.CallID),
			tracing.Executor.String(x.Kind), attribute.String("server.address", redactURL(p.url(x.URL))))
		if x.Kind == ladder.ExecMCP {
			sp.Set(tracing.MCPMethodName.String("tools/call"), tracing.GenAIToolName.String(x.Tool), tracing.GenAIOperation.String("execute_tool"),
				tracing.NetworkTransport.String("tcp"))
		} else {
			sp.Set(attribute.String("http.request.method", http.MethodPost))
		}
	}
	return ctx, sp
}

// inject writes ctx's trace context into h.
func (p *Pool) inject(ctx context.Context, h http.Header) {
	if p.prop != nil {
		p.prop.Inject(ctx, propagation.HeaderCarrier(h))
	}
}

// traceMeta is ctx's trace context as a tools/call's params._meta, or nil.
func (p *Pool) traceMeta(ctx context.Context) map[string]string {
	if p.prop == nil || !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	m := propagation.MapCarrier{}
	p.prop.Inject(ctx, m)
	return m
}

// Close ends the pool's MCP sessions.
func (p *Pool) Close() error {
	p.mu.Lock()
	slots := p.slots
	p.slots = map[string]*sessionSlot{}
	p.mu.Unlock()
	for _, slot := range slots {
		slot.mu.Lock()
		if slot.s != nil {
			slot.s.cs.Close()
			slot.s = nil
		}
		slot.mu.Unlock()
	}
	p.transport.CloseIdleConnections()
	return nil
}

func (p *Pool) url(u string) string {
	if p.Rewrite != nil {
		return p.Rewrite(u)
	}
	return u
}

// headers returns the upstream headers of x: literal ones and those read
// from the environment.
func (p *Pool) headers(x ladder.Executor) http.Header {
	h := http.Header{}
	for k, v := range x.Headers {
		h.Set(k, v)
	}
	for k, env := range x.HeadersFromEnv {
		if p.getenv != nil {
			if v := p.getenv(env); v != "" {
				h.Set(k, v)
			}
		}
	}
	return h
}

// Execute runs req with x's executor under x's timeout.
func (p *Pool) Execute(ctx context.Context, x ladder.Executor, req Request) (Result, error) {
	start := time.Now()
	ctx, sp := p.startSpan(ctx, x, req)
	res, err := p.execute(ctx, x, req)
	if sp.Recording() && res.Status != 0 {
		sp.Set(attribute.Int("http.response.status_code", res.Status))
	}
	sp.End(err)
	if p.Observe != nil {
		kind, outcome := x.Kind, "ok"
		if kind == "" {
			kind = ladder.ExecRecord
		}
		if err != nil {
			outcome = "failed"
			if ladder.AsError(err).Code == ladder.CodeUpstreamTimeout {
				outcome = "timeout"
			}
		}
		p.Observe(kind, req.Capability, outcome, time.Since(start))
	}
	return res, err
}

func (p *Pool) execute(ctx context.Context, x ladder.Executor, req Request) (Result, error) {
	timeout := x.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var (
		res Result
		err error
	)
	switch x.Kind {
	case ladder.ExecRecord, "":
		return Result{Body: json.RawMessage(`{"recorded":true}`)}, nil
	case ladder.ExecHTTP:
		res, err = p.postHTTP(ctx, x, req)
	case ladder.ExecMCP:
		res, err = p.callMCP(ctx, x, req)
	default:
		return Result{}, fmt.Errorf("executor kind %q", x.Kind)
	}
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return res, &ladder.Error{Code: ladder.CodeUpstreamTimeout, Message: fmt.Sprintf("The upstream did not answer within %s.", timeout),
			Hint: "nothing was retried; check the upstream, then call again with the same idempotency_key", Err: err}
	}
	return res, err
}

func upstreamFailed(status int, msg string, err error) *ladder.Error {
	e := &ladder.Error{Code: ladder.CodeUpstreamFailed, Message: msg, Hint: "the call was recorded as failed; fix the upstream or the payload, then call again", Err: err}
	if status != 0 {
		e.Data = map[string]any{"upstream_status": status}
	}
	return e
}

// postHTTP POSTs the call as JSON; a non-2xx answer is a failed call with
// its status recorded.
func (p *Pool) postHTTP(ctx context.Context, x ladder.Executor, req Request) (Result, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return Result{}, err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url(x.URL), bytes.NewReader(body))
	if err != nil {
		return Result{}, upstreamFailed(0, "The upstream URL is not valid.", err)
	}
	hr.Header = p.headers(x)
	hr.Header.Set("Content-Type", "application/json")
	p.inject(ctx, hr.Header)
	if req.IdempotencyKey != "" {
		hr.Header.Set("Idempotency-Key", req.IdempotencyKey)
	}
	resp, err := p.http.Do(hr)
	if err != nil {
		return Result{}, upstreamFailed(0, "The upstream could not be reached.", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return Result{Status: resp.StatusCode}, upstreamFailed(resp.StatusCode, "The upstream's answer could not be read.", err)
	}
	if resp.StatusCode/100 != 2 {
		return Result{Status: resp.StatusCode}, upstreamFailed(resp.StatusCode, fmt.Sprintf("The upstream answered HTTP %d.", resp.StatusCode), errors.New(strings.TrimSpace(string(data))))
	}
	if len(bytes.TrimSpace(data)) == 0 {
		data = []byte(`{}`)
	}
	if !json.Valid(data) {
		b, _ := json.Marshal(map[string]string{"text": string(data)})
		data = b
	}
	return Result{Body: data, Status: resp.StatusCode}, nil
}

// headerTransport adds the executor's headers to every request of an MCP
// session.
type headerTransport struct {
	base http.RoundTripper
	h    http.Header
	// inject, when set, adds the request's trace context (Pool.inject).
	inject func(context.Context, http.Header)
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(t.h) > 0 || t.traced(r) {
		// A RoundTripper must not change its caller's request.
		r = r.Clone(r.Context())
		t.add(r)
	}
	return t.base.RoundTrip(r)
}

func (t headerTransport) traced(r *http.Request) bool {
	return t.inject != nil && trace.SpanContextFromContext(r.Context()).IsValid()
}

// add puts the executor's headers and the trace context on r, a request
// its caller owns: the session's own posts get them without the copy
// RoundTrip makes of a request that is not its own.
func (t headerTransport) add(r *http.Request) {
	for k, v := range t.h {
		r.Header[k] = v
	}
	if t.traced(r) {
		t.inject(r.Context(), r.Header)
	}
}

// slot returns the session slot of an upstream URL.
func (p *Pool) slot(url string) *sessionSlot {
	p.mu.Lock()
	defer p.mu.Unlock()
	sl, ok := p.slots[url]
	if !ok {
		sl = &sessionSlot{}
		p.slots[url] = sl
	}
	return sl
}

// session returns the reused MCP session of an upstream server, opening it
// on first use.
func (p *Pool) session(ctx context.Context, x ladder.Executor) (*mcpSession, error) {
	url := p.url(x.URL)
	sl := p.slot(url)
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.s != nil {
		return sl.s, nil
	}
	client := sdk.NewClient(&sdk.Implementation{Name: "ladder", Version: "1"}, nil)
	ht := headerTransport{base: p.transport, h: p.headers(x)}
	if p.prop != nil {
		ht.inject = p.inject
	}
	hc := &http.Client{Transport: ht}
	connect := func(o *sdk.ClientSessionOptions) (*sdk.ClientSession, error) {
		return client.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, o)
	}
	cs, err := connect(&sdk.ClientSessionOptions{ProtocolVersion: SessionProtocolVersion})
	if err != nil {
		// A server that refuses the older protocol gets the SDK's newest.
		var err2 error
		if cs, err2 = connect(nil); err2 != nil {
			return nil, err
		}
	}
	sl.s = newMCPSession(cs, url, ht, p.sdkOnly)
	calls := "go-sdk client"
	if sl.s.direct {
		calls = "plain POST"
	}
	p.log.Info("upstream MCP session opened", "url", redactURL(url), "protocol", sl.s.version, "stateful", cs.ID() != "", "calls", calls)
	return sl.s, nil
}

// redactURL drops a password from a URL before it is logged.
func redactURL(s string) string {
	u, err := neturl.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// dropSession closes s if it is still its upstream's session, so the next
// call opens a new one.
func (p *Pool) dropSession(x ladder.Executor, s *mcpSession) {
	sl := p.slot(p.url(x.URL))
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.s == s {
		sl.s = nil
		s.cs.Close()
	}
}

// callMCP calls the executor's tool with the payload's fields and the
// scope as arguments: as a plain JSON-RPC POST on the session where its
// protocol allows (callTool), through go-sdk's client otherwise.
func (p *Pool) callMCP(ctx context.Context, x ladder.Executor, req Request) (Result, error) {
	raw, err := toolArguments(req)
	if err != nil {
		return Result{}, err
	}
	var (
		s   *mcpSession
		ans *mcpwire.ToolResult
	)
	for attempt := 1; ; attempt++ {
		if s, err = p.session(ctx, x); err != nil {
			return Result{}, upstreamFailed(0, "The upstream MCP server could not be reached.", err)
		}
		meta := p.traceMeta(ctx)
		if sp := trace.SpanFromContext(ctx); sp.IsRecording() {
			if id := s.cs.ID(); id != "" {
				sp.SetAttributes(tracing.MCPSessionID.String(tracing.SessionID(id)))
			}
			sp.SetAttributes(tracing.MCPProtocol.String(s.version))
		}
		if s.direct {
			ans, err = s.callTool(ctx, x.Tool, raw, meta)
		} else {
			ans, err = sdkCallTool(ctx, s.cs, x.Tool, raw, meta)
		}
		if attempt > 1 || !errors.Is(err, errSessionGone) {
			break
		}
		// The server forgot the session, so the call did not run: open a
		// new session and send it once more.
		p.dropSession(x, s)
	}
	if err != nil {
		// A broken session is dropped so the next call reconnects; the call
		// itself is not retried, since it may have run. A JSON-RPC error
		// is the server's answer to this call, and a call that ended
		// because its own context did (the timeout) says nothing about the
		// session, which other calls may be using.
		var je *jsonrpc.Error
		if ctx.Err() == nil && !errors.As(err, &je) {
			p.dropSession(x, s)
		}
		return Result{}, upstreamFailed(0, fmt.Sprintf("The upstream tool %s failed.", x.Tool), err)
	}
	sc := bytes.TrimSpace(ans.StructuredContent)
	if len(sc) > 0 && string(sc) != "null" && !ans.IsError {
		body, err := ladder.AppendCompactJSON(nil, sc, false)
		if err != nil {
			return Result{}, err
		}
		return Result{Body: body}, nil
	}
	texts, err := ans.Texts()
	if err != nil {
		// As an answer encoding/json refuses whole: the session spoke
		// outside the protocol.
		p.dropSession(x, s)
		return Result{}, upstreamFailed(0, fmt.Sprintf("The upstream tool %s failed.", x.Tool), fmt.Errorf("%w: the answer's content is not MCP content: %v", errSession, err))
	}
	if ans.IsError {
		return Result{}, upstreamFailed(0, fmt.Sprintf("The upstream tool %s answered with an error: %s.", x.Tool, strings.Join(texts, " ")), nil)
	}
	body, err := json.Marshal(map[string]any{"text": strings.Join(texts, "\n")})
	if err != nil {
		return Result{}, err
	}
	return Result{Body: body}, nil
}

// toolArguments is a call's arguments to an upstream tool: its payload's
// members with its scope fields set over them, as one JSON object, written
// as json.Marshal writes a map[string]json.RawMessage of them (keys sorted,
// values compacted, HTML escaped). Only the payload's top level is taken
// apart, and with the scanner the front door checks arguments with, not
// encoding/json's reflection; each member's value goes as it was sent, so
// numbers keep every digit (a float64 would round an id of 17). A payload
// whose keys hold escapes goes through encoding/json (toolArgumentsDecoded),
// and FuzzToolArguments holds the two to the same bytes.
func toolArguments(req Request) (json.RawMessage, error) {
	payload := req.Payload
	if len(payload) == 0 {
		payload = emptyObject
	}
	type member struct {
		key   string
		value []byte // nil for a scope field
	}
	var small [16]member
	ms := small[:0]
	if !ladder.JSONObjectMembers(payload, func(key []byte, escaped bool, v []byte) bool {
		if _, scoped := req.Scope[string(key)]; !scoped && !escaped {
			ms = append(ms, member{key: string(key), value: v})
		}
		return !escaped
	}) {
		return toolArgumentsDecoded(req)
	}
	size := len(payload) + 2
	for k, v := range req.Scope {
		ms = append(ms, member{key: k})
		size += len(k) + len(v) + 6
	}
	// Of a key sent twice the last counts, as json.Unmarshal into a map
	// keeps it: a stable sort leaves it last of its run.
	slices.SortStableFunc(ms, func(a, b member) int { return strings.Compare(a.key, b.key) })
	out := append(make([]byte, 0, size), '{')
	first := true
	for i, m := range ms {
		if i+1 < len(ms) && ms[i+1].key == m.key {
			continue
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		out = append(ladder.AppendJSONString(out, m.key), ':')
		if m.value == nil {
			out = ladder.AppendJSONString(out, req.Scope[m.key])
			continue
		}
		var err error
		if out, err = ladder.AppendCompactJSON(out, m.value, true); err != nil {
			return nil, err
		}
	}
	return append(out, '}'), nil
}

// emptyObject is the arguments of a call without a payload (never written
// to).
var emptyObject = json.RawMessage("{}")

// toolArgumentsDecoded is toolArguments through encoding/json.
func toolArgumentsDecoded(req Request) (json.RawMessage, error) {
	args := map[string]json.RawMessage{}
	if len(req.Payload) > 0 {
		if err := json.Unmarshal(req.Payload, &args); err != nil || args == nil {
			return nil, upstreamFailed(0, "The payload is not a JSON object.", err)
		}
	}
	for k, v := range req.Scope {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		args[k] = b
	}
	return json.Marshal(args)
}

// sdkCallTool calls a tool through go-sdk's client and reads its answer as
// callTool does.
func sdkCallTool(ctx context.Context, cs *sdk.ClientSession, tool string, args json.RawMessage, meta map[string]string) (*mcpwire.ToolResult, error) {
	params := &sdk.CallToolParams{Name: tool, Arguments: args}
	if len(meta) > 0 {
		params.Meta = sdk.Meta{}
		for k, v := range meta {
			params.Meta[k] = v
		}
	}
	res, err := cs.CallTool(ctx, params)
	if err != nil {
		return nil, err
	}
	ans := &mcpwire.ToolResult{IsError: res.IsError}
	for _, c := range res.Content {
		if t, ok := c.(*sdk.TextContent); ok {
			ans.Content = append(ans.Content, mcpwire.Content{Type: "text", Text: t.Text})
		}
	}
	if res.StructuredContent != nil {
		if ans.StructuredContent, err = json.Marshal(res.StructuredContent); err != nil {
			return nil, err
		}
	}
	return ans, nil
}

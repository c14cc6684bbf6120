// Package mcp serves ladder's MCP surface (POST /mcp, and stdio through the
// same handler) on github.com/modelcontextprotocol/go-sdk, stateless with
// JSON responses so any replica answers any request.
//
// A thin front door runs before the SDK: it reads the body under the 1 MiB
// limit, rejects hostile JSON (duplicate, case-variant or NUL-suffixed keys,
// unpaired surrogate escapes, deep nesting), checks the Origin and the
// MCP-Protocol-Version header, authenticates the key, and answers the seed
// 004 error contract itself — -32001 with the request id echoed for a
// missing or bad key, -32000 HUMAN_KEY_REFUSED for a human key, -32602
// UNKNOWN_CAPABILITY for a tool this workspace does not have, -32602
// BAD_CURSOR for a list cursor, -32022 UNSUPPORTED_PROTOCOL_VERSION for a
// version it does not speak. Only requests that pass reach the SDK, with
// the caller's principal attached.
package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/ladderhq/ladder"
	lhttp "github.com/ladderhq/ladder/http"
	"github.com/ladderhq/ladder/internal/mcpwire"
	"github.com/ladderhq/ladder/internal/metrics"
	"github.com/ladderhq/ladder/internal/strictjson"
	"github.com/ladderhq/ladder/internal/tracing"
	"github.com/ladderhq/ladder/service"
)

// MaxBodyBytes caps a request body (1 MiB).
const MaxBodyBytes = 1 << 20

// Tool name forms.
const (
	NamesCanonical = "canonical" // capability ids as they are: ticket6:readLedger
	NamesPortable  = "portable"  // ':' replaced by '_': ticket6_readLedger
)

// Options configure the MCP handler.
type Options struct {
	Service *service.Service
	Logger  *slog.Logger
	// TracerProvider makes a span per JSON-RPC request, named and
	// described as the OpenTelemetry MCP conventions say; nil makes none.
	TracerProvider trace.TracerProvider
	// Propagator reads a trace context a client put in params._meta (the
	// MCP conventions' place for it); nil reads none there.
	Propagator propagation.TextMapPropagator
	// BaseURL is this server's public URL, for evidence links. Empty means
	// it is derived from each request.
	BaseURL string
	// AllowedOrigins are browser origins accepted besides the server's own
	// host. Requests without an Origin header (non-browser clients) pass.
	AllowedOrigins []string
	// OpenWorkspace, FOR TESTING ONLY, serves that workspace's tools without
	// a key to clients on a loopback address (the MCP conformance suite
	// sends no Authorization header). Calls are attributed to the key id
	// "open-test".
	OpenWorkspace string
	// ToolNames is NamesCanonical (default) or NamesPortable.
	ToolNames string
	// Version is reported as the server's implementation version.
	Version string
	// Registry receives ladder_refusals_total{surface="mcp"}; the REST
	// server registers the same counter, so pass it the same registry. Nil
	// keeps the counter unregistered.
	Registry prometheus.Registerer
	// Challenge is the WWW-Authenticate value of a refusal (see
	// http.Options.Challenge); nil means Bearer realm="ladder" on a 401.
	Challenge func(path string, e *ladder.Error) string
}

// Handler is the /mcp endpoint.
type Handler struct {
	tracer  trace.Tracer // nil: tracing off
	opts    Options
	svc     *service.Service
	log     *slog.Logger
	sdk     http.Handler
	mu      sync.Mutex
	servers map[string]*workspaceServer
	// refusals counts every refusal the surface answers, by name.
	refusals *prometheus.CounterVec
	// sdkOnly turns the tools/call fast path off (tests compare the two).
	sdkOnly bool
	// fastCalls counts the calls the fast path answered.
	fastCalls atomic.Int64
	// impl is how the server names itself to clients.
	impl *sdk.Implementation
}

// workspaceServer is one workspace's SDK server and its tool names.
type workspaceServer struct {
	server *sdk.Server
	names  map[string]string  // accepted name → registered name
	calls  map[string]toolRun // registered name → its run, for the fast path
	lanes  string             // laneSignature when built
}

// New returns the MCP handler.
func New(opts Options) (*Handler, error) {
	if opts.Service == nil {
		return nil, errors.New("mcp: a service is required")
	}
	if opts.ToolNames == "" {
		opts.ToolNames = NamesCanonical
	}
	if opts.ToolNames != NamesCanonical && opts.ToolNames != NamesPortable {
		return nil, fmt.Errorf("mcp: tool names %q: use canonical or portable", opts.ToolNames)
	}
	h := &Handler{tracer: tracing.Tracer(opts.TracerProvider), opts: opts, svc: opts.Service, log: opts.Logger, servers: map[string]*workspaceServer{}, refusals: metrics.Refusals(opts.Registry),
		impl: &sdk.Implementation{Name: "ladder", Title: "ladder — earned autonomy for agents", Version: opts.Version}}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	// Startup, not a request: no caller's context to carry.
	for _, ws := range h.svc.WorkspaceIDs() {
		h.servers[ws] = h.buildServer(context.Background(), ws)
	}
	if opts.ToolNames == NamesCanonical {
		h.warnColonNames()
	}
	streamable := sdk.NewStreamableHTTPHandler(func(r *http.Request) *sdk.Server {
		p, ok := principalFrom(r.Context())
		if !ok {
			return nil
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		if ws := h.servers[p.Workspace]; ws != nil {
			return ws.server
		}
		return nil
	}, &sdk.StreamableHTTPOptions{Stateless: true, JSONResponse: true, MaxRequestBodyBytes: MaxBodyBytes})
	verifier := func(ctx context.Context, token string, r *http.Request) (*auth.TokenInfo, error) {
		p, ok := principalFrom(ctx)
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: p.KeyID, Extra: map[string]any{"workspace": p.Workspace, "kind": string(p.Kind)}}, nil
	}
	h.sdk = auth.RequireBearerToken(verifier, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(streamable)
	return h, nil
}

// callKey finds a request's callInfo in its context.
type callKey struct{}

// callInfo is what the front door hands the tools of one request: who
// called, the base URL links are made from, and the answer's writer (whose
// write deadline a tool that waits moves).
type callInfo struct {
	p       ladder.Principal
	baseURL string
	w       http.ResponseWriter
}

// callContext carries a request's callInfo. It is one allocation where
// three context values and a closure were four, on every call.
type callContext struct {
	context.Context
	info callInfo
}

// Value implements context.Context.
func (c *callContext) Value(key any) any {
	if key == (callKey{}) {
		return &c.info
	}
	return c.Context.Value(key)
}

// withCall returns ctx carrying info for the request's tools.
func withCall(ctx context.Context, info callInfo) context.Context {
	return &callContext{Context: ctx, info: info}
}

// callFrom returns the request's callInfo, if the front door set one.
func callFrom(ctx context.Context) (*callInfo, bool) {
	c, ok := ctx.Value(callKey{}).(*callInfo)
	return c, ok
}

func principalFrom(ctx context.Context) (ladder.Principal, bool) {
	if c, ok := callFrom(ctx); ok {
		return c.p, true
	}
	return ladder.Principal{}, false
}

// envelope is a JSON-RPC request as the front door reads it.
type envelope struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`
	// argsFault is a strict-JSON fault inside a tools/call's arguments (a
	// duplicate or case-variant key, a number beyond float64), with its
	// path relative to the arguments. The rest of the request is sound, so
	// it is answered as a bad argument, an isError result the model can
	// act on, once the caller is known.
	argsFault *strictjson.Error
}

// readBody reads r's body, at most MaxBodyBytes of it. A body ladder's
// HTTP server has read already at its door says so with a Bytes method,
// and is taken as it is instead of being copied again.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if rb, ok := r.Body.(interface{ Bytes() ([]byte, error) }); ok {
		body, err := rb.Bytes()
		if err == nil && len(body) > MaxBodyBytes {
			err = &http.MaxBytesError{Limit: MaxBodyBytes}
		}
		return body, err
	}
	return io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		// Stateless: no GET stream and no session to DELETE.
		w.Header().Set("Allow", "POST")
		h.writeRPCError(w, http.StatusMethodNotAllowed, nil, &ladder.Error{Code: ladder.CodeInvalidArgument, Message: "Use POST for MCP requests.", Hint: "this server is stateless: POST each JSON-RPC request to /mcp"})
		return
	}
	if err := h.checkOrigin(r); err != nil {
		h.writeRPCError(w, http.StatusForbidden, nil, err)
		return
	}
	body, err := readBody(w, r)
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			h.writeRPCError(w, http.StatusRequestEntityTooLarge, nil, &ladder.Error{Code: ladder.CodeBodyTooLarge, Message: "The request body is over 1 MiB.", Hint: "send a request body of at most 1 MiB"})
			return
		}
		h.writeRPCError(w, http.StatusBadRequest, nil, &ladder.Error{Code: ladder.CodeInvalidJSON, Message: "Could not read the body.", Hint: "resend the request"})
		return
	}
	env, perr := parseEnvelope(body)
	if perr != nil {
		h.writeRPCError(w, http.StatusBadRequest, env.ID, perr)
		return
	}
	if h.tracer != nil {
		var sp tracing.Span
		r, sp = h.startSpan(r, env)
		defer sp.End(nil)
	}
	if verr := checkProtocolVersion(r); verr != nil {
		h.writeRPCError(w, http.StatusBadRequest, env.ID, verr)
		return
	}
	p, hinted, aerr := h.authenticate(r)
	if aerr == nil && hinted && env.Method != "tools/call" {
		// Only a tools/call's writes check a hinted key at their commit.
		aerr, hinted = h.confirmKey(r.Context(), p), false
	}
	if aerr != nil {
		h.refuseKey(w, r, env.ID, aerr)
		return
	}
	if lerr := h.svc.Admit(p); lerr != nil {
		e := ladder.AsError(lerr)
		if ra, ok := e.Data["retry_after_seconds"]; ok {
			w.Header().Set("Retry-After", fmt.Sprint(ra))
		}
		// 200 with a JSON-RPC error, so MCP clients hand the refusal and its
		// data.retry_after_seconds to the agent.
		h.writeRPCError(w, http.StatusOK, env.ID, e)
		return
	}
	if cerr := checkListCursor(env); cerr != nil {
		status := http.StatusOK
		if mcpwire.HeaderValue(r.Header, mcpwire.HeaderProtocolVersion) == mcpwire.StatelessProtocol {
			status = http.StatusBadRequest // as the SDK maps -32602 for 2026-07-28
		}
		h.writeRPCError(w, status, env.ID, cerr)
		return
	}
	if env.Method == "tools/list" {
		h.refresh(r.Context(), p.Workspace)
	}
	ctx := withCall(r.Context(), callInfo{p: p, baseURL: h.baseURLFor(r), w: w})
	if env.Method == "tools/call" {
		cp, registered, run, cerr := h.checkToolCall(p, env)
		fast := cerr == nil && env.argsFault == nil && !h.sdkOnly && mcpwire.PlainCall(r, env.ID, cp)
		if hinted && !fast {
			if kerr := h.confirmKey(r.Context(), p); kerr != nil {
				h.refuseKey(w, r, env.ID, kerr)
				return
			}
			hinted = false
		}
		if cerr != nil {
			h.writeRPCError(w, http.StatusOK, env.ID, cerr)
			return
		}
		if env.argsFault != nil {
			// The SDK would read these arguments loosely, so the front door
			// answers; the tool does not run.
			h.answerCall(ctx, w, r, h.refuseArguments(registered, env.argsFault), p, env.ID, nil)
			return
		}
		if fast {
			if hinted {
				ctx, run = h.checkedRun(ctx, run, p)
			}
			h.serveCall(ctx, w, r, run, p, env.ID, cp.Arguments)
			return
		}
		if registered != cp.Name {
			rewritten, rerr := renameTool(body, registered)
			if rerr != nil {
				h.writeRPCError(w, http.StatusOK, env.ID, rerr)
				return
			}
			body = rewritten
			// The 2026-07-28 transport repeats the tool name in Mcp-Name;
			// keep it equal to the rewritten body.
			if mcpwire.HeaderValue(r.Header, mcpwire.HeaderName) != "" {
				r.Header.Set(mcpwire.HeaderName, registered)
			}
		}
	}
	if mcpwire.HeaderValue(r.Header, "Authorization") == "" {
		// OpenWorkspace mode: the SDK's bearer check wants a header.
		r.Header.Set("Authorization", "Bearer open-test")
	}
	r = r.WithContext(ctx)
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	h.sdk.ServeHTTP(w, r)
}

// startSpan starts the MCP server span of one JSON-RPC request, under the
// HTTP request's: "{method} {tool}" with the MCP conventions' attributes.
// The session id is recorded as a hash (tracing.SessionID). A client that
// sent its trace context in params._meta and not in the HTTP headers (as
// the MCP conventions have clients do) gets its trace continued there: the
// MCP span's parent is the _meta one, linked to the HTTP request's span.
func (h *Handler) startSpan(r *http.Request, env envelope) (*http.Request, tracing.Span) {
	var params struct {
		Name string         `json:"name"`
		Meta map[string]any `json:"_meta"`
	}
	_ = json.Unmarshal(env.Params, &params)
	var tool string
	if env.Method == "tools/call" {
		tool = params.Name
	}
	ctx := r.Context()
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)}
	if h.opts.Propagator != nil && len(params.Meta) > 0 && r.Header.Get("traceparent") == "" {
		carrier := propagation.MapCarrier{}
		for k, v := range params.Meta {
			if s, ok := v.(string); ok {
				carrier[k] = s
			}
		}
		if sc := trace.SpanContextFromContext(h.opts.Propagator.Extract(context.Background(), carrier)); sc.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: trace.SpanContextFromContext(ctx)}))
			ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
		}
	}
	ctx, sp := tracing.Start(ctx, h.tracer, tracing.MCPSpanName(env.Method, tool), opts...)
	if sp.Recording() {
		sp.Set(tracing.MCPMethodName.String(env.Method), tracing.NetworkTransport.String("tcp"))
		if len(env.ID) > 0 {
			sp.Set(tracing.JSONRPCRequestID.String(strings.Trim(string(env.ID), `"`)))
		}
		if tool != "" {
			sp.Set(tracing.GenAIToolName.String(tool), tracing.GenAIOperation.String("execute_tool"))
		}
		if v := mcpwire.HeaderValue(r.Header, mcpwire.HeaderProtocolVersion); v != "" {
			sp.Set(tracing.MCPProtocol.String(v))
		}
		if id := mcpwire.HeaderValue(r.Header, mcpwire.HeaderSessionID); id != "" {
			sp.Set(tracing.MCPSessionID.String(tracing.SessionID(id)))
		}
	}
	return r.WithContext(ctx), sp
}

// argumentsPath is where a tools/call's arguments are, in strictjson's
// path notation.
const argumentsPath = "params.arguments"

// parseEnvelope checks the body strictly and reads the JSON-RPC envelope.
// A strict-JSON fault inside a tools/call's arguments does not refuse the
// request here: it comes back in env.argsFault (see envelope).
func parseEnvelope(body []byte) (envelope, *ladder.Error) {
	var env envelope
	var badJSON *ladder.Error // a fault in the id, for checkID to answer
	if err := strictjson.Check(body); err != nil {
		se, _ := err.(*strictjson.Error)
		fault, inArgs := argumentsFault(body, se)
		switch {
		case inArgs:
			env.argsFault = fault
		case stringIDFault(body, se):
			// An unpaired surrogate in a string id: refused below as
			// every id that cannot come back unchanged is, with the id
			// echoed, on every path alike.
			badJSON = &ladder.Error{Code: ladder.CodeInvalidJSON, Message: "The request is not valid strict JSON.", Hint: err.Error()}
		default:
			return env, &ladder.Error{Code: ladder.CodeInvalidJSON, Message: "The request is not valid strict JSON.", Hint: err.Error()}
		}
	}
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return env, &ladder.Error{Code: ladder.CodeInvalidArgument, Message: "The body is not one JSON-RPC request object.", Hint: "send one JSON-RPC request object (batches are not part of MCP)", RPCCode: jsonrpc.CodeInvalidRequest}
	}
	if err := unmarshalEnvelope(body, &env); err != nil {
		// Recover the id for the error if the envelope is otherwise
		// readable; only the key "id" itself, which Check saw once.
		var loose map[string]json.RawMessage
		_ = json.Unmarshal(body, &loose)
		env.ID = mcpwire.EchoID(loose["id"])
		return env, &ladder.Error{Code: ladder.CodeInvalidArgument, Message: "The JSON-RPC envelope is not valid.", Hint: "JSON-RPC envelope: " + err.Error(), RPCCode: jsonrpc.CodeInvalidRequest}
	}
	if ierr := checkID(env.ID); ierr != nil {
		env.ID = mcpwire.EchoID(env.ID)
		return env, ierr
	}
	if badJSON != nil {
		return envelope{}, badJSON // checkID and Check disagree on the id: refuse anyway
	}
	if env.JSONRPC != mcpwire.Version || env.Method == "" {
		return env, &ladder.Error{Code: ladder.CodeInvalidArgument, Message: "The JSON-RPC envelope lacks \"jsonrpc\": \"2.0\" or a method.", Hint: `send "jsonrpc": "2.0" and a method`, RPCCode: jsonrpc.CodeInvalidRequest}
	}
	if env.argsFault != nil && (env.Method != "tools/call" || len(env.ID) == 0 || string(env.ID) == "null") {
		// Not a call whose answer could carry an isError result: the fault
		// is the body's.
		f := env.argsFault
		return envelope{}, &ladder.Error{Code: ladder.CodeInvalidJSON, Message: "The tool arguments are not valid strict JSON.", Hint: (&strictjson.Error{Path: joinArgs(f.Path), Problem: f.Problem}).Error()}
	}
	return env, nil
}

// argumentsFault reports whether Check's fault se lies inside the
// tools/call arguments while the rest of body is strict JSON, and returns
// it with its path relative to the arguments.
func argumentsFault(body []byte, se *strictjson.Error) (*strictjson.Error, bool) {
	if se == nil || !strings.HasPrefix(se.Path, argumentsPath) {
		return nil, false
	}
	rel := se.Path[len(argumentsPath):]
	if rel != "" && rel[0] != '.' && rel[0] != '[' {
		return nil, false // a sibling key that starts alike, e.g. params.argumentsX
	}
	if _, err := strictjson.CheckHolding(body, argumentsPath); err != nil {
		return nil, false // the envelope has a fault of its own
	}
	return &strictjson.Error{Path: strings.TrimPrefix(rel, "."), Problem: se.Problem}, true
}

// stringIDFault reports whether Check's fault se is in a string id while
// the rest of body is strict JSON. The only fault Check finds in a string
// is an unpaired surrogate escape, which checkID refuses as well.
func stringIDFault(body []byte, se *strictjson.Error) bool {
	if se == nil || se.Path != "id" {
		return false
	}
	id, err := strictjson.CheckHolding(body, "id")
	return err == nil && len(id) > 0 && id[0] == '"'
}

// joinArgs is an arguments-relative path as a path in the body.
func joinArgs(rel string) string {
	if rel == "" || rel[0] == '[' {
		return argumentsPath + rel
	}
	return argumentsPath + "." + rel
}

// refuseArguments is a tool run that refuses the call's arguments with the
// strict-JSON fault found in them, as decodeArgs refuses a fault it finds:
// an isError result naming the field.
func (h *Handler) refuseArguments(tool string, fault *strictjson.Error) toolRun {
	field := fault.Path
	if field == "" {
		field = "arguments"
	}
	e := &ladder.Error{Code: ladder.CodeInvalidArgument, Message: "Invalid arguments: " + fault.Error() + ".",
		Hint: "fix the field and call again; nothing was run or recorded", Data: map[string]any{"field": field}}
	return h.runner(tool, func(context.Context, ladder.Principal, json.RawMessage) (string, any, error) {
		return "", nil, e
	})
}

// protocolVersions are the MCP versions the front door and the SDK accept
// in the MCP-Protocol-Version header, newest first.
var protocolVersions = sdk.SupportedProtocolVersions()

// checkProtocolVersion refuses an MCP-Protocol-Version header naming a
// version this server does not speak. The spec answers that with 400 Bad
// Request; the SDK would write it as text/plain (or, for a value that sorts
// after 2026-07-28, as an unrelated _meta complaint), so the front door
// answers first with the 2026-07-28 UnsupportedProtocolVersion error, whose
// data.supported clients read to pick another version. An initialize that
// asks for an unknown version in its body is not refused: the lifecycle
// spec has the server answer it with a version it speaks.
func checkProtocolVersion(r *http.Request) *ladder.Error {
	v := mcpwire.HeaderValue(r.Header, mcpwire.HeaderProtocolVersion)
	if v == "" || slices.Contains(protocolVersions, v) {
		return nil
	}
	if len(v) > 64 {
		v = v[:64] // a header can run to kilobytes; a version is ten bytes
	}
	return &ladder.Error{Code: ladder.CodeUnsupportedProtocol, Message: fmt.Sprintf("MCP protocol version %q is not supported.", v),
		Hint: "send MCP-Protocol-Version with one of " + strings.Join(protocolVersions, ", ") + " (the version initialize negotiated); nothing was run",
		Data: map[string]any{"supported": protocolVersions, "requested": v}}
}

// listMethods are the list requests the SDK pages with a cursor.
var listMethods = map[string]bool{"tools/list": true, "prompts/list": true, "resources/list": true, "resources/templates/list": true}

// checkListCursor refuses any cursor sent with a list request. ladder
// lists a workspace's tools on one page (buildServer sizes the page to
// hold them all) and serves no prompts or resources, so it never issues a
// cursor: a cursor that arrives is forged, truncated, another server's or
// garbage. The SDK would answer some of those with a bare -32602 and take
// a forged one that decodes as a place to start from.
func checkListCursor(env envelope) *ladder.Error {
	if !listMethods[env.Method] || len(env.Params) == 0 {
		return nil
	}
	var params map[string]json.RawMessage
	if json.Unmarshal(env.Params, &params) != nil {
		return nil // not an object: the SDK's invalid params
	}
	cursor, ok := params["cursor"]
	if !ok || string(cursor) == "null" || string(cursor) == `""` {
		return nil // no cursor: the first (and only) page
	}
	return &ladder.Error{Code: ladder.CodeBadCursor, Message: "The cursor is not one this server issued.",
		Hint: env.Method + " returns everything on one page and issues no cursor (its nextCursor is always absent); call " + env.Method + " again without a cursor",
		Data: map[string]any{"field": "params.cursor"}}
}

// checkOrigin refuses browser requests from origins other than the
// server's own host and the configured ones (DNS rebinding protection; the
// SDK also refuses non-localhost Host headers arriving on loopback).
func (h *Handler) checkOrigin(r *http.Request) *ladder.Error {
	if lhttp.OriginAllowed(mcpwire.HeaderValue(r.Header, "Origin"), r.Host, h.opts.AllowedOrigins) {
		return nil
	}
	return &ladder.Error{Code: ladder.CodeOriginRefused, Message: "The request's Origin is not allowed to call /mcp.", Hint: "this origin is not allowed to call /mcp; add it to server.allowed_origins"}
}

// authenticate resolves the caller and refuses anything but an agent key.
// authenticate returns the request's principal, and hinted when its key
// came from the service's view of verified keys (AuthenticateHint at the
// front door): then the request's writes must run under
// ladder.RequireActiveKey and its key be confirmed before any other
// answer (checkedRun, confirmKey).
func (h *Handler) authenticate(r *http.Request) (_ ladder.Principal, hinted bool, _ *ladder.Error) {
	token, berr := ladder.BearerToken(mcpwire.HeaderValue(r.Header, "Authorization"))
	if token == "" && h.opts.OpenWorkspace != "" && isLoopback(r.RemoteAddr) {
		return ladder.Principal{KeyID: "open-test", Workspace: h.opts.OpenWorkspace, Kind: ladder.KeyAgent}, false, nil
	}
	if berr != nil {
		return ladder.Principal{}, false, berr
	}
	p, hinted, verified := ladder.VerifiedKey(r.Context(), token)
	if !verified {
		var err error
		if p, err = h.svc.Authenticate(r.Context(), token); err != nil {
			return p, false, ladder.AsError(err)
		}
	}
	if kerr := ladder.CheckKeyKind(p, ladder.KeyAgent); kerr != nil {
		// The refusal is the shared check's; MCP answers with the bare name
		// as message (seed 004) and a hint that says where people go.
		kerr.Message = string(kerr.Code)
		kerr.Hint = "use an agent key of this workspace on /mcp"
		if kerr.Code == ladder.CodeHumanKeyRefused {
			kerr.Hint = "the MCP surface is for agents: use an agent key of this workspace; people approve and review in the console or over REST"
		}
		return p, false, kerr
	}
	return p, hinted, nil
}

// confirmKey reads a hinted key from the store: nil while it is active,
// else the refusal of an invalid key.
func (h *Handler) confirmKey(ctx context.Context, p ladder.Principal) *ladder.Error {
	if err := h.svc.ConfirmKey(ctx, p); err != nil {
		return ladder.AsError(err)
	}
	return nil
}

// keyRefused is a tool run's refusal of a key found revoked or expired
// after the front door took it from the view of verified keys: answered as
// the front door answers an invalid key (refuseKey), not as a tool's
// error.
type keyRefused struct{ e *ladder.Error }

func (k keyRefused) Error() string { return k.e.Error() }

// checkedRun runs a tools/call of a hinted key: its writes commit only
// while the key is active (ladder.RequireActiveKey), and unless one of
// them committed (and none was refused) the key is confirmed from the
// store before the answer. A refusal of the run is counted only when it
// is the answer, not when the key's refusal replaces it, so
// ladder_refusals_total counts each answered refusal once.
func (h *Handler) checkedRun(ctx context.Context, run toolRun, p ladder.Principal) (context.Context, toolRun) {
	ctx, kc := ladder.RequireActiveKey(ctx, p.KeyID)
	return ctx, func(ctx context.Context, p ladder.Principal, args json.RawMessage) (*sdk.CallToolResult, error) {
		held := &heldRefusal{Context: ctx}
		res, err := run(held, p, args)
		if !kc.Confirmed() || kc.Refused() {
			if kerr := h.confirmKey(ctx, p); kerr != nil {
				return nil, keyRefused{kerr}
			}
		}
		if held.code != "" {
			h.countRefusal(ctx, held.code)
		}
		return res, err
	}
}

type heldRefusalKey struct{}

// heldRefusal is the context of a checked run, holding the run's refusal
// until checkedRun knows it is the answer: one allocation a call, where
// context.WithValue and the holder would be two.
type heldRefusal struct {
	context.Context
	code ladder.Code
}

// Value finds the holder under heldRefusalKey and the rest in the parent.
func (c *heldRefusal) Value(key any) any {
	if key == (heldRefusalKey{}) {
		return c
	}
	return c.Context.Value(key)
}

// countRefusal counts a tool run's refusal in ladder_refusals_total, or
// holds it for checkedRun.
func (h *Handler) countRefusal(ctx context.Context, code ladder.Code) {
	if held, ok := ctx.Value(heldRefusalKey{}).(*heldRefusal); ok {
		held.code = code
		return
	}
	h.refusals.WithLabelValues("mcp", string(code)).Inc()
}

// refuseKey answers a request whose key the server does not accept, with
// the HTTP status of the refusal and, for a 401, the challenge.
func (h *Handler) refuseKey(w http.ResponseWriter, r *http.Request, id json.RawMessage, e *ladder.Error) {
	status := lhttp.Status(e.Code)
	challenge := h.opts.Challenge
	if challenge == nil {
		challenge = lhttp.DefaultChallenge
	}
	if status == http.StatusUnauthorized || e.Code == ladder.CodeScopeMissing {
		w.Header().Set("WWW-Authenticate", challenge(r.URL.Path, e))
	}
	h.writeRPCError(w, status, id, e)
}

func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkToolCall refuses a tool the workspace does not serve; it returns the
// call's params, the registered name of the tool (an accepted alternate
// name, portable or canonical, maps to it) and the tool's run.
func (h *Handler) checkToolCall(p ladder.Principal, env envelope) (mcpwire.CallParams, string, toolRun, *ladder.Error) {
	var cp mcpwire.CallParams
	// The whole body passed strictjson.Check in parseEnvelope.
	if err := unmarshalCallParams(env.Params, &cp); err != nil {
		return cp, "", nil, &ladder.Error{Code: ladder.CodeInvalidArgument, Message: "The tools/call params are not valid.", Hint: "tools/call params: " + err.Error()}
	}
	h.mu.Lock()
	ws := h.servers[p.Workspace]
	h.mu.Unlock()
	if ws == nil {
		return cp, "", nil, &ladder.Error{Code: ladder.CodeWorkspaceRefused, Message: "This key's workspace is not served here.", Hint: "this key's workspace is not served here"}
	}
	registered, ok := ws.names[cp.Name]
	if !ok {
		if e := h.notServed(p.Workspace, cp.Name); e != nil {
			return cp, "", nil, e
		}
		return cp, "", nil, &ladder.Error{Code: ladder.CodeUnknownCapability, Message: "There is no tool of that name in this workspace.", Hint: fmt.Sprintf("no tool %q in this workspace; call tools/list to see the tools this key may call", cp.Name)}
	}
	return cp, registered, ws.calls[registered], nil
}

// renameTool rewrites a tools/call body to call the tool by its registered
// name, for the SDK.
func renameTool(body []byte, registered string) ([]byte, *ladder.Error) {
	var generic map[string]any
	if err := json.Unmarshal(body, &generic); err != nil {
		return nil, &ladder.Error{Code: ladder.CodeInvalidJSON, Message: "The tools/call params are not valid JSON.", Hint: err.Error()}
	}
	generic["params"].(map[string]any)["name"] = registered
	out, err := json.Marshal(generic)
	if err != nil {
		return nil, &ladder.Error{Code: ladder.CodeInternal, Message: "The tools/call request could not be re-encoded, so nothing was done.", Hint: "retry"}
	}
	return out, nil
}

// baseURLFor is this server's public URL for links in answers.
func (h *Handler) baseURLFor(r *http.Request) string {
	if h.opts.BaseURL != "" {
		return h.opts.BaseURL
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// notServed answers a call to a capability declared in the config but not
// served yet.
func (h *Handler) notServed(workspace, name string) *ladder.Error {
	w, ok := h.svc.Workspace(workspace)
	if !ok {
		return nil
	}
	for _, c := range w.Capabilities {
		if !c.Served && (c.ID == name || portable(c.ID) == name) {
			return &ladder.Error{Code: ladder.CodeCapabilityNotServed, Message: "The capability is declared but not served yet, so nothing was done.", Hint: fmt.Sprintf("%s is declared but not served yet; it cannot be called until the operator serves it", c.ID)}
		}
	}
	return nil
}

// warnColonNames says once, at start-up, that canonical capability tool
// names carry ':' (the go-sdk would say so as an error on every rebuild).
func (h *Handler) warnColonNames() {
	var names []string
	for _, ws := range h.svc.WorkspaceIDs() {
		w, _ := h.svc.Workspace(ws)
		for _, c := range w.Capabilities {
			if c.Served && strings.Contains(c.ID, ":") {
				names = append(names, c.ID)
			}
		}
	}
	if len(names) > 0 {
		h.log.Warn("capability tools are named by their ids, which contain ':'; MCP recommends tool names of letters, digits, '_', '-' and '.', and a client that enforces it will not list them — start with --tool-names portable to serve ticket6_readLedger-style names (calls accept both)",
			"tools", strings.Join(names, ", "))
	}
}

// portable spells a capability id in the portable tool-name form.
func portable(id string) string { return strings.ReplaceAll(id, ":", "_") }

// errorData is the data of every refusal: the refusal name, the sentence
// and the hint, plus any detail the refusal carries.
func errorData(e *ladder.Error) map[string]any {
	e = e.Render(ladder.SurfaceMCP)
	data := map[string]any{"code": e.Code, "hint": e.Hint}
	if e.Message != "" && e.Message != string(e.Code) {
		data["message"] = e.Message
	}
	for k, v := range e.Data {
		data[k] = v
	}
	return data
}

// writeRPCError writes a JSON-RPC error whose message and data.code are the
// refusal name, echoing the request id (clients ignore an error whose id
// is null).
func (h *Handler) writeRPCError(w http.ResponseWriter, status int, id json.RawMessage, e *ladder.Error) {
	h.refusals.WithLabelValues("mcp", string(e.Code)).Inc()
	if len(id) == 0 {
		id = json.RawMessage("null") // the member is required in an error response
	}
	w.Header().Set("Content-Type", mcpwire.ContentTypeJSON)
	w.WriteHeader(status)
	// The data is encoded apart, and as the SDK encodes (HTML unescaped),
	// because go-sdk's error type holds it as raw JSON.
	data, err := mcpwire.Encode(errorData(e))
	if err != nil {
		// Only a refusal carrying a value JSON cannot hold gets here; the
		// status alone answers, as when the whole body was one encode.
		h.log.Error("encoding a JSON-RPC refusal", "code", e.Code, "err", err)
		return
	}
	body, err := mcpwire.Encode(mcpwire.Message[json.RawMessage]{JSONRPC: mcpwire.Version, ID: id,
		Error: &jsonrpc.Error{Code: int64(rpcCode(e)), Message: string(e.Code), Data: data}})
	if err != nil {
		h.log.Error("encoding a JSON-RPC refusal", "code", e.Code, "err", err)
		return
	}
	// The front door's answers end in a newline, as json.Encoder wrote them
	// before the wire package did.
	_, _ = w.Write(append(body, '\n'))
}

// minLevel passes on only the records at or above min, so the SDK's
// per-request session chatter (Info) stays out of the log while its
// warnings and errors stay in — all but its complaint about ':' in tool
// names, which New replaces with one warning that says what to do.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (m minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= m.min && m.Handler.Enabled(ctx, l)
}

// colonNameComplaint starts the SDK's error for a tool name outside
// [A-Za-z0-9_.-], logged on every (re)build of a workspace's tools.
const colonNameComplaint = "AddTool: invalid tool name"

func (m minLevel) Handle(ctx context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, colonNameComplaint) && strings.Contains(r.Message, `contains invalid characters: ":"`) {
		return nil
	}
	return m.Handler.Handle(ctx, r)
}

func (m minLevel) WithAttrs(attrs []slog.Attr) slog.Handler {
	return minLevel{m.Handler.WithAttrs(attrs), m.min}
}

func (m minLevel) WithGroup(name string) slog.Handler {
	return minLevel{m.Handler.WithGroup(name), m.min}
}

// toRPCError turns a refusal inside a tool into the JSON-RPC error the SDK
// sends.
func toRPCError(e *ladder.Error) error {
	data, _ := json.Marshal(errorData(e))
	return &jsonrpc.Error{Code: int64(rpcCode(e)), Message: string(e.Code), Data: data}
}

// refresh rebuilds a workspace's tools when a lane that a capability's
// description mentions has changed since they were built, so tools/list
// always tells the lane as it is now.
func (h *Handler) refresh(ctx context.Context, workspace string) {
	sig := h.laneSignature(ctx, workspace)
	h.mu.Lock()
	cur := h.servers[workspace]
	h.mu.Unlock()
	if cur == nil || cur.lanes == sig {
		return
	}
	ws := h.buildServer(ctx, workspace)
	h.mu.Lock()
	h.servers[workspace] = ws
	h.mu.Unlock()
}

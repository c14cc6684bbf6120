// Package tracing is what the instrumented packages share of
// OpenTelemetry: the attribute names (the MCP semantic conventions' and
// ladder's own), the span names, and a Start that costs nothing when
// tracing is off. It uses the OpenTelemetry API only; the SDK and the
// exporters are package telemetry's, wired by cmd/ladder.
//
// Off means a nil trace.TracerProvider: Tracer returns nil and Start hands
// back the context it was given and a Span that does nothing, so the hot
// paths derive no context and allocate nothing. Callers set attributes
// only under Span.Recording, so building them costs nothing either.
package tracing

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/ladderhq/ladder"
)

// Scope is the instrumentation scope of every ladder span.
const Scope = "github.com/ladderhq/ladder"

// Span names. The request's own span is otelhttp's ("POST /mcp"); the MCP
// spans are named as the MCP conventions say, "{mcp.method.name} {target}"
// (MCPSpanName).
const (
	SpanAuthenticate = "ladder.authenticate"
	SpanRoute        = "ladder.route"
	SpanGate         = "ladder.gate"
	SpanAuditWrite   = "ladder.audit.write"
	SpanGroupCommit  = "ladder.groupcommit.wait"
	SpanUpstreamHTTP = "ladder.upstream POST"
)

// Attribute keys from the OpenTelemetry MCP semantic conventions
// (gen-ai/mcp.md) and JSON-RPC's.
const (
	MCPMethodName    attribute.Key = "mcp.method.name"
	MCPSessionID     attribute.Key = "mcp.session.id"
	MCPProtocol      attribute.Key = "mcp.protocol.version"
	JSONRPCRequestID attribute.Key = "jsonrpc.request.id"
	GenAIToolName    attribute.Key = "gen_ai.tool.name"
	GenAIOperation   attribute.Key = "gen_ai.operation.name"
	NetworkTransport attribute.Key = "network.transport"
	ErrorType        attribute.Key = "error.type"
)

// ladder's own attribute keys.
const (
	Workspace      attribute.Key = "ladder.workspace"
	Step           attribute.Key = "ladder.step" // queue/step
	Lane           attribute.Key = "ladder.lane"
	Decision       attribute.Key = "ladder.decision"
	RouteID        attribute.Key = "ladder.route_id"
	Capability     attribute.Key = "ladder.capability"
	CallID         attribute.Key = "ladder.call_id"
	KeyID          attribute.Key = "ladder.key_id"
	GateState      attribute.Key = "ladder.gate.state"
	GateDecisionID attribute.Key = "ladder.gate.decision_id"
	Executor       attribute.Key = "ladder.executor"
	BatchSize      attribute.Key = "ladder.groupcommit.batch_size"
)

// MCPSpanName is the MCP conventions' span name: the method, then the
// tool when there is one. Both come from the caller, so a part longer
// than any real method or tool name is left out of the name (the
// attributes still carry it): a span name is for grouping, and a caller
// must not fill it with a kilobyte of text.
func MCPSpanName(method, tool string) string {
	const longest = 128
	if len(method) > longest {
		method = "(long method)"
	}
	if tool == "" || len(tool) > longest {
		return method
	}
	return method + " " + tool
}

// SessionID is how an MCP session id is recorded: the first 16 hex digits
// of its SHA-256. A session id lets whoever holds it speak in the
// session, so the trace backend gets a stable handle, not the id.
func SessionID(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:8])
}

// Tracer returns ladder's tracer of tp, or nil when tp is nil (off).
func Tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		return nil
	}
	return tp.Tracer(Scope)
}

// Span is a span that may be absent (tracing off); its methods then do
// nothing.
type Span struct{ s trace.Span }

// Start starts a span under ctx's, or returns ctx and an absent Span when
// t is nil.
func Start(ctx context.Context, t trace.Tracer, name string, opts ...trace.SpanStartOption) (context.Context, Span) {
	if t == nil {
		return ctx, Span{}
	}
	ctx, s := t.Start(ctx, name, opts...)
	return ctx, Span{s}
}

// Child starts a span under the one ctx carries, with that span's own
// provider, when it is recording; otherwise it returns ctx and an absent
// Span. Packages that run under a caller's span but are not handed a
// provider (the group commit, shared by every caller of a store) use it.
func Child(ctx context.Context, name string) (context.Context, Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, Span{}
	}
	ctx, s := parent.TracerProvider().Tracer(Scope).Start(ctx, name)
	return ctx, Span{s}
}

// Recording reports whether attributes set on the span are kept: callers
// build attributes only when it is true.
func (s Span) Recording() bool { return s.s != nil && s.s.IsRecording() }

// Set sets attributes; call it under Recording.
func (s Span) Set(kv ...attribute.KeyValue) {
	if s.s != nil {
		s.s.SetAttributes(kv...)
	}
}

// End ends the span, marking it failed when err is not nil: error.type
// is a refusal's code and the status its sentence. A refusal's cause is
// left out, since it may quote what an upstream answered; the call record
// keeps it.
func (s Span) End(err error) {
	if s.s == nil {
		return
	}
	if err != nil && s.s.IsRecording() {
		kind, desc := "_OTHER", err.Error()
		var le *ladder.Error
		if errors.As(err, &le) {
			kind, desc = string(le.Code), string(le.Code)+": "+le.Message
		}
		s.s.SetAttributes(ErrorType.String(kind))
		s.s.SetStatus(codes.Error, desc)
	}
	s.s.End()
}

// Raw is the underlying span, nil when absent.
func (s Span) Raw() trace.Span { return s.s }

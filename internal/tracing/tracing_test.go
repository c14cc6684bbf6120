package tracing_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/internal/tracing"
)

// TestOffAllocatesNothing: with tracing off (a nil provider) a span's
// start, attribute guard and end allocate nothing, and neither does a
// group-commit child under a context without a span.
func TestOffAllocatesNothing(t *testing.T) {
	tr := tracing.Tracer(nil)
	ctx := context.Background()
	failed := errors.New("x")
	allocs := testing.AllocsPerRun(100, func() {
		c, sp := tracing.Start(ctx, tr, tracing.SpanRoute)
		if sp.Recording() {
			sp.Set(tracing.Workspace.String("w"))
		}
		sp.End(failed)
		_, ch := tracing.Child(c, tracing.SpanGroupCommit)
		ch.End(nil)
	})
	if allocs != 0 {
		t.Errorf("%v allocations per span with tracing off, want 0", allocs)
	}
}

// TestEnd: a failed span carries the refusal's code and sentence, never
// its cause (which may quote an upstream's answer); Child hangs under the
// caller's span with its provider.
func TestEnd(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	tr := tracing.Tracer(tp)
	tests := []struct {
		name      string
		err       error
		wantCode  codes.Code
		wantDesc  string
		wantError string
	}{
		{"ok", nil, codes.Unset, "", ""},
		{"refusal", &ladder.Error{Code: ladder.CodeUpstreamFailed, Message: "The upstream answered HTTP 500.", Err: errors.New("secret-ish upstream body")},
			codes.Error, "UPSTREAM_FAILED: The upstream answered HTTP 500.", "UPSTREAM_FAILED"},
		{"other", errors.New("disk full"), codes.Error, "disk full", "_OTHER"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, sp := tracing.Start(context.Background(), tr, tt.name)
			_, child := tracing.Child(ctx, tracing.SpanGroupCommit)
			child.End(nil)
			sp.End(tt.err)
			ended := rec.Ended()
			parent, kid := ended[len(ended)-1], ended[len(ended)-2]
			if kid.Parent().SpanID() != parent.SpanContext().SpanID() {
				t.Errorf("child's parent %s, want %s", kid.Parent().SpanID(), parent.SpanContext().SpanID())
			}
			got := map[string]string{}
			for _, kv := range parent.Attributes() {
				got[string(kv.Key)] = kv.Value.String()
			}
			if parent.Status().Code != tt.wantCode || parent.Status().Description != tt.wantDesc || got["error.type"] != tt.wantError {
				t.Errorf("status %v %q, error.type %q; want %v %q, %q", parent.Status().Code, parent.Status().Description, got["error.type"], tt.wantCode, tt.wantDesc, tt.wantError)
			}
			if d := cmp.Diff(0, len(parent.Events())); d != "" {
				t.Errorf("events (-want +got):\n%s", d)
			}
		})
	}
}

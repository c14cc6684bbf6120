package telemetry

import (
	"context"
	"strings"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// utf8Exporter repairs strings that are not valid UTF-8 before the OTLP
// exporter marshals a batch. Protobuf refuses such a string, and the
// exporter then drops the whole batch: a caller who sent a header of
// invalid bytes (otelhttp records the user agent) would otherwise erase
// every span exported with theirs. Valid spans, nearly all of them, pass
// as they are.
type utf8Exporter struct{ sdktrace.SpanExporter }

func (e utf8Exporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	var out []sdktrace.ReadOnlySpan // nil while every span so far is valid
	for i, s := range spans {
		if validSpan(s) {
			if out != nil {
				out = append(out, s)
			}
			continue
		}
		if out == nil {
			out = append(make([]sdktrace.ReadOnlySpan, 0, len(spans)), spans[:i]...)
		}
		out = append(out, repairSpan(s))
	}
	if out == nil {
		out = spans
	}
	return e.SpanExporter.ExportSpans(ctx, out)
}

// validSpan reports whether every string of s that a request can reach is
// valid UTF-8: the name, the status, and the attributes of the span and of
// its events and links.
func validSpan(s sdktrace.ReadOnlySpan) bool {
	if !utf8.ValidString(s.Name()) || !utf8.ValidString(s.Status().Description) || !validAttrs(s.Attributes()) {
		return false
	}
	for _, ev := range s.Events() {
		if !utf8.ValidString(ev.Name) || !validAttrs(ev.Attributes) {
			return false
		}
	}
	for _, l := range s.Links() {
		if !validAttrs(l.Attributes) {
			return false
		}
	}
	return true
}

func validAttrs(kvs []attribute.KeyValue) bool {
	for _, kv := range kvs {
		if !utf8.ValidString(string(kv.Key)) {
			return false
		}
		switch kv.Value.Type() {
		case attribute.STRING:
			if !utf8.ValidString(kv.Value.AsString()) {
				return false
			}
		case attribute.STRINGSLICE:
			for _, v := range kv.Value.AsStringSlice() {
				if !utf8.ValidString(v) {
					return false
				}
			}
		}
	}
	return true
}

// repairSpan is s with each invalid byte sequence replaced by U+FFFD.
func repairSpan(s sdktrace.ReadOnlySpan) sdktrace.ReadOnlySpan {
	stub := tracetest.SpanStubFromReadOnlySpan(s)
	stub.Name = fix(stub.Name)
	stub.Status.Description = fix(stub.Status.Description)
	stub.Attributes = fixAttrs(stub.Attributes)
	for i := range stub.Events {
		stub.Events[i].Name = fix(stub.Events[i].Name)
		stub.Events[i].Attributes = fixAttrs(stub.Events[i].Attributes)
	}
	for i := range stub.Links {
		stub.Links[i].Attributes = fixAttrs(stub.Links[i].Attributes)
	}
	return stub.Snapshot()
}

func fix(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

func fixAttrs(kvs []attribute.KeyValue) []attribute.KeyValue {
	out := make([]attribute.KeyValue, len(kvs))
	for i, kv := range kvs {
		k := attribute.Key(fix(string(kv.Key)))
		switch kv.Value.Type() {
		case attribute.STRING:
			out[i] = k.String(fix(kv.Value.AsString()))
		case attribute.STRINGSLICE:
			vs := kv.Value.AsStringSlice()
			for j := range vs {
				vs[j] = fix(vs[j])
			}
			out[i] = k.StringSlice(vs)
		default:
			out[i] = attribute.KeyValue{Key: k, Value: kv.Value}
		}
	}
	return out
}

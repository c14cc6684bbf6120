// Package telemetry sets up OpenTelemetry tracing from the standard OTEL_*
// environment variables: the SDK's tracer provider, its sampler and an
// OTLP exporter (HTTP/protobuf or gRPC). It is the one package that imports
// the SDK and the exporters; the instrumented packages use only the
// OpenTelemetry API through the trace.TracerProvider cmd/ladder hands them.
//
// Tracing is off unless the environment asks for it: with no OTLP endpoint
// and no OTEL_TRACES_EXPORTER, or with OTEL_SDK_DISABLED=true or
// OTEL_TRACES_EXPORTER=none, New returns a Provider whose TracerProvider is
// nil, and the instrumented packages then skip their spans altogether
// (no context is derived, nothing is allocated).
//
// Every variable is read through the getenv New is given, never from the
// process environment directly, and nothing is registered globally
// (otel.SetTracerProvider is never called).
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	noopmetric "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Provider is the tracing set up from the environment.
type Provider struct {
	// TracerProvider makes the spans; nil when tracing is off.
	TracerProvider trace.TracerProvider
	// Propagator reads and writes trace context in headers and _meta
	// (W3C traceparent/tracestate, plus baggage when OTEL_PROPAGATORS
	// names it).
	Propagator propagation.TextMapPropagator
	// Endpoint (without a password) and Protocol say where spans go, for
	// the start-up log.
	Endpoint, Protocol string

	sdk *sdktrace.TracerProvider
}

// Enabled reports whether spans are made.
func (p *Provider) Enabled() bool { return p != nil && p.TracerProvider != nil }

// Shutdown flushes the spans still queued and stops the exporter. It is
// safe on a Provider that is off.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil || p.sdk == nil {
		return nil
	}
	return p.sdk.Shutdown(ctx)
}

// Handler wraps h in otelhttp's server span when tracing is on: a caller's
// traceparent is continued, and the span is named by the method until the
// http package names it by its route. The probes and /metrics are not
// traced. Off, h is returned as it is.
func (p *Provider) Handler(h http.Handler) http.Handler {
	if !p.Enabled() {
		return h
	}
	return otelhttp.NewHandler(h, "ladder",
		otelhttp.WithTracerProvider(p.TracerProvider), otelhttp.WithPropagators(p.Propagator),
		otelhttp.WithMeterProvider(noopmetric.NewMeterProvider()), // metrics are Prometheus's
		otelhttp.WithFilter(func(r *http.Request) bool {
			return r.URL.Path != "/healthz" && r.URL.Path != "/readyz" && r.URL.Path != "/metrics"
		}),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return r.Method }))
}

// Options are what New needs besides the environment.
type Options struct {
	// ServiceName is service.name when OTEL_SERVICE_NAME is unset.
	ServiceName string
	// Version is service.version.
	Version string
}

// New reads the OTEL_* variables through getenv and returns the tracing
// they describe. An unsupported value is an error naming the variable.
func New(ctx context.Context, getenv func(string) string, o Options) (*Provider, error) {
	env := func(k string) string { return strings.TrimSpace(getenv(k)) }
	prop, err := propagator(env("OTEL_PROPAGATORS"))
	if err != nil {
		return nil, err
	}
	off := &Provider{Propagator: prop}
	if strings.EqualFold(env("OTEL_SDK_DISABLED"), "true") {
		return off, nil
	}
	exporter := strings.ToLower(env("OTEL_TRACES_EXPORTER"))
	endpoint := env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	signalEndpoint := endpoint != ""
	if endpoint == "" {
		endpoint = env("OTEL_EXPORTER_OTLP_ENDPOINT")
	}
	switch exporter {
	case "none":
		return off, nil
	case "":
		// The specification's default is otlp to localhost; ladder stays
		// silent until an endpoint or the exporter is named, so a server
		// started without OTEL_* pays nothing and dials nothing.
		if endpoint == "" {
			return off, nil
		}
	case "otlp":
	default:
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: ladder exports traces with otlp (or none)", exporter)
	}
	protocol := env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if protocol == "" {
		protocol = env("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	if protocol == "" {
		protocol = "http/protobuf"
	}
	sampler, err := samplerOf(env("OTEL_TRACES_SAMPLER"), env("OTEL_TRACES_SAMPLER_ARG"))
	if err != nil {
		return nil, err
	}
	headers, err := headersOf(env("OTEL_EXPORTER_OTLP_HEADERS"), env("OTEL_EXPORTER_OTLP_TRACES_HEADERS"))
	if err != nil {
		return nil, err
	}
	timeout, err := timeoutOf(env("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"), env("OTEL_EXPORTER_OTLP_TIMEOUT"))
	if err != nil {
		return nil, err
	}
	gzip := strings.EqualFold(firstOf(env("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION"), env("OTEL_EXPORTER_OTLP_COMPRESSION")), "gzip")

	var exp sdktrace.SpanExporter
	switch protocol {
	case "http/protobuf":
		if endpoint == "" {
			endpoint = "http://localhost:4318"
		}
		if !signalEndpoint {
			// The generic endpoint is a base URL; the signal path goes after
			// it (the specification's rule).
			endpoint = strings.TrimSuffix(endpoint, "/") + "/v1/traces"
		}
		opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(endpoint), otlptracehttp.WithHeaders(headers)}
		if timeout > 0 {
			opts = append(opts, otlptracehttp.WithTimeout(timeout))
		}
		if gzip {
			opts = append(opts, otlptracehttp.WithCompression(otlptracehttp.GzipCompression))
		}
		exp, err = otlptracehttp.New(ctx, opts...)
	case "grpc":
		if endpoint == "" {
			endpoint = "http://localhost:4317"
		}
		if !strings.Contains(endpoint, "://") {
			endpoint = "https://" + endpoint
		}
		opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpointURL(endpoint), otlptracegrpc.WithHeaders(headers)}
		if strings.EqualFold(firstOf(env("OTEL_EXPORTER_OTLP_TRACES_INSECURE"), env("OTEL_EXPORTER_OTLP_INSECURE")), "true") {
			opts = append(opts, otlptracegrpc.WithInsecure())
		}
		if timeout > 0 {
			opts = append(opts, otlptracegrpc.WithTimeout(timeout))
		}
		if gzip {
			opts = append(opts, otlptracegrpc.WithCompressor("gzip"))
		}
		exp, err = otlptracegrpc.New(ctx, opts...)
	default:
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=%q: ladder sends traces over http/protobuf or grpc", protocol)
	}
	if err != nil {
		return nil, fmt.Errorf("otlp trace exporter: %w", err)
	}
	res, err := resourceOf(env, o)
	if err != nil {
		exp.Shutdown(ctx)
		return nil, err
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(utf8Exporter{exp}), sdktrace.WithSampler(sampler), sdktrace.WithResource(res))
	return &Provider{TracerProvider: tp, Propagator: prop, Endpoint: redacted(endpoint), Protocol: protocol, sdk: tp}, nil
}

// redacted is endpoint without a password, for the log.
func redacted(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

func firstOf(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// propagator reads OTEL_PROPAGATORS: tracecontext (the default), baggage,
// or none; others (b3, jaeger) need packages ladder does not carry.
func propagator(v string) (propagation.TextMapPropagator, error) {
	if v == "" {
		return propagation.TraceContext{}, nil
	}
	var ps []propagation.TextMapPropagator
	for _, name := range strings.Split(v, ",") {
		switch strings.ToLower(strings.TrimSpace(name)) {
		case "tracecontext":
			ps = append(ps, propagation.TraceContext{})
		case "baggage":
			ps = append(ps, propagation.Baggage{})
		case "none":
			return propagation.NewCompositeTextMapPropagator(), nil
		case "":
		default:
			return nil, fmt.Errorf("OTEL_PROPAGATORS: %q is not supported; use tracecontext, baggage or none", name)
		}
	}
	if len(ps) == 1 {
		return ps[0], nil
	}
	return propagation.NewCompositeTextMapPropagator(ps...), nil
}

// samplerOf reads OTEL_TRACES_SAMPLER and its argument.
func samplerOf(name, arg string) (sdktrace.Sampler, error) {
	ratio := func() (float64, error) {
		if arg == "" {
			return 1, nil
		}
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			return 0, fmt.Errorf("OTEL_TRACES_SAMPLER_ARG=%q: want a ratio from 0 to 1", arg)
		}
		return r, nil
	}
	switch strings.ToLower(name) {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "traceidratio", "parentbased_traceidratio":
		r, err := ratio()
		if err != nil {
			return nil, err
		}
		if name == "traceidratio" {
			return sdktrace.TraceIDRatioBased(r), nil
		}
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(r)), nil
	}
	return nil, fmt.Errorf("OTEL_TRACES_SAMPLER=%q is not supported; use always_on, always_off, traceidratio or their parentbased_ forms", name)
}

// headersOf reads the W3C-baggage-like list key=value,key=value of
// OTEL_EXPORTER_OTLP_HEADERS, then the traces-only list over it.
func headersOf(lists ...string) (map[string]string, error) {
	h := map[string]string{}
	for _, list := range lists {
		for _, pair := range strings.Split(list, ",") {
			if strings.TrimSpace(pair) == "" {
				continue
			}
			k, v, ok := strings.Cut(pair, "=")
			k = strings.TrimSpace(k)
			if !ok || k == "" {
				return nil, errors.New("OTEL_EXPORTER_OTLP_HEADERS: want key=value pairs separated by commas")
			}
			val, err := url.PathUnescape(strings.TrimSpace(v))
			if err != nil {
				return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_HEADERS: the value of %s: %w", k, err)
			}
			h[k] = val
		}
	}
	return h, nil
}

// timeoutOf reads an export timeout in milliseconds.
func timeoutOf(vs ...string) (time.Duration, error) {
	v := firstOf(vs...)
	if v == "" {
		return 0, nil
	}
	ms, err := strconv.Atoi(v)
	if err != nil || ms < 0 {
		return 0, fmt.Errorf("OTEL_EXPORTER_OTLP_TIMEOUT=%q: want milliseconds", v)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// resourceOf describes this process: service.name (OTEL_SERVICE_NAME, or
// the one in OTEL_RESOURCE_ATTRIBUTES, or o.ServiceName), service.version
// and the OTEL_RESOURCE_ATTRIBUTES pairs.
func resourceOf(env func(string) string, o Options) (*resource.Resource, error) {
	attrs := map[string]string{}
	if ra := env("OTEL_RESOURCE_ATTRIBUTES"); ra != "" {
		h, err := headersOf(ra)
		if err != nil {
			return nil, errors.New("OTEL_RESOURCE_ATTRIBUTES: want key=value pairs separated by commas")
		}
		attrs = h
	}
	name := firstOf(env("OTEL_SERVICE_NAME"), attrs["service.name"], o.ServiceName, "ladder")
	attrs["service.name"] = name
	if o.Version != "" {
		attrs["service.version"] = o.Version
	}
	kvs := make([]attribute.KeyValue, 0, len(attrs))
	for k, v := range attrs {
		kvs = append(kvs, attribute.String(k, v))
	}
	return resource.NewSchemaless(kvs...), nil
}

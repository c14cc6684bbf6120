package telemetry_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/ladderhq/ladder/telemetry"
)

func envOf(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

// TestNew: which environments turn tracing on, where spans go, and which
// values are refused with the variable named.
func TestNew(t *testing.T) {
	tests := []struct {
		name     string
		env      map[string]string
		on       bool
		endpoint string
		protocol string
		err      string // a part of the error; "" for none
	}{
		{name: "nothing set: off", env: nil},
		{name: "a service name alone: off", env: map[string]string{"OTEL_SERVICE_NAME": "x"}},
		{name: "endpoint: http/protobuf to /v1/traces", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/"},
			on: true, endpoint: "http://collector:4318/v1/traces", protocol: "http/protobuf"},
		{name: "traces endpoint as given", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://tempo:4318/otlp/v1/traces", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://other:4318"},
			on: true, endpoint: "http://tempo:4318/otlp/v1/traces", protocol: "http/protobuf"},
		{name: "grpc", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://jaeger:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
			on: true, endpoint: "http://jaeger:4317", protocol: "grpc"},
		{name: "traces protocol over the generic one", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://jaeger:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"},
			on: true, endpoint: "http://jaeger:4317", protocol: "grpc"},
		{name: "exporter otlp without endpoint: localhost", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"},
			on: true, endpoint: "http://localhost:4318/v1/traces", protocol: "http/protobuf"},
		{name: "exporter none", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"}},
		{name: "SDK disabled", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"}},
		{name: "sampler ratio", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.25"},
			on: true, endpoint: "http://c:4318/v1/traces", protocol: "http/protobuf"},
		{name: "headers", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Basic%20abc,x-scope-orgid=1"},
			on: true, endpoint: "http://c:4318/v1/traces", protocol: "http/protobuf"},
		{name: "a password in the endpoint is not shown", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://user:s3cret@otlp.example.com/v1/traces"},
			on: true, endpoint: "https://user:xxxxx@otlp.example.com/v1/traces", protocol: "http/protobuf"},
		{name: "unknown exporter", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, err: "OTEL_TRACES_EXPORTER"},
		{name: "http/json", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, err: "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{name: "unknown sampler", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_SAMPLER": "jaeger_remote"}, err: "OTEL_TRACES_SAMPLER"},
		{name: "ratio out of range", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"}, err: "OTEL_TRACES_SAMPLER_ARG"},
		{name: "bad headers", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_HEADERS": "novalue"}, err: "OTEL_EXPORTER_OTLP_HEADERS"},
		{name: "bad timeout", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_TIMEOUT": "10s"}, err: "OTEL_EXPORTER_OTLP_TIMEOUT"},
		{name: "b3 propagator", env: map[string]string{"OTEL_PROPAGATORS": "b3"}, err: "OTEL_PROPAGATORS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := telemetry.New(context.Background(), envOf(tt.env), telemetry.Options{Version: "test"})
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want one naming %s", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer p.Shutdown(context.Background())
			if p.Enabled() != tt.on {
				t.Fatalf("enabled %v, want %v", p.Enabled(), tt.on)
			}
			if p.Propagator == nil {
				t.Error("no propagator")
			}
			if p.Endpoint != tt.endpoint || p.Protocol != tt.protocol {
				t.Errorf("endpoint %q over %q, want %q over %q", p.Endpoint, p.Protocol, tt.endpoint, tt.protocol)
			}
		})
	}
}

// TestInvalidUTF8: a span whose strings are not valid UTF-8 (a header a
// caller sent, recorded by otelhttp) is exported with them repaired, and
// the spans batched with it still arrive: protobuf refuses invalid UTF-8,
// and one bad span must not let a caller drop everyone's traces.
func TestInvalidUTF8(t *testing.T) {
	var mu sync.Mutex
	var got []*tracepb.Span
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			t.Errorf("export: %v", err)
		}
		mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				got = append(got, ss.Spans...)
			}
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer collector.Close()
	p, err := telemetry.New(context.Background(), envOf(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": collector.URL}), telemetry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tr := p.TracerProvider.Tracer("test")
	_, good := tr.Start(context.Background(), "good")
	good.End()
	_, bad := tr.Start(context.Background(), "bad \xff")
	bad.SetAttributes(attribute.String("user_agent.original", "x\xfe\xff"))
	bad.SetStatus(codes.Error, "no \xc3")
	bad.AddEvent("e\xff", trace.WithAttributes(attribute.String("k", "\xff")))
	bad.End()
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	var names []string
	for _, s := range got {
		names = append(names, s.Name)
		for _, kv := range s.Attributes {
			if !utf8.ValidString(kv.Value.GetStringValue()) {
				t.Errorf("span %q: attribute %s is not valid UTF-8", s.Name, kv.Key)
			}
		}
	}
	if d := cmp.Diff([]string{"good", "bad \uFFFD"}, names); d != "" {
		t.Errorf("exported spans (-want +got):\n%s", d)
	}
}

// traceService is an OTLP/gRPC trace receiver.
type traceService struct {
	coltracepb.UnimplementedTraceServiceServer
	mu    sync.Mutex
	names []string
}

func (s *traceService) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, sp := range ss.Spans {
				s.names = append(s.names, sp.Name)
			}
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// TestGRPC: OTEL_EXPORTER_OTLP_PROTOCOL=grpc sends spans to a gRPC
// TraceService (plain text for an http:// endpoint), flushed by Shutdown.
func TestGRPC(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	svc := &traceService{}
	gs := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(gs, svc)
	go gs.Serve(ln)
	defer gs.Stop()
	p, err := telemetry.New(context.Background(), envOf(map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://" + ln.Addr().String(), "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}), telemetry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, sp := p.TracerProvider.Tracer("test").Start(context.Background(), "over grpc")
	sp.End()
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	svc.mu.Lock()
	defer svc.mu.Unlock()
	if d := cmp.Diff([]string{"over grpc"}, svc.names); d != "" {
		t.Errorf("spans received over gRPC (-want +got):\n%s", d)
	}
}

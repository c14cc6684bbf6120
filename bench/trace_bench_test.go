package bench

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/config"
	lhttp "github.com/ladderhq/ladder/http"
	"github.com/ladderhq/ladder/internal/testenv"
	"github.com/ladderhq/ladder/mcp"
	"github.com/ladderhq/ladder/service"
	"github.com/ladderhq/ladder/sqlite"
	"github.com/ladderhq/ladder/telemetry"
	"github.com/ladderhq/ladder/upstream"
)

// BenchmarkTraces measures what tracing costs, side by side in one run:
// route_item and the proxied capability call (as BenchmarkLadderRouteItem
// and BenchmarkLadderCapability) with tracing off (no OTEL_* set), on with
// every request sampled and exported over OTLP/HTTP to a receiver on a
// loopback port that reads and drops each export, and on with nothing
// sampled (OTEL_TRACES_SAMPLER=always_off: the spans are made but not
// recorded).
//
//	go test ./bench -run '^$' -bench '^BenchmarkTraces$' -benchmem -benchtime 3s -count 3
func BenchmarkTraces(b *testing.B) {
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	b.Cleanup(collector.Close)
	modes := []struct {
		name string
		env  map[string]string
	}{
		{"off", nil},
		{"on", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": collector.URL}},
		{"unsampled", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": collector.URL, "OTEL_TRACES_SAMPLER": "always_off"}},
	}
	for _, m := range modes {
		b.Run("route_item/"+m.name, func(b *testing.B) {
			tel := newTelemetry(b, m.env)
			h, token := tracedHandler(b, "vantrow-bills", nil, tel)
			benchHandler(b, h, "route_item", "Bearer "+token)
		})
	}
	for _, m := range modes {
		b.Run("capability/"+m.name, func(b *testing.B) {
			tel := newTelemetry(b, m.env)
			pool, _ := testenv.DemoPool(b)
			pool.Trace(tel.TracerProvider, tel.Propagator)
			h, token := tracedHandler(b, "partner-programs", pool, tel)
			benchHandler(b, h, ledgerTool, "Bearer "+token)
		})
	}
}

// newTelemetry sets tracing up from env, as `ladder serve` does from the
// process environment, and flushes it when the benchmark ends.
func newTelemetry(b *testing.B, env map[string]string) *telemetry.Provider {
	b.Helper()
	tel, err := telemetry.New(context.Background(), func(k string) string { return env[k] }, telemetry.Options{Version: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { tel.Shutdown(context.Background()) })
	return tel
}

// tracedHandler is ladderHandler with tel's tracer provider given to the
// service, the surfaces and the otelhttp wrapper, as cmd/ladder wires them.
func tracedHandler(b *testing.B, workspace string, pool *upstream.Pool, tel *telemetry.Provider) (http.Handler, string) {
	b.Helper()
	ctx := context.Background()
	log := slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg, err := config.Parse("demo.yaml", config.Demo())
	if err != nil {
		b.Fatal(err)
	}
	st, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "bench.db"), sqlite.Options{Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	var wss []ladder.Workspace
	for i := range cfg.Workspaces {
		wss = append(wss, cfg.Workspaces[i].Domain())
	}
	opts := service.Options{Store: st, Workspaces: wss, AuditSecret: []byte("bench"), Logger: log, TracerProvider: tel.TracerProvider}
	if pool != nil {
		opts.Runner = pool
	}
	svc, err := service.New(opts)
	if err != nil {
		b.Fatal(err)
	}
	if err := st.EnsureSteps(ctx, svc.InitialStates()); err != nil {
		b.Fatal(err)
	}
	_, token, err := svc.CreateKey(ctx, "bench", ladder.KeyRequest{Workspace: workspace, Kind: ladder.KeyAgent, Name: "bench agent"})
	if err != nil {
		b.Fatal(err)
	}
	m, err := mcp.New(mcp.Options{Service: svc, Logger: log, BaseURL: "http://127.0.0.1", TracerProvider: tel.TracerProvider})
	if err != nil {
		b.Fatal(err)
	}
	h := lhttp.New(lhttp.Options{Service: svc, Logger: log, Registry: prometheus.NewRegistry(), BaseURL: "http://127.0.0.1",
		Mounts: map[string]http.Handler{"/mcp": m}, MaxInFlightPerKey: -1, TracerProvider: tel.TracerProvider})
	return tel.Handler(h), token
}

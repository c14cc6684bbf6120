package bench

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/bench/internal/baseline"
	"github.com/ladderhq/ladder/config"
	lhttp "github.com/ladderhq/ladder/http"
	"github.com/ladderhq/ladder/internal/testenv"
	"github.com/ladderhq/ladder/mcp"
	"github.com/ladderhq/ladder/oauth"
	"github.com/ladderhq/ladder/service"
	"github.com/ladderhq/ladder/sqlite"
)

// The in-process benchmarks call each /mcp handler's ServeHTTP directly
// with a recorded response, from 64 goroutines on 2 cores (32 per
// GOMAXPROCS, as the 64 clients of run.sh), so the
// profiles show the handlers' own cost without the network or the load
// generator. Profile one at a time:
//
//	go test ./bench -run '^$' -bench '^BenchmarkBareSDK$' -benchmem \
//	    -cpuprofile cpu.prof -memprofile mem.prof
//	go tool pprof -top -sample_index=alloc_space bench.test mem.prof

// parallelism is the goroutines per GOMAXPROCS the benchmarks run.
const parallelism = 32

// callBody is a tools/call request with a unique id and item.
func callBody(tool string, n int64) string {
	s := strconv.FormatInt(n, 10)
	if tool == ledgerTool {
		return `{"jsonrpc":"2.0","id":` + s + `,"method":"tools/call","params":{"name":"` + tool +
			`","arguments":{"program":"partner-2027","relationship":"relationship:partner-2027:creator-1","payload":{}}}}`
	}
	if tool == postBillTool {
		return `{"jsonrpc":"2.0","id":` + s + `,"method":"tools/call","params":{"name":"` + tool +
			`","arguments":{"bill_id":"BENCH-` + s + `","amount_usd":10}}}`
	}
	return `{"jsonrpc":"2.0","id":` + s + `,"method":"tools/call","params":{"name":"` + tool +
		`","arguments":{"step":"post_tms","item":"BENCH-` + s + `"}}}`
}

// postBillTool is the demo capability tied to the post_tms step (in auto
// on a fresh database), proxied to the demo's stand-in TMS over HTTP.
const postBillTool = "tms:postBill"

// ledgerTool is the demo capability proxied to the stand-in ledger's MCP
// server.
const ledgerTool = "ticket6:readLedger"

// benchHandler sends tools/call requests to h in parallel and fails on any
// answer that is not a 200 JSON-RPC result.
func benchHandler(b *testing.B, h http.Handler, tool, auth string) {
	b.Helper()
	benchBodies(b, h, tool, auth, func(n int64) string { return callBody(tool, n) })
}

// benchBodies is benchHandler with the requests written by body.
func benchBodies(b *testing.B, h http.Handler, tool, auth string, body func(n int64) string) {
	b.Helper()
	inParallel(b, func(n int64) {
		req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", strings.NewReader(body(n)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2025-06-18")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if body := rec.Body.String(); rec.Code != http.StatusOK || !strings.Contains(body, `"result":`) || strings.Contains(body, `"isError":true`) {
			b.Fatalf("HTTP %d: %s", rec.Code, body)
		}
		if tool == postBillTool && !strings.Contains(rec.Body.String(), `executed`) {
			b.Fatalf("the bill was not posted alone: %s", rec.Body.String())
		}
	})
}

// inParallel runs call with a fresh number from parallelism goroutines
// per GOMAXPROCS, as the 64 clients of run.sh, counting allocations.
func inParallel(b *testing.B, call func(n int64)) {
	var seq atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(parallelism)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			call(seq.Add(1))
		}
	})
}

// BenchmarkPlain is the floor: decode the request, write a fixed result.
func BenchmarkPlain(b *testing.B) {
	benchHandler(b, baseline.NewPlainHandler(), baseline.ToolName, "")
}

// BenchmarkBareSDK is the bare go-sdk stateless server with a no-op tool.
func BenchmarkBareSDK(b *testing.B) {
	benchHandler(b, baseline.NewSDKHandler(), baseline.ToolName, "")
}

// BenchmarkLadderRouteItem is ladder's whole HTTP handler (REST router,
// access log, metrics, the /mcp front door, the go-sdk, service.Route and
// the SQLite group-commit write) answering route_item for a fresh item,
// with an Info-level JSON logger as `ladder demo` has, writing to
// io.Discard.
func BenchmarkLadderRouteItem(b *testing.B) {
	h, token := ladderHandler(b, "vantrow-bills", nil)
	benchHandler(b, h, "route_item", "Bearer "+token)
}

// BenchmarkLadderRouteItemText is BenchmarkLadderRouteItem with the text
// real items carry: an ampersand in the item (which json.Marshal escapes in
// the route's audit data) and features whose strings hold escapes (a
// newline, quotes). Without the canonicalizer's escape handling such a
// call cost half again as many instructions (BENCHMARKS.md, issue 22,
// session 15).
func BenchmarkLadderRouteItemText(b *testing.B) {
	h, token := ladderHandler(b, "vantrow-bills", nil)
	benchBodies(b, h, "route_item", "Bearer "+token, func(n int64) string {
		return `{"jsonrpc":"2.0","id":` + strconv.FormatInt(n, 10) + `,"method":"tools/call","params":{"name":"route_item","arguments":` +
			`{"step":"post_tms","item":"R&D-` + strconv.FormatInt(n, 10) + `","features":{"vendor":"AT&T","memo":"first line\nsecond \"quoted\""}}}}`
	})
}

// BenchmarkLadderCapability is the whole handler answering
// ticket6:readLedger: auth, the scope check, a durable call record, then
// the call to the demo's stand-in ledger (a go-sdk MCP server on a
// loopback port) over the pool's reused session.
func BenchmarkLadderCapability(b *testing.B) {
	pool, _ := testenv.DemoPool(b)
	h, token := ladderHandler(b, "partner-programs", pool)
	benchHandler(b, h, ledgerTool, "Bearer "+token)
}

// BenchmarkLadderCapabilityStep is the whole handler answering
// tms:postBill for a fresh bill: a step-tied call that runs alone, so it
// records a route and the call's begun record before the upstream call
// (the demo's stand-in TMS, plain HTTP), and its result after.
func BenchmarkLadderCapabilityStep(b *testing.B) {
	pool, _ := testenv.DemoPool(b)
	h, token := ladderHandler(b, "vantrow-bills", pool)
	benchHandler(b, h, postBillTool, "Bearer "+token)
}

// BenchmarkLadderCapabilityStepOne is BenchmarkLadderCapabilityStep from
// one caller at a time: each call's time is then the sum of its own waits
// (its durable writes, one after another, and the upstream call), not a
// share of a batch.
func BenchmarkLadderCapabilityStepOne(b *testing.B) {
	pool, _ := testenv.DemoPool(b)
	h, token := ladderHandler(b, "vantrow-bills", pool)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", strings.NewReader(callBody(postBillTool, int64(i))))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2025-06-18")
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if body := rec.Body.String(); rec.Code != http.StatusOK || !strings.Contains(body, `executed`) {
			b.Fatalf("HTTP %d: %s", rec.Code, body)
		}
	}
}

// ladderHandler wires the demo config, a SQLite store in a temporary
// folder and the service (with runner executing capability calls) into
// ladder's handler, as `ladder demo` does (without the 14 weeks of history:
// the paths measured do not depend on it), and returns it with an agent key
// of the workspace.
func ladderHandler(b *testing.B, workspace string, runner service.Runner) (http.Handler, string) {
	b.Helper()
	return ladderHandlerWith(b, workspace, runner, "")
}

// ladderHandlerWith is ladderHandler on the demo config with an identity
// section appended (none when ""), its issuers verified by package oauth.
func ladderHandlerWith(b *testing.B, workspace string, runner service.Runner, identity string) (http.Handler, string) {
	b.Helper()
	ctx := context.Background()
	log := slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))
	demo := config.Demo()
	if identity != "" {
		demo = []byte(strings.Replace(string(demo), "server:\n", "server:\n  public_url: http://127.0.0.1\n", 1) + "\n" + identity)
	}
	cfg, err := config.Parse("demo.yaml", demo)
	if err != nil {
		b.Fatal(err)
	}
	var tokens ladder.TokenVerifier
	if cfg.Identity != nil {
		tokens = oauth.New(oauth.Options{Identity: *cfg.Identity, Logger: log})
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
	svc, err := service.New(service.Options{Store: st, Workspaces: wss, AuditSecret: []byte("bench"), Logger: log, Runner: runner, Tokens: tokens})
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
	m, err := mcp.New(mcp.Options{Service: svc, Logger: log, BaseURL: "http://127.0.0.1"})
	if err != nil {
		b.Fatal(err)
	}
	// One key drives every client here, as in bench/run.sh's demo (whose
	// per-key cap is 256): lift the per-key cap, which would otherwise
	// answer 429 past 32 requests in progress.
	h := lhttp.New(lhttp.Options{Service: svc, Logger: log, Registry: prometheus.NewRegistry(), BaseURL: "http://127.0.0.1",
		Mounts: map[string]http.Handler{"/mcp": m}, MaxInFlightPerKey: -1})
	return h, token
}

// BenchmarkStandInLedger is the other side of the capability budget: the
// stand-in ledger's readLedger called straight, over a pooled loopback
// connection as ladder's upstream client makes it, with no ladder in
// between. BenchmarkLadderCapability is the same call through ladder, so
// the two counted by bench/probe/cgcount.sh give the budget's ratio in
// instructions, which a busy machine does not move.
func BenchmarkStandInLedger(b *testing.B) {
	_, up := testenv.DemoPool(b)
	url := up.Resolve("demo:ledger")
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * parallelism}}
	b.Cleanup(hc.CloseIdleConnections)
	inParallel(b, func(n int64) {
		body := `{"jsonrpc":"2.0","id":` + strconv.FormatInt(n, 10) + `,"method":"tools/call","params":{"name":"readLedger",` +
			`"arguments":{"program":"partner-2027","relationship":"relationship:partner-2027:creator-1"}}}`
		req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2025-06-18")
		resp, err := hc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(data), `"structuredContent"`) || strings.Contains(string(data), `"isError":true`) {
			b.Fatalf("HTTP %d: %s (%v)", resp.StatusCode, data, err)
		}
	})
}

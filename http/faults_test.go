package http_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/internal/faultstore"
	"github.com/ladderhq/ladder/internal/testenv"
)

// faultEnv is the capability test config over a store that fails on
// command.
func faultEnv(t *testing.T) (*testenv.Env, *faultstore.Store) {
	t.Helper()
	idle := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(idle.Close)
	var fs *faultstore.Store
	e := testenv.StartWith(t, capConfig(idle.URL, idle.URL), testenv.Options{WrapStore: func(s ladder.Store) ladder.Store { fs = faultstore.New(s); return fs }})
	return e, fs
}

// TestStoreFaultsRefuseAndRecover: with the store down, read-only or out of
// space, route, review, authorize and capability calls are refused with
// AUDIT_UNAVAILABLE on REST (503) and MCP (-32000), the upstream is never
// called, /readyz says not ready, ladder_refusals_total counts every
// refusal, and everything works again as soon as the fault clears, with an
// intact audit chain.
func TestStoreFaultsRefuseAndRecover(t *testing.T) {
	for _, tt := range []struct {
		name   string
		inject func(*faultstore.Store)
	}{
		{"down", func(s *faultstore.Store) { s.FailAll(faultstore.ErrDown) }},
		{"read-only", func(s *faultstore.Store) { s.FailWrites(faultstore.ErrReadOnly) }},
		{"disk full", func(s *faultstore.Store) { s.FailWrites(faultstore.ErrDiskFull) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e, fs := faultEnv(t)
			agent, human := e.Keys["acme/agent"], e.Keys["acme/human"]
			rt := e.Do("POST", "/v1/route", agent, map[string]any{"step": "auto_step", "item": "before"})
			if rt.Status != 200 {
				t.Fatalf("route before the fault: %d %s", rt.Status, rt.Raw)
			}
			routeID := rt.Body["route_id"].(string)
			upstreamBefore := e.Upstream.Calls()

			tt.inject(fs)
			refused := []struct {
				name         string
				method, path string
				key          string
				body         any
			}{
				{"route", "POST", "/v1/route", agent, map[string]any{"step": "auto_step", "item": "during"}},
				{"review", "POST", "/v1/routes/" + routeID + "/review", human, map[string]any{"verdict": "agree"}},
				{"authorize", "POST", "/v1/gate/authorize", agent, map[string]any{"case": "release", "precondition_fn": "score_release", "evidence": map[string]any{"bill_id": "G-0", "ok": true}}},
				{"call on a step", "POST", "/v1/capabilities/acme:post/call", agent, map[string]any{"payload": map[string]any{"bill_id": "B-1"}, "idempotency_key": "B-1"}},
				{"gated call", "POST", "/v1/capabilities/acme:gated/call", agent, map[string]any{"bill_id": "G-1", "evidence": map[string]any{"bill_id": "G-1", "ok": true}, "idempotency_key": "G-1"}},
				{"human gate", "POST", "/v1/capabilities/acme:human/call", agent, map[string]any{"program": "p1", "payload": map[string]any{"commission_id": "C-1"}}},
			}
			for _, c := range refused {
				r := e.Do(c.method, c.path, c.key, c.body)
				if r.Status != 503 || r.ErrorCode() != "AUDIT_UNAVAILABLE" {
					t.Errorf("%s: %d %s, want 503 AUDIT_UNAVAILABLE", c.name, r.Status, r.Raw)
				}
			}
			m := e.Do("POST", "/mcp", agent, rpcBody(3, "tools/call", map[string]any{"name": "acme:post", "arguments": map[string]any{"payload": map[string]any{"bill_id": "B-2"}}}))
			if re := rpcErr(m); re == nil || re["code"] != float64(ladder.RPCRefused) || re["message"] != "AUDIT_UNAVAILABLE" || m.Body["id"] != float64(3) {
				t.Errorf("mcp call: %d %s", m.Status, m.Raw)
			}
			if got := e.Upstream.Calls(); got != upstreamBefore {
				t.Errorf("the upstream was called %d times during the fault", got-upstreamBefore)
			}
			if r := e.Do("GET", "/readyz", "", nil); r.Status != 503 {
				t.Errorf("readyz during the fault: %d %s", r.Status, r.Raw)
			}
			if v := metricValue(t, e, `ladder_refusals_total{code="AUDIT_UNAVAILABLE",surface="rest"}`); v != float64(len(refused)) {
				t.Errorf("rest AUDIT_UNAVAILABLE refusals = %v, want %d", v, len(refused))
			}
			if v := metricValue(t, e, `ladder_refusals_total{code="AUDIT_UNAVAILABLE",surface="mcp"}`); v != 1 {
				t.Errorf("mcp AUDIT_UNAVAILABLE refusals = %v, want 1", v)
			}

			fs.FailAll(nil) // the fault clears; nothing restarts
			if r := e.Do("POST", "/v1/route", agent, map[string]any{"step": "auto_step", "item": "during"}); r.Status != 200 {
				t.Errorf("route after: %d %s", r.Status, r.Raw)
			}
			// The write that succeeded makes the server ready at once.
			if r := e.Do("GET", "/readyz", "", nil); r.Status != 200 {
				t.Fatalf("readyz after the fault: %d %s", r.Status, r.Raw)
			}
			if r := e.Do("POST", "/v1/routes/"+routeID+"/review", human, map[string]any{"verdict": "agree"}); r.Status != 201 {
				t.Errorf("review after: %d %s", r.Status, r.Raw)
			}
			if r := e.Do("POST", "/v1/capabilities/acme:post/call", agent, map[string]any{"payload": map[string]any{"bill_id": "B-1"}, "idempotency_key": "B-1"}); r.Status != 200 || r.Body["status"] != "executed" {
				t.Errorf("call after: %d %s", r.Status, r.Raw)
			}
			if got := e.Upstream.Calls(); got != upstreamBefore+1 {
				t.Errorf("upstream calls after recovery = %d, want 1", got-upstreamBefore)
			}
			if _, err := ladder.VerifyAudit(t.Context(), e.Store); err != nil {
				t.Errorf("audit chain: %v", err)
			}
		})
	}
}

// TestStoreHangsRefusedInTime: a store that hangs makes /readyz answer 503
// within its deadline instead of hanging with it.
func TestStoreHangsRefusedInTime(t *testing.T) {
	e, fs := faultEnv(t)
	release := fs.Hang()
	defer release()
	// For up to a second, the writes that set the server up answer for the
	// store; then /readyz probes, and gives up on the hung probe in time.
	for give := time.Now().Add(5 * time.Second); ; {
		start := time.Now()
		r := e.Do("GET", "/readyz", "", nil)
		if d := time.Since(start); d > 4*time.Second {
			t.Fatalf("readyz took %s", d)
		}
		if r.Status == 503 {
			break
		}
		if time.Now().After(give) {
			t.Fatalf("readyz with a hung store: %d", r.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
	release()
	if r := e.Do("GET", "/readyz", "", nil); r.Status != 200 {
		t.Fatalf("readyz after: %d", r.Status)
	}
}

// TestUpstreamHangsOrResets: an upstream that hangs gets UPSTREAM_TIMEOUT
// at the executor's timeout, one that resets the connection gets
// UPSTREAM_FAILED; both are recorded as failed calls, each upstream saw
// exactly one request, and repeating the call does not run it again.
func TestUpstreamHangsOrResets(t *testing.T) {
	var hangHits, resetHits atomic.Int64
	stop := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hangHits.Add(1)
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	t.Cleanup(hang.Close)
	t.Cleanup(func() { close(stop) }) // runs first: lets the hung handler end
	reset := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resetHits.Add(1)
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		if tc, ok := conn.(interface{ SetLinger(int) error }); ok {
			tc.SetLinger(0) // RST, not FIN
		}
		conn.Close()
	}))
	t.Cleanup(reset.Close)
	e := testenv.Start(t, fmt.Sprintf(`
workspaces:
  - id: acme
    queues: [{id: q, steps: [{id: s, name: S, lane: shadow}]}]
    capabilities:
      - {id: acme:hang, title: Hang, description: An upstream that never answers., executor: {kind: http, url: %q, timeout: 200ms}}
      - {id: acme:reset, title: Reset, description: An upstream that resets the connection., executor: {kind: http, url: %q, timeout: 2s}}
`, hang.URL, reset.URL))
	agent := e.Keys["acme/agent"]
	for _, tt := range []struct {
		id, code string
		status   int
		hits     *atomic.Int64
	}{
		{"acme:hang", "UPSTREAM_TIMEOUT", 504, &hangHits},
		{"acme:reset", "UPSTREAM_FAILED", 502, &resetHits},
	} {
		start := time.Now()
		r := e.Do("POST", "/v1/capabilities/"+tt.id+"/call", agent, map[string]any{"idempotency_key": "k-1"})
		if r.Status != tt.status || r.ErrorCode() != tt.code {
			t.Fatalf("%s: %d %s", tt.id, r.Status, r.Raw)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("%s took %s", tt.id, d)
		}
		callID := r.Body["error"].(map[string]any)["data"].(map[string]any)["call_id"].(string)
		got, err := e.Store.GetCall(t.Context(), "acme", callID)
		if err != nil || got.Status != ladder.CallFailed || string(got.ErrorCode) != tt.code {
			t.Fatalf("%s not recorded as failed: %+v %v", tt.id, got, err)
		}
		again := e.Do("POST", "/v1/capabilities/"+tt.id+"/call", agent, map[string]any{"idempotency_key": "k-1"})
		if again.ErrorCode() != tt.code {
			t.Fatalf("%s repeat: %s", tt.id, again.Raw)
		}
		if n := tt.hits.Load(); n != 1 {
			t.Fatalf("%s: the upstream saw %d requests, want exactly 1 (no retries)", tt.id, n)
		}
	}
}

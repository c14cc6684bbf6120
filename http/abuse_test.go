package http_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/internal/faultstore"
	"github.com/ladderhq/ladder/internal/testenv"
)

// rpcBody is one JSON-RPC request for /mcp.
func rpcBody(id int, method string, params any) map[string]any {
	m := map[string]any{"jsonrpc": "2.0", "id": id, "method": method}
	if params != nil {
		m["params"] = params
	}
	return m
}

// rpcErr returns the JSON-RPC error of an /mcp answer, or nil.
func rpcErr(r testenv.Response) map[string]any {
	e, _ := r.Body["error"].(map[string]any)
	return e
}

// metricValue reads one series of the text exposition on /metrics, or 0.
func metricValue(t *testing.T, e *testenv.Env, series string) float64 {
	t.Helper()
	v, _ := testenv.MetricValue(t, e.Do("GET", "/metrics", "", nil).Raw, series)
	return v
}

// TestRateLimitPerKey drains one key's token bucket and sees RATE_LIMITED
// with Retry-After on REST and retry_after_seconds in data on MCP, while
// another key of the same workspace is not touched.
func TestRateLimitPerKey(t *testing.T) {
	e := testenv.StartWith(t, "", testenv.Options{RatePerSecond: 0.2, RateBurst: 3})
	agent, human := e.Keys["vantrow-bills/agent"], e.Keys["vantrow-bills/human"]
	for i := range 3 {
		if r := e.Do("GET", "/v1/steps", agent, nil); r.Status != 200 {
			t.Fatalf("request %d within the burst: %d %s", i, r.Status, r.Raw)
		}
	}
	r := e.Do("GET", "/v1/steps", agent, nil)
	if r.Status != http.StatusTooManyRequests || r.ErrorCode() != "RATE_LIMITED" {
		t.Fatalf("over the burst: %d %s", r.Status, r.Raw)
	}
	ra, err := strconv.Atoi(r.Header.Get("Retry-After"))
	if err != nil || ra < 1 || ra > 5 {
		t.Fatalf("Retry-After = %q, want 1..5 s (one token per 5 s)", r.Header.Get("Retry-After"))
	}
	if !strings.Contains(r.ErrorHint(), "nothing was done") {
		t.Fatalf("hint %q", r.ErrorHint())
	}
	// The same key over MCP shares the bucket: a JSON-RPC error with the
	// seconds to wait in data.
	m := e.Do("POST", "/mcp", agent, rpcBody(7, "tools/list", nil))
	re := rpcErr(m)
	if re == nil || re["message"] != "RATE_LIMITED" || re["code"] != float64(ladder.RPCRefused) || m.Body["id"] != float64(7) {
		t.Fatalf("mcp over the limit: %d %s", m.Status, m.Raw)
	}
	data, _ := re["data"].(map[string]any)
	if s, _ := data["retry_after_seconds"].(float64); s < 1 {
		t.Fatalf("mcp data.retry_after_seconds: %s", m.Raw)
	}
	// Another key has its own bucket.
	if r := e.Do("GET", "/v1/steps", human, nil); r.Status != 200 {
		t.Fatalf("another key: %d %s", r.Status, r.Raw)
	}
	if v := metricValue(t, e, `ladder_refusals_total{code="RATE_LIMITED",surface="rest"}`); v != 1 {
		t.Fatalf("rest RATE_LIMITED refusals = %v, want 1", v)
	}
	if v := metricValue(t, e, `ladder_refusals_total{code="RATE_LIMITED",surface="mcp"}`); v != 1 {
		t.Fatalf("mcp RATE_LIMITED refusals = %v, want 1", v)
	}
}

// TestRateLimitRefills waits for a token and is served again.
func TestRateLimitRefills(t *testing.T) {
	// One token a second: the bucket refills in wall-clock time, and under
	// a loaded -race run two requests can be 50 ms apart, which refilled
	// the 20-a-second bucket this test first used between them.
	e := testenv.StartWith(t, "", testenv.Options{RatePerSecond: 1, RateBurst: 1})
	agent := e.Keys["vantrow-bills/agent"]
	if r := e.Do("GET", "/v1/steps", agent, nil); r.Status != 200 {
		t.Fatal(r.Status)
	}
	if r := e.Do("GET", "/v1/steps", agent, nil); r.Status != 429 {
		t.Fatalf("second at once: %d", r.Status)
	}
	time.Sleep(1100 * time.Millisecond)
	if r := e.Do("GET", "/v1/steps", agent, nil); r.Status != 200 {
		t.Fatalf("after refill: %d %s", r.Status, r.Raw)
	}
}

// TestConcurrencyCap holds the only request slot with a hung store and
// sees the next request answered 503 OVERLOADED at once (not queued),
// while /healthz still answers.
func TestConcurrencyCap(t *testing.T) {
	var fs *faultstore.Store
	e := testenv.StartWith(t, "", testenv.Options{MaxInFlight: 1, WrapStore: func(s ladder.Store) ladder.Store { fs = faultstore.New(s); return fs }})
	agent := e.Keys["vantrow-bills/agent"]
	release := fs.Hang()
	defer release()
	done := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest("GET", e.Server.URL+"/v1/steps", nil)
		req.Header.Set("Authorization", "Bearer "+agent)
		resp, err := e.Server.Client().Do(req)
		if err != nil {
			done <- -1
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	deadline := time.Now().Add(5 * time.Second)
	for fs.Hung() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the first request never reached the store")
		}
		time.Sleep(5 * time.Millisecond)
	}
	start := time.Now()
	r := e.Do("POST", "/v1/route", agent, map[string]any{"step": "post_tms", "item": "B-1"})
	if r.Status != 503 || r.ErrorCode() != "OVERLOADED" || r.Header.Get("Retry-After") != "1" {
		t.Fatalf("over the cap: %d %s", r.Status, r.Raw)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("the refusal took %s; it must not queue", d)
	}
	if r := e.Do("GET", "/healthz", "", nil); r.Status != 200 {
		t.Fatalf("healthz under the cap: %d", r.Status)
	}
	release()
	if s := <-done; s != 200 {
		t.Fatalf("the held request: %d", s)
	}
	if r := e.Do("GET", "/v1/steps", agent, nil); r.Status != 200 {
		t.Fatalf("after the slot freed: %d", r.Status)
	}
	if v := metricValue(t, e, `ladder_refusals_total{code="OVERLOADED",surface="rest"}`); v != 1 {
		t.Fatalf("OVERLOADED refusals = %v", v)
	}
}

// TestPendingApprovalCap lets a key have at most N approvals waiting; the
// next human-gate call is refused and creates nothing, a retry of a
// pending call still gets its approval, and deciding one frees a place.
func TestPendingApprovalCap(t *testing.T) {
	slow := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(slow.Close)
	e := testenv.StartWith(t, capConfig(slow.URL, slow.URL), testenv.Options{MaxPendingPerKey: 3})
	agent, human := e.Keys["acme/agent"], e.Keys["acme/human"]
	call := func(i int) testenv.Response {
		return e.Do("POST", "/v1/capabilities/acme:human/call", agent, map[string]any{"program": "p1", "payload": map[string]any{"commission_id": fmt.Sprint("C-", i)}, "idempotency_key": fmt.Sprint("C-", i)})
	}
	var first string
	for i := range 3 {
		r := call(i)
		if r.Status != 202 || r.Body["status"] != "approval_requested" {
			t.Fatalf("call %d: %d %s", i, r.Status, r.Raw)
		}
		if i == 0 {
			first = r.Body["approval_id"].(string)
		}
	}
	r := call(3)
	if r.Status != 429 || r.ErrorCode() != "RATE_LIMITED" || !strings.Contains(string(r.Raw), `"max_pending":3`) || r.Header.Get("Retry-After") == "" {
		t.Fatalf("fourth pending: %d %s", r.Status, r.Raw)
	}
	list, err := e.Store.ListApprovals(t.Context(), ladder.ApprovalQuery{Workspace: "acme", Limit: 50})
	if err != nil || len(list) != 3 {
		t.Fatalf("approvals stored: %d %v", len(list), err)
	}
	// A retry of a pending call is answered with its approval.
	if r := call(0); r.Status != 202 || r.Body["approval_id"] != first {
		t.Fatalf("retry of a pending call: %d %s", r.Status, r.Raw)
	}
	// Over MCP the same refusal carries the cap in data.
	m := e.Do("POST", "/mcp", agent, rpcBody(1, "tools/call", map[string]any{"name": "acme:human", "arguments": map[string]any{"program": "p1", "payload": map[string]any{"commission_id": "C-9"}}}))
	if re := rpcErr(m); re == nil || re["message"] != "RATE_LIMITED" || !strings.Contains(string(m.Raw), `"max_pending":3`) {
		t.Fatalf("mcp fourth pending: %s", m.Raw)
	}
	if r := e.Do("POST", "/v1/approvals/"+first+"/reject", human, map[string]any{"reason": "no"}); r.Status != 200 {
		t.Fatalf("reject: %d %s", r.Status, r.Raw)
	}
	if r := call(3); r.Status != 202 || r.Body["status"] != "approval_requested" {
		t.Fatalf("after a decision: %d %s", r.Status, r.Raw)
	}
}

// TestPageSizeCaps: every list endpoint refuses a limit over 500.
func TestPageSizeCaps(t *testing.T) {
	e := testenv.Start(t, "")
	agent, human := e.Keys["vantrow-bills/agent"], e.Keys["vantrow-bills/human"]
	for _, tt := range []struct{ path, key string }{
		{"/v1/approvals?limit=501", human},
		{"/v1/gate/history?limit=501", agent},
		{"/v1/approvals?limit=100000000000000000000", human},
	} {
		r := e.Do("GET", tt.path, tt.key, nil)
		if r.Status != 400 || r.ErrorCode() != "INVALID_ARGUMENT" || !strings.Contains(string(r.Raw), "500") {
			t.Errorf("%s: %d %s", tt.path, r.Status, r.Raw)
		}
	}
	for _, tt := range []struct{ path, key string }{{"/v1/approvals?limit=500", human}, {"/v1/gate/history?limit=500", agent}} {
		if r := e.Do("GET", tt.path, tt.key, nil); r.Status != 200 {
			t.Errorf("%s: %d %s", tt.path, r.Status, r.Raw)
		}
	}
}

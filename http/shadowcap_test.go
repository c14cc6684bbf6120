package http_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/internal/testenv"
	"github.com/ladderhq/ladder/service"
)

// shadowConfig has two steps in shadow, each with a capability.
const shadowConfig = `
workspaces:
  - id: acme
    queues:
      - id: q
        steps:
          - {id: sh_a, name: Shadow A, lane: shadow}
          - {id: sh_b, name: Shadow B, lane: shadow}
    capabilities:
      - id: acme:a
        title: Release A
        description: Releases a hold.
        payload_schema: {type: object, required: [bill_id], properties: {bill_id: {type: string, description: The bill.}}}
        step: sh_a
        item: bill_id
        executor: {kind: http, url: "demo:payments"}
      - id: acme:b
        title: Release B
        description: Releases another hold.
        payload_schema: {type: object, required: [bill_id], properties: {bill_id: {type: string, description: The bill.}}}
        step: sh_b
        item: bill_id
        executor: {kind: http, url: "demo:payments"}
`

// errData returns the data of an error answer.
func errData(r testenv.Response) map[string]any {
	e, _ := r.Body["error"].(map[string]any)
	d, _ := e["data"].(map[string]any)
	return d
}

// shadowCall sends a call to a step in shadow and checks it is refused
// with STEP_NEEDS_PERSON; it returns the refusal's data.
func shadowCall(t *testing.T, e *testenv.Env, key, capability string, args map[string]any) map[string]any {
	t.Helper()
	r := e.Do("POST", "/v1/capabilities/"+capability+"/call", key, args)
	if r.Status != 403 || r.ErrorCode() != "STEP_NEEDS_PERSON" {
		t.Fatalf("%s %v: %d %.300s", capability, args["payload"], r.Status, r.Raw)
	}
	return errData(r)
}

// shadowStored counts the shadow proposals stored for a key.
func shadowStored(t *testing.T, e *testenv.Env, key string) int {
	t.Helper()
	list, err := e.Store.ListApprovals(t.Context(), ladder.ApprovalQuery{Workspace: "acme", Status: ladder.ApprovalShadow, RequestedBy: key, Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	return len(list)
}

// TestShadowProposalCap: a key keeps at most server.max_shadow_proposals
// unreviewed shadow proposals per step. Over it a call is still refused
// STEP_NEEDS_PERSON (nothing runs either way) and says its proposal was not
// recorded, on REST and MCP, and the metric counts it; a retry of a
// recorded proposal still finds it; another step and another key still
// record; a review frees a place; an item reviewed already takes no more
// proposals.
func TestShadowProposalCap(t *testing.T) {
	e := testenv.StartWith(t, shadowConfig, testenv.Options{MaxShadowPerStep: 3})
	agent, human := e.Keys["acme/agent"], e.Keys["acme/human"]
	agentID := keyID(t, e, agent)
	before := e.Upstream.Calls()
	args := func(bill string) map[string]any {
		return map[string]any{"payload": map[string]any{"bill_id": bill}, "idempotency_key": bill}
	}
	var routes, proposals []string
	for i := range 3 {
		d := shadowCall(t, e, agent, "acme:a", args(fmt.Sprint("A-", i)))
		if d["proposal_recorded"] != true || d["proposal_id"] == nil {
			t.Fatalf("proposal %d under the cap: %v", i, d)
		}
		routes, proposals = append(routes, d["route_id"].(string)), append(proposals, d["proposal_id"].(string))
	}

	d := shadowCall(t, e, agent, "acme:a", args("A-3"))
	if d["proposal_recorded"] != false || d["proposal_id"] != nil || d["max_shadow"] != 3.0 {
		t.Fatalf("over the cap: %v", d)
	}
	if n := shadowStored(t, e, agentID); n != 3 {
		t.Fatalf("%d shadow proposals stored, want 3", n)
	}
	if recs, _ := e.Store.ListAudit(t.Context(), ladder.AuditQuery{Workspace: "acme", Kind: ladder.AuditApproval, Limit: 500}); len(recs) != 3 {
		t.Fatalf("%d approval audit records, want 3", len(recs))
	}
	r := e.Do("POST", "/v1/capabilities/acme:a/call", agent, args("A-3"))
	if h := r.ErrorHint(); !strings.Contains(h, "not recorded") || !strings.Contains(h, "review the oldest") {
		t.Errorf("hint over the cap: %q", h)
	}
	// Over MCP the refusal says the same.
	m := e.Do("POST", "/mcp", agent, rpcBody(1, "tools/call", map[string]any{"name": "acme:a", "arguments": map[string]any{"payload": map[string]any{"bill_id": "A-4"}}}))
	if re := rpcErr(m); re == nil || re["message"] != "STEP_NEEDS_PERSON" || !strings.Contains(string(m.Raw), `"proposal_recorded":false`) {
		t.Fatalf("mcp over the cap: %s", m.Raw)
	}
	if v := metricValue(t, e, "ladder_shadow_proposals_dropped_total"); v != 3 {
		t.Errorf("ladder_shadow_proposals_dropped_total = %v, want 3", v)
	}
	// A retry of a recorded proposal finds it, at the cap.
	if d := shadowCall(t, e, agent, "acme:a", args("A-1")); d["proposal_recorded"] != true || d["proposal_id"] != proposals[1] {
		t.Errorf("retry of a recorded proposal at the cap: %v", d)
	}
	// Another step of the key, and another key on the step, still record.
	if d := shadowCall(t, e, agent, "acme:b", args("B-1")); d["proposal_recorded"] != true {
		t.Errorf("another step at the cap of this one: %v", d)
	}
	_, other, err := e.Svc.CreateKey(t.Context(), "test", ladder.KeyRequest{Workspace: "acme", Kind: ladder.KeyAgent})
	if err != nil {
		t.Fatal(err)
	}
	if d := shadowCall(t, e, other, "acme:a", args("A-9")); d["proposal_recorded"] != true {
		t.Errorf("another key on the step: %v", d)
	}
	// A person's review of one item frees one place.
	if rv := e.Do("POST", "/v1/routes/"+routes[0]+"/review", human, map[string]any{"verdict": "agree"}); rv.Status != 201 {
		t.Fatalf("review: %d %s", rv.Status, rv.Raw)
	}
	if d := shadowCall(t, e, agent, "acme:a", args("A-5")); d["proposal_recorded"] != true {
		t.Errorf("after a review freed a place: %v", d)
	}
	if d := shadowCall(t, e, agent, "acme:a", args("A-6")); d["proposal_recorded"] != false {
		t.Errorf("over the cap again: %v", d)
	}
	// The reviewed item takes no more proposals, whatever the cap.
	r = e.Do("POST", "/v1/capabilities/acme:a/call", other, map[string]any{"payload": map[string]any{"bill_id": "A-0"}, "idempotency_key": "A-0-again"})
	if d := errData(r); r.ErrorCode() != "STEP_NEEDS_PERSON" || d["proposal_recorded"] != false || !strings.Contains(r.ErrorHint(), "reviewed this item already") {
		t.Errorf("a proposal for a reviewed item: %d %s", r.Status, r.Raw)
	}
	if n, want := shadowStored(t, e, agentID), 3+1+1; n != want {
		t.Errorf("%d shadow proposals of the key stored, want %d", n, want)
	}
	if e.Upstream.Calls() != before {
		t.Fatal("a call to a step in shadow ran")
	}
}

// keyID is the id of a key token (ldr_<id>_<secret>).
func keyID(t *testing.T, e *testenv.Env, token string) string {
	t.Helper()
	p, err := e.Svc.Authenticate(t.Context(), token)
	if err != nil {
		t.Fatal(err)
	}
	return p.KeyID
}

// TestShadowCapReplicasPostgres: two replicas on one database. 60
// concurrent calls of one key leave exactly the cap of shadow proposals
// stored; then reviews of those items race new proposals for them; once
// every item is reviewed, exactly the cap of new items records again — no
// proposal stays counted after its item's review, whichever committed
// first.
func TestShadowCapReplicasPostgres(t *testing.T) {
	const max = 10
	reps := pgReplicas(t, []*testenv.Clock{testenv.WallClock(0), testenv.WallClock(0)},
		testenv.Options{MaxShadowPerStep: max, MaxInFlight: -1, MaxInFlightPerKey: -1, MaxInFlightPerAddress: -1})
	agent, human := reps[0].Keys["acme/agent"], reps[0].Keys["acme/human"]
	agentID := keyID(t, reps[0], agent)
	call := func(e *testenv.Env, bill, idem string) answer {
		return send(e, "POST", "/v1/capabilities/acme:shadow/call", agent, map[string]any{"payload": map[string]any{"bill_id": bill}, "idempotency_key": idem})
	}
	// flood sends n calls for new items at once and returns the routes of
	// the recorded proposals.
	flood := func(prefix string, n int) []string {
		var (
			mu      sync.Mutex
			routes  []string
			dropped atomic.Int32
			wg      sync.WaitGroup
		)
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start
				bill := fmt.Sprint(prefix, i)
				r := call(reps[i%2], bill, bill)
				d, _ := r.body["error"].(map[string]any)
				data, _ := d["data"].(map[string]any)
				switch {
				case r.status != 403 || r.code() != "STEP_NEEDS_PERSON":
					t.Errorf("call %s: %d %s %v", bill, r.status, r.raw, r.err)
				case data["proposal_recorded"] == true:
					mu.Lock()
					routes = append(routes, data["route_id"].(string))
					mu.Unlock()
				case data["proposal_recorded"] == false && data["max_shadow"] == float64(max):
					dropped.Add(1)
				default:
					t.Errorf("call %s: %s", bill, r.raw)
				}
			})
		}
		close(start)
		wg.Wait()
		if len(routes) != max || dropped.Load() != int32(n-max) {
			t.Fatalf("%d concurrent calls: %d recorded, %d not; want %d and %d", n, len(routes), dropped.Load(), max, n-max)
		}
		return routes
	}
	routes := flood("S-", 60)
	if n := shadowStored(t, reps[0], agentID); n != max {
		t.Fatalf("%d shadow proposals stored, want %d", n, max)
	}

	// Each item is reviewed on one replica while the agent proposes it
	// again on the other.
	stored, err := reps[0].Store.ListApprovals(t.Context(), ladder.ApprovalQuery{Workspace: "acme", Status: ladder.ApprovalShadow, Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	items := map[string]string{} // route id → item
	for _, a := range stored {
		items[a.RouteID] = a.Item
	}
	var wg sync.WaitGroup
	var raced atomic.Int32
	for i, rt := range routes {
		bill := items[rt]
		wg.Go(func() {
			if r := send(reps[i%2], "POST", "/v1/routes/"+rt+"/review", human, map[string]any{"verdict": "agree"}); r.status != 201 {
				t.Errorf("review %s: %d %s", rt, r.status, r.raw)
			}
		})
		for j := range 3 {
			wg.Go(func() {
				r := call(reps[(i+1)%2], bill, fmt.Sprintf("%s-again-%d", bill, j))
				d, _ := r.body["error"].(map[string]any)
				data, _ := d["data"].(map[string]any)
				switch {
				case r.status != 403 || r.code() != "STEP_NEEDS_PERSON":
					t.Errorf("proposal of %s during its review: %d %s", bill, r.status, r.raw)
				case data["proposal_recorded"] == true:
					raced.Add(1)
				}
			})
		}
	}
	wg.Wait()
	t.Logf("%d proposals recorded while their items were reviewed", raced.Load())
	// Every stored proposal's item is reviewed now: the cap is free.
	flood("T-", 30)
}

// TestApprovalPageBytes: a page of GET /v1/approvals is bounded by bytes
// as well as rows. 100 shadow proposals of about 60 KB each, listed with
// limit=500, come back on several pages, each under service.PageBytes plus
// one item, and following next_cursor returns every one exactly once. The
// heap one such request takes is logged.
func TestApprovalPageBytes(t *testing.T) {
	const n = 100
	c := startCapEnv(t)
	note := strings.Repeat("x", 60<<10)
	for i := range n {
		d := shadowCall(t, c.Env, c.agent, "acme:shadow", map[string]any{"payload": map[string]any{"bill_id": fmt.Sprint("P-", i), "note": note}})
		if d["proposal_recorded"] != true {
			t.Fatalf("proposal %d: %v", i, d)
		}
	}
	seen := map[string]int{}
	pages, cursor := 0, ""
	for {
		path := "/v1/approvals?status=shadow&limit=500"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		r := c.Do("GET", path, c.human, nil)
		if r.Status != 200 {
			t.Fatalf("page %d: %d %.300s", pages, r.Status, r.Raw)
		}
		pages++
		items, _ := r.Body["approvals"].([]any)
		bytes := 0
		for _, it := range items {
			a := it.(map[string]any)
			seen[a["approval_id"].(string)]++
			bytes += len(a["payload"].(map[string]any)["note"].(string))
		}
		if len(items) == 0 || bytes > service.PageBytes+len(note)+1024 {
			t.Fatalf("page %d: %d approvals, %d bytes of payload", pages, len(items), bytes)
		}
		next, _ := r.Body["next_cursor"].(string)
		if pages == 1 && (len(items) >= n || next == "") {
			t.Fatalf("limit=500 returned %d of %d approvals with next_cursor %q; want a page bounded by bytes", len(items), n, next)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if len(seen) != n {
		t.Fatalf("%d distinct approvals over %d pages, want %d", len(seen), pages, n)
	}
	for id, k := range seen {
		if k != 1 {
			t.Errorf("approval %s on %d pages", id, k)
		}
	}
	peak, total := heapOf(func() { c.Do("GET", "/v1/approvals?status=shadow&limit=500", c.human, nil) })
	t.Logf("%d approvals of %d KB on %d pages; one limit=500 page: peak heap +%.1f MB, %.1f MB allocated", n, len(note)>>10, pages, float64(peak)/(1<<20), float64(total)/(1<<20))
}

// TestGateHistoryPageBytes: a page of GET /v1/gate/history is bounded by
// bytes as well as rows, and its cursors return every decision once.
func TestGateHistoryPageBytes(t *testing.T) {
	const n = 40
	c := startCapEnv(t)
	pad := strings.Repeat("y", 60<<10)
	for i := range n {
		r := c.Do("POST", "/v1/gate/authorize", c.agent, map[string]any{"case": "release", "precondition_fn": "score_release",
			"evidence": map[string]any{"bill_id": fmt.Sprint("G-", i), "ok": true, "pad": pad}})
		if r.Status != 200 {
			t.Fatalf("authorize %d: %d %.300s", i, r.Status, r.Raw)
		}
	}
	seen := map[string]int{}
	pages, cursor := 0, ""
	for {
		path := "/v1/gate/history?limit=500"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		r := c.Do("GET", path, c.agent, nil)
		if r.Status != 200 {
			t.Fatalf("page %d: %d %.300s", pages, r.Status, r.Raw)
		}
		pages++
		ds, _ := r.Body["decisions"].([]any)
		next, _ := r.Body["next_cursor"].(string)
		if len(ds) == 0 || len(ds) > service.PageBytes/len(pad)+1 || (next != "") != (r.Body["has_more"] == true) {
			t.Fatalf("page %d: %d decisions, next_cursor %q, has_more %v", pages, len(ds), next, r.Body["has_more"])
		}
		for _, d := range ds {
			seen[d.(map[string]any)["decision_id"].(string)]++
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if pages < 2 || len(seen) != n {
		t.Fatalf("%d distinct decisions over %d pages, want %d over several", len(seen), pages, n)
	}
	for id, k := range seen {
		if k != 1 {
			t.Errorf("decision %s on %d pages", id, k)
		}
	}
}

// heapOf runs f and returns how far the live heap rose above where it
// started at its highest (sampled every 100 µs) and the bytes allocated.
func heapOf(f func()) (peak, total uint64) {
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	ctx, cancel := context.WithCancel(context.Background())
	var high atomic.Uint64
	done := make(chan struct{})
	go func() {
		defer close(done)
		var m runtime.MemStats
		for ctx.Err() == nil {
			runtime.ReadMemStats(&m)
			if m.HeapAlloc > high.Load() {
				high.Store(m.HeapAlloc)
			}
			time.Sleep(100 * time.Microsecond)
		}
	}()
	f()
	cancel()
	<-done
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if h := high.Load(); h > before.HeapAlloc {
		peak = h - before.HeapAlloc
	}
	return peak, after.TotalAlloc - before.TotalAlloc
}

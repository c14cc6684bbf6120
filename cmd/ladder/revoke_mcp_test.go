package main

// A revoked key over MCP: once a revocation has committed, the next MCP
// request made with the key is refused KEY_INVALID and nothing is recorded
// in its name — however recently the key was used, and wherever the
// revocation was made (`ladder keys revoke` in another process, REST on
// the same server, REST on another replica; docs/operations.md, "Replicas
// are stateless"). The tests run the real binary and speak MCP as an agent
// does, with the go-sdk client, plus raw JSON-RPC posts where the exact
// refusal is asserted.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ladderhq/ladder"
)

// rpcAnswer is one answer of /mcp to a raw JSON-RPC post.
type rpcAnswer struct {
	Status    int
	Body      []byte
	Challenge string // WWW-Authenticate
	Err       *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Data    struct {
			Code string `json:"code"`
		} `json:"data"`
	}
	Result *struct {
		IsError bool `json:"isError"`
	}
}

func (a rpcAnswer) String() string {
	b := bytes.TrimSpace(a.Body)
	if len(b) > 400 {
		b = append(b[:400:400], "…"...) // a tools/list runs to tens of kilobytes
	}
	return fmt.Sprintf("HTTP %d %s", a.Status, b)
}

// mcpPost posts one JSON-RPC request to /mcp with the key. version is the
// MCP-Protocol-Version header: set as the go-sdk client sets it after
// initialize, a tools/call takes the server's plain path; empty, it goes
// through the SDK's handler. Both must refuse a revoked key.
func mcpPost(t *testing.T, base, key, version, method string, params any) rpcAnswer {
	t.Helper()
	msg := map[string]any{"jsonrpc": "2.0", "id": 1, "method": method}
	if params != nil {
		msg["params"] = params
	}
	b, err := json.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, base+"/mcp", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if version != "" {
		req.Header.Set("MCP-Protocol-Version", version)
	}
	resp, err := replicaClient.Do(req)
	if err != nil {
		t.Fatalf("POST /mcp %s: %v", method, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	a := rpcAnswer{Status: resp.StatusCode, Body: body, Challenge: resp.Header.Get("WWW-Authenticate")}
	payload := body
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		// One message in one event: its data line.
		for line := range strings.SplitSeq(string(body), "\n") {
			if d, ok := strings.CutPrefix(line, "data:"); ok {
				payload = []byte(strings.TrimSpace(d))
				break
			}
		}
	}
	var m struct {
		Error  json.RawMessage `json:"error"`
		Result json.RawMessage `json:"result"`
	}
	if json.Unmarshal(payload, &m) == nil {
		if len(m.Error) > 0 {
			json.Unmarshal(m.Error, &a.Err)
		}
		if len(m.Result) > 0 {
			json.Unmarshal(m.Result, &a.Result)
		}
	}
	return a
}

// plainVersion is a protocol version whose tools/call the server answers
// on its plain path (what the go-sdk client sends after initialize).
const plainVersion = "2025-11-25"

// wantKeyInvalid fails the test unless a is the MCP surface's refusal of
// an invalid key: HTTP 401 with a Bearer challenge, JSON-RPC error -32001
// whose message and data.code are KEY_INVALID.
func wantKeyInvalid(t *testing.T, what string, a rpcAnswer) {
	t.Helper()
	if a.Status != http.StatusUnauthorized || a.Err == nil || a.Err.Code != ladder.RPCAuthFailed ||
		a.Err.Message != string(ladder.CodeKeyInvalid) || a.Err.Data.Code != string(ladder.CodeKeyInvalid) {
		t.Errorf("%s with the revoked key: want HTTP 401, JSON-RPC error %d KEY_INVALID; got %s", what, ladder.RPCAuthFailed, a)
		return
	}
	if !strings.HasPrefix(a.Challenge, "Bearer") {
		t.Errorf("%s with the revoked key: 401 without WWW-Authenticate: Bearer (got %q)", what, a.Challenge)
	}
}

// routeArgs are route_item's arguments for item at a step of the demo
// config that runs alone.
func routeArgs(item string) map[string]any {
	return map[string]any{"queue": "bills", "step": "read_bill", "item": item}
}

// postBillArgs are valid arguments of the demo capability tms:postBill
// (tied to post_tms, in auto: a call runs at once on the demo upstream).
func postBillArgs(bill string) map[string]any {
	return map[string]any{"payload": map[string]any{"bill_id": bill, "amount_usd": 1250.5}, "idempotency_key": bill}
}

// warmMCP connects the go-sdk client with the key and uses it as an agent
// does — routes of prefix-0…prefix-3, tools/list, one capability call —
// so that the key has just been verified many times over MCP. It returns
// the live session.
func warmMCP(t *testing.T, base, key, prefix string) *sdk.ClientSession {
	t.Helper()
	ctx := context.Background()
	client := sdk.NewClient(&sdk.Implementation{Name: "revoke-e2e", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: &http.Client{Transport: bearer{key}}}, nil)
	if err != nil {
		t.Fatalf("connect over MCP: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	for i := range 4 {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "route_item", Arguments: routeArgs(fmt.Sprintf("%s-%d", prefix, i))})
		if err != nil || res.IsError {
			t.Fatalf("route_item %s-%d before the revocation: %v %+v", prefix, i, err, res)
		}
	}
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list before the revocation: %v", err)
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	for _, want := range []string{"route_item", "tms:postBill"} {
		if !strings.Contains(","+strings.Join(names, ",")+",", ","+want+",") {
			t.Fatalf("tools/list lacks %s: %v", want, names)
		}
	}
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "tms:postBill", Arguments: postBillArgs(prefix + "-cap")})
	if err != nil || res.IsError {
		t.Fatalf("tms:postBill before the revocation: %v %+v", err, res)
	}
	return cs
}

// expectRefusedOverMCP makes, straight after a revocation and without a
// pause or a retry, every kind of MCP request with the key and expects each
// refused KEY_INVALID: route_item (first, on the plain path the go-sdk
// client takes, then through the SDK's handler), tools/list, a capability
// call, and the same through the session opened before the revocation.
// Items and bills it sends start with prefix.
func expectRefusedOverMCP(t *testing.T, base, key string, cs *sdk.ClientSession, prefix string) {
	t.Helper()
	params := map[string]any{"name": "route_item", "arguments": routeArgs(prefix + "-0")}
	wantKeyInvalid(t, "route_item (the first request after the revocation)", mcpPost(t, base, key, plainVersion, "tools/call", params))
	params = map[string]any{"name": "route_item", "arguments": routeArgs(prefix + "-1")}
	wantKeyInvalid(t, "route_item without MCP-Protocol-Version", mcpPost(t, base, key, "", "tools/call", params))
	wantKeyInvalid(t, "tools/list", mcpPost(t, base, key, plainVersion, "tools/list", nil))
	params = map[string]any{"name": "tms:postBill", "arguments": postBillArgs(prefix + "-cap")}
	wantKeyInvalid(t, "tms:postBill", mcpPost(t, base, key, plainVersion, "tools/call", params))

	ctx := context.Background()
	if res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "route_item", Arguments: routeArgs(prefix + "-2")}); err == nil {
		t.Errorf("route_item on the session opened before the revocation: want a refusal, got %+v", res)
	} else if !strings.Contains(err.Error(), "KEY_INVALID") {
		t.Errorf("route_item on the session opened before the revocation: want KEY_INVALID, got %v", err)
	}
	if _, err := cs.ListTools(ctx, nil); err == nil || !strings.Contains(err.Error(), "KEY_INVALID") {
		t.Errorf("tools/list on the session opened before the revocation: want KEY_INVALID, got %v", err)
	}
}

// revokeRecord returns the seq of the key.revoke record of key id.
func revokeRecord(t *testing.T, recs []ladder.AuditRecord, id string) int64 {
	t.Helper()
	for _, r := range recs {
		if r.Kind == ladder.AuditKeyRevoke && r.Subject == id {
			return r.Seq
		}
	}
	t.Fatalf("the audit log holds no key.revoke record of key %s", id)
	return 0
}

// checkNothingRecordedAfter checks the audit log against what a revocation
// promises: the routes made with key id before it are recorded in its name
// (so the checks below can see the key's records at all), and nothing is
// recorded in its name after its key.revoke record, nor anything about an
// item or bill sent after the revocation (those start with after).
func checkNothingRecordedAfter(t *testing.T, recs []ladder.AuditRecord, id, before, after string) {
	t.Helper()
	revoked := revokeRecord(t, recs, id)
	warm := 0
	for _, r := range recs {
		var d struct {
			Item string `json:"item"`
		}
		json.Unmarshal(r.Data, &d)
		if r.Kind == ladder.AuditRoute && r.Actor == id && strings.HasPrefix(d.Item, before+"-") && r.Seq < revoked {
			warm++
		}
		if r.Actor == id && r.Seq > revoked {
			t.Errorf("audit record %d (%s %s, item %q) is in the name of key %s after its revocation (record %d)", r.Seq, r.Kind, r.Subject, d.Item, id, revoked)
		} else if strings.Contains(string(r.Data), after) {
			t.Errorf("audit record %d (%s by %s) holds %q, sent with the key after its revocation", r.Seq, r.Kind, r.Actor, after)
		}
	}
	if warm < 4 {
		t.Errorf("the audit log holds %d routes of %s-… by key %s before its revocation; want the 4 made", warm, before, id)
	}
}

// TestRevokedKeyOverMCP revokes an agent key that was just used over MCP
// on a running `ladder serve` (SQLite) — once with `ladder keys revoke` in
// another process, once over REST — and expects the very next MCP request
// with it refused KEY_INVALID, and nothing recorded for it.
func TestRevokedKeyOverMCP(t *testing.T) {
	cfg := writeDemoConfig(t)
	db := filepath.Join(t.TempDir(), "ladder.db")
	_, admin, _ := ladder.NewKeyToken()
	env := []string{"LADDER_ADMIN_KEY=" + admin, "LADDER_AUDIT_SECRET=revoke-mcp-test"}
	p := startServe(t, "sqlite", cfg, db, env...)
	const ws = "vantrow-bills"

	t.Run("revoked by ladder keys revoke in another process", func(t *testing.T) {
		id, tok := createKey(t, p, admin, ws, ladder.KeyAgent)
		cs := warmMCP(t, p.URL, tok, "CLI-BEFORE")
		cmd := exec.Command(ladderBinary(t), "keys", "revoke", "--config", cfg, "--db", db, id)
		cmd.Env = append(os.Environ(), env...)
		if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "Revoked key "+id) {
			t.Fatalf("ladder keys revoke %s while serve runs: %v\n%s", id, err, out)
		}
		expectRefusedOverMCP(t, p.URL, tok, cs, "CLI-AFTER")
		checkNothingRecordedAfter(t, auditExport(t, db, true, env...), id, "CLI-BEFORE", "CLI-AFTER")
	})

	t.Run("revoked over REST on the same server", func(t *testing.T) {
		id, tok := createKey(t, p, admin, ws, ladder.KeyAgent)
		cs := warmMCP(t, p.URL, tok, "REST-BEFORE")
		mustCall(t, http.StatusOK, "POST", p.URL+"/v1/keys/"+id+"/revoke", admin, nil, nil)
		expectRefusedOverMCP(t, p.URL, tok, cs, "REST-AFTER")
		checkNothingRecordedAfter(t, auditExport(t, db, true, env...), id, "REST-BEFORE", "REST-AFTER")
	})
}

// TestRevokedKeyOverMCPAcrossReplicas warms an agent key over MCP on
// replica B, revokes it over REST on replica A (one PostgreSQL schema), and
// routes with it over MCP on B until B refuses it — within a second, as
// TestReplicas allows for REST. Whatever B answers meanwhile, no route of
// an item sent after the revocation's answer may be recorded: a write in
// the name of a revoked key never commits after the revocation did. (A
// route B acknowledges is a recorded one, so in effect the loop passes only
// when B refuses from the first request on.)
func TestRevokedKeyOverMCPAcrossReplicas(t *testing.T) {
	dsn := postgresDSN(t)
	schema := freshSchema(t, dsn)
	cfg := writeDemoConfig(t)
	_, admin, _ := ladder.NewKeyToken()
	env := []string{"LADDER_PG_SCHEMA=" + schema, "LADDER_ADMIN_KEY=" + admin, "LADDER_AUDIT_SECRET=revoke-mcp-replicas"}
	// A bootstraps the admin key on the empty schema before B starts (see
	// TestReplicas).
	a := startServe(t, "A", cfg, dsn, env...)
	b := startServe(t, "B", cfg, dsn, env...)

	id, tok := createKey(t, a, admin, "vantrow-bills", ladder.KeyAgent)
	cs := warmMCP(t, b.URL, tok, "PG-BEFORE")
	mustCall(t, http.StatusOK, "POST", a.URL+"/v1/keys/"+id+"/revoke", admin, nil, nil)
	revoked := time.Now()
	var accepted []string // items B answered as routed after the revocation
	for i := 0; ; i++ {
		item := fmt.Sprintf("PG-AFTER-%d", i)
		ans := mcpPost(t, b.URL, tok, plainVersion, "tools/call", map[string]any{"name": "route_item", "arguments": routeArgs(item)})
		if ans.Status == http.StatusUnauthorized {
			wantKeyInvalid(t, "route_item on B", ans)
			t.Logf("replica B refused the key over MCP %s after its revocation on A (attempt %d)", time.Since(revoked).Round(time.Microsecond), i+1)
			break
		}
		if ans.Status != http.StatusOK || ans.Err != nil || ans.Result == nil || ans.Result.IsError {
			t.Fatalf("route_item %s on B with the key being revoked: %s", item, ans)
		}
		accepted = append(accepted, item)
		if time.Since(revoked) > time.Second {
			t.Fatalf("replica B still accepts key %s over MCP 1s after its revocation on A", id)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(accepted) > 0 {
		t.Logf("replica B answered route_item for %v after the revocation on A", accepted)
	}
	wantKeyInvalid(t, "tools/list on B", mcpPost(t, b.URL, tok, plainVersion, "tools/list", nil))
	wantKeyInvalid(t, "tms:postBill on B", mcpPost(t, b.URL, tok, plainVersion, "tools/call", map[string]any{"name": "tms:postBill", "arguments": postBillArgs("PG-AFTER-cap")}))
	if _, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "route_item", Arguments: routeArgs("PG-AFTER-session")}); err == nil || !strings.Contains(err.Error(), "KEY_INVALID") {
		t.Errorf("route_item on B's session opened before the revocation: want KEY_INVALID, got %v", err)
	}
	checkNothingRecordedAfter(t, auditExport(t, dsn, true, env...), id, "PG-BEFORE", "PG-AFTER")
}

package http_test

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/internal/testenv"
)

// requestLines returns the access log's lines ("msg":"request") in log.
func requestLines(t *testing.T, log string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(log), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if m["msg"] == "request" {
			out = append(out, m)
		}
	}
	return out
}

// TestAccessLogNamesKey: the access log line of a request names the key
// that made it, by id, whichever path authenticated it — the front door
// for /mcp, a REST handler's own check for /v1/ — and names none for a
// request without a valid key (one the /mcp handler answers; a refusal at
// the door is counted, not logged).
func TestAccessLogNamesKey(t *testing.T) {
	var logs testenv.Buffer
	e := testenv.StartWith(t, "", testenv.Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	agent, human := e.Keys["vantrow-bills/agent"], e.Keys["vantrow-bills/human"]
	agentID, _, err := ladder.ParseKeyToken(agent)
	if err != nil {
		t.Fatal(err)
	}
	humanID, _, err := ladder.ParseKeyToken(human)
	if err != nil {
		t.Fatal(err)
	}
	steps := func(key string) {
		t.Helper()
		if r := e.Do("GET", "/v1/steps", key, nil); r.Status != 200 {
			t.Fatalf("GET /v1/steps: %d %s", r.Status, r.Body)
		}
	}
	steps(human)
	if r := e.Do("POST", "/mcp", agent, rpcBody(1, "tools/call", map[string]any{"name": "route_item", "arguments": map[string]any{"step": "post_tms", "item": "LOG-1"}})); r.Status != 200 {
		t.Fatalf("route_item: %d %s", r.Status, r.Body)
	}
	if r := e.Do("POST", "/mcp", "", rpcBody(2, "tools/list", nil)); r.Status != 401 {
		t.Fatalf("/mcp without a key: %d %s", r.Status, r.Body)
	}
	steps(agent)

	got := requestLines(t, logs.String())
	want := []struct{ path, key string }{{"/v1/steps", humanID}, {"/mcp", agentID}, {"/mcp", ""}, {"/v1/steps", agentID}}
	if len(got) != len(want) {
		t.Fatalf("%d access log lines, want %d: %v", len(got), len(want), got)
	}
	for i, w := range want {
		if got[i]["path"] != w.path || got[i]["key_id"] != w.key {
			t.Errorf("line %d: path %v key_id %v, want %s %q", i, got[i]["path"], got[i]["key_id"], w.path, w.key)
		}
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ladderhq/ladder/gateway"
	"github.com/ladderhq/ladder/internal/testenv"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestDemoInProcess runs `ladder demo` through run, as main does, and
// uses what it prints and writes: the keys file signs in, the gateway file
// names the server, and cancelling the context (Ctrl-C) stops it cleanly.
func TestDemoInProcess(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	keysFile, gwFile := filepath.Join(dir, "keys.json"), filepath.Join(dir, "gateway.yaml")
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr testenv.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"demo", "--addr", addr, "--db", filepath.Join(dir, "demo.db"), "--keys", keysFile, "--gateway", gwFile},
			func(string) string { return "" }, strings.NewReader(""), &stdout, &stderr)
	}()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("demo ended with %v\n%s", err, stderr.String())
			}
			checkAccessLog(t, stderr.String())
		case <-time.After(20 * time.Second):
			t.Error("demo did not stop within 20s of its context ending")
		}
	}()
	url := "http://" + addr
	// Seeding imports ~40k rows through the engine: seconds in a normal
	// build, minutes under -race on a busy machine.
	deadline := time.Now().Add(5 * time.Minute)
	for !strings.Contains(stdout.String(), url) || !fileExists(gwFile) {
		if time.Now().After(deadline) {
			t.Fatalf("demo not ready in 5 minutes\nstdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
		}
		select {
		case err := <-done:
			t.Fatalf("demo ended early: %v\n%s", err, stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	var keys demoKeys
	data, err := os.ReadFile(keysFile)
	if err != nil || json.Unmarshal(data, &keys) != nil {
		t.Fatalf("keys file: %v %s", err, data)
	}
	req, _ := http.NewRequest("GET", url+"/v1/steps", nil)
	req.Header.Set("Authorization", "Bearer "+keys.Workspaces["vantrow-bills"]["agent"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"post_tms"`) {
		t.Fatalf("GET /v1/steps with the demo's agent key: %d %s", resp.StatusCode, body)
	}
	if gw, _ := os.ReadFile(gwFile); !strings.Contains(string(gw), url) {
		t.Errorf("gateway file does not name the server %s:\n%s", url, gw)
	}
	for _, want := range []string{"Seeded in", ": 6 approvals, 2 shadow proposals and ", "vantrow-bills", keysFile} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("banner lacks %q:\n%s", want, stdout.String())
		}
	}

	// The person the banner sends to the console finds work waiting there.
	req, _ = http.NewRequest("GET", url+"/v1/approvals?status=pending", nil)
	req.Header.Set("Authorization", "Bearer "+keys.Workspaces["vantrow-bills"]["human"])
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || strings.Count(string(body), `"status":"pending"`) != 3 || !strings.Contains(string(body), `"item":"BILL-771"`) {
		t.Errorf("pending approvals of the demo: %d %s", resp.StatusCode, body)
	}
}

// checkAccessLog: the demo's log, once it has stopped, is whole JSON
// lines, and holds the access lines of the test's two requests in the
// order they were made, before the line saying it is shutting down (the
// access log's lines are gathered and written together, internal/logbuf).
func checkAccessLog(t *testing.T, log string) {
	t.Helper()
	var paths []string
	shutdown := -1
	for i, l := range strings.Split(strings.TrimSuffix(log, "\n"), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %d is not JSON (%v): %q", i+1, err, l)
		}
		switch m["msg"] {
		case "request":
			if shutdown >= 0 {
				t.Errorf("access line after the shutdown line: %q", l)
			}
			paths = append(paths, m["path"].(string))
		case "shutting down; letting in-flight requests finish":
			shutdown = i
		}
	}
	if shutdown < 0 {
		t.Error("no shutdown line in the demo's log")
	}
	if want := "[/v1/steps /v1/approvals]"; fmt.Sprint(paths) != want {
		t.Errorf("access lines for %v, want %s", paths, want)
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// mcpLines runs `ladder mcp --stdio` with the given JSON-RPC lines on stdin
// and returns the answers, one per line.
func mcpLines(t *testing.T, env map[string]string, args []string, lines ...string) []map[string]any {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(context.Background(), append([]string{"mcp", "--stdio"}, args...), func(k string) string { return env[k] },
		strings.NewReader(strings.Join(lines, "\n")+"\n"), &out, &errb)
	if err != nil {
		t.Fatalf("ladder mcp: %v\n%s", err, errb.String())
	}
	var got []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("answer line %q: %v", l, err)
		}
		got = append(got, m)
	}
	return got
}

// TestMCPStdioBridge drives `ladder mcp --stdio` both ways a desktop agent
// starts it: against a server, and on a local store with --config/--db.
// Each gets the same answers a POST /mcp gives, one line per request, and
// a notification gets no line.
func TestMCPStdioBridge(t *testing.T) {
	e := testenv.StartWith(t, "", testenv.Options{Seed: true})
	agent := e.Keys["vantrow-bills/agent"]
	lines := []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"route_item","arguments":{"step":"post_tms","item":"BILL-1"}}}`,
		`{"jsonrpc":"2.0","id":"three","method":"tools/call","params":{"name":"no_such_tool","arguments":{}}}`,
	}
	check := func(t *testing.T, got []map[string]any) {
		t.Helper()
		if len(got) != 3 {
			t.Fatalf("%d answers, want 3 (none for the notification): %v", len(got), got)
		}
		if got[0]["id"] != 1.0 || got[0]["result"].(map[string]any)["serverInfo"].(map[string]any)["name"] != "ladder" {
			t.Errorf("initialize: %v", got[0])
		}
		res, _ := got[1]["result"].(map[string]any)
		sc, _ := res["structuredContent"].(map[string]any)
		if got[1]["id"] != 2.0 || sc["decision"] != "act_alone" {
			t.Errorf("route_item: %v", got[1])
		}
		if got[2]["id"] != "three" || (got[2]["error"] == nil && got[2]["result"].(map[string]any)["isError"] != true) {
			t.Errorf("unknown tool: %v", got[2])
		}
	}
	t.Run("server", func(t *testing.T) {
		check(t, mcpLines(t, map[string]string{"LADDER_SERVER": e.Server.URL, "LADDER_KEY": agent}, nil, lines...))
	})
	t.Run("local store", func(t *testing.T) {
		cfg := writeDemoConfig(t)
		db := filepath.Join(t.TempDir(), "ladder.db")
		out, _, err := runCLI(t, nil, "keys", "create", "--config", cfg, "--db", db, "--workspace", "vantrow-bills", "--kind", "agent", "--json")
		if err != nil {
			t.Fatal(err)
		}
		var k struct{ Token string }
		if err := json.Unmarshal([]byte(out), &k); err != nil {
			t.Fatal(err)
		}
		check(t, mcpLines(t, nil, []string{"--config", cfg, "--db", db, "--key", k.Token}, lines...))
	})
	t.Run("refusals", func(t *testing.T) {
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"mcp"}, "--stdio"},
			{[]string{"mcp", "--stdio"}, "--key"},
			{[]string{"mcp", "--stdio", "--key", "k"}, "--server"},
		} {
			_, _, err := runCLI(t, nil, tc.args...)
			if exitCode(err) != 3 || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v: %v, want exit 3 naming %s", tc.args, err, tc.want)
			}
		}
	})
}

// TestGatewayStdioInProcess serves ask_autonomy_ladder through run over a
// pair of pipes, as a desktop agent would over the process's stdio, and
// asks it about a step by the name seed 000's alias gives.
func TestGatewayStdioInProcess(t *testing.T) {
	e := testenv.StartWith(t, "", testenv.Options{Seed: true})
	gwFile := filepath.Join(t.TempDir(), "gateway.yaml")
	body := "workspaces:\n  vantrow-bills:\n    server: " + e.Server.URL + "\n    key: " + e.Keys["vantrow-bills/agent"] +
		"\n  checkcall-loads:\n    server: " + e.Server.URL + "\n    key: " + e.Keys["checkcall-loads/agent"] +
		"\naliases:\n  Check the fuel surcharge: Rate check\n"
	if err := os.WriteFile(gwFile, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		var errb bytes.Buffer
		err := run(ctx, []string{"gateway", "--stdio", "--gateway", gwFile}, func(string) string { return "" }, inR, outW, &errb)
		outW.Close()
		done <- err
	}()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "inprocess-gateway", Version: "1"}, nil).
		Connect(ctx, &sdk.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "ask_autonomy_ladder", Arguments: map[string]any{"step": "Check the fuel surcharge"}})
	if err != nil {
		t.Fatal(err)
	}
	var a gateway.Answer
	data, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(data, &a); err != nil || res.IsError || a.Status != gateway.StatusFound || a.Name != "Rate check" || a.Workspace != "vantrow-bills" {
		t.Fatalf("ask: %v %+v (%s)", err, a, data)
	}
	cs.Close()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("gateway ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("gateway did not stop within 10s")
	}
}

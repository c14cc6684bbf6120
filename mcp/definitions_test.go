package mcp_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ladderhq/ladder/internal/testenv"
	"github.com/ladderhq/ladder/mcp"
)

// bearerTransport adds the key to every request of the go-sdk client.
type bearerTransport struct {
	key      string
	versions *[]string // MCP-Protocol-Version headers sent, when non-nil
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.versions != nil {
		*b.versions = append(*b.versions, r.Header.Get("MCP-Protocol-Version"))
	}
	r.Header.Set("Authorization", "Bearer "+b.key)
	return http.DefaultTransport.RoundTrip(r)
}

func connect(t *testing.T, url, key string) *sdk.ClientSession {
	t.Helper()
	return connectRecording(t, url, key, nil)
}

func connectRecording(t *testing.T, url, key string, versions *[]string) *sdk.ClientSession {
	t.Helper()
	client := sdk.NewClient(&sdk.Implementation{Name: "ladder-test", Version: "1"}, nil)
	cs, err := client.Connect(t.Context(), &sdk.StreamableClientTransport{Endpoint: url + "/mcp", HTTPClient: &http.Client{Transport: bearerTransport{key: key, versions: versions}}}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// walkProperties checks every property of a schema, recursively, for a
// type and a description.
func walkProperties(path string, s map[string]any, defs map[string]any, problems *[]string) {
	if ref, ok := s["$ref"].(string); ok {
		name := strings.TrimPrefix(ref, "#/$defs/")
		if d, ok := defs[name].(map[string]any); ok {
			s = d
		}
	}
	props, _ := s["properties"].(map[string]any)
	for name, p := range props {
		pm, _ := p.(map[string]any)
		pp := path + "." + name
		if ref, ok := pm["$ref"].(string); ok {
			if d, ok := defs[strings.TrimPrefix(ref, "#/$defs/")].(map[string]any); ok {
				if pm["description"] == nil {
					*problems = append(*problems, pp+": no description")
				}
				walkProperties(pp, d, defs, problems)
				continue
			}
		}
		if pm["type"] == nil {
			*problems = append(*problems, pp+": no type")
		}
		if d, _ := pm["description"].(string); d == "" {
			*problems = append(*problems, pp+": no description")
		}
		walkProperties(pp, pm, defs, problems)
		if items, ok := pm["items"].(map[string]any); ok {
			walkProperties(pp+"[]", items, defs, problems)
		}
	}
}

// TestToolDefinitions walks tools/list as a client sees it and fails on any
// property without a type or a description, and any tool without a title,
// an output schema or annotations (DESIGN.md §3.1, the seed 003 review).
func TestToolDefinitions(t *testing.T) {
	e := testenv.Start(t, "")
	for _, ws := range e.Svc.WorkspaceIDs() {
		cs := connect(t, e.Server.URL, e.Keys[ws+"/agent"])
		res, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Tools) < 3 {
			t.Fatalf("%s: %d tools", ws, len(res.Tools))
		}
		for _, tool := range res.Tools {
			var problems []string
			if tool.Title == "" {
				problems = append(problems, "no title")
			}
			if n := len(tool.Description); n < 150 || n > 500 {
				problems = append(problems, fmt.Sprintf("description is %d characters, want 150–500", n))
			}
			if tool.Annotations == nil || tool.Annotations.DestructiveHint == nil || tool.Annotations.OpenWorldHint == nil {
				problems = append(problems, "annotations missing or incomplete")
			}
			in, _ := tool.InputSchema.(map[string]any)
			out, _ := tool.OutputSchema.(map[string]any)
			if in == nil || in["type"] != "object" {
				problems = append(problems, "input schema is not an object schema")
			}
			if out == nil {
				problems = append(problems, "no output schema")
			}
			inDefs, _ := in["$defs"].(map[string]any)
			outDefs, _ := out["$defs"].(map[string]any)
			walkProperties("input", in, inDefs, &problems)
			walkProperties("output", out, outDefs, &problems)
			for _, p := range problems {
				t.Errorf("%s %s: %s", ws, tool.Name, p)
			}
		}
	}
}

// TestAnnotationsTellTheTruth: read tools are read-only; route_item writes
// to the audit log, so it is not.
func TestAnnotationsTellTheTruth(t *testing.T) {
	e := testenv.Start(t, "")
	cs := connect(t, e.Server.URL, e.Keys["vantrow-bills/agent"])
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"which_steps_run_alone": true, "step_evidence": true, "route_item": false}
	for _, tool := range res.Tools {
		if ro, ok := want[tool.Name]; ok && tool.Annotations.ReadOnlyHint != ro {
			t.Errorf("%s readOnlyHint = %v, want %v", tool.Name, tool.Annotations.ReadOnlyHint, ro)
		}
	}
}

// TestProtocolVersions: clients speaking 2025-06-18, 2025-11-25 and
// 2026-07-28 each list and call the tools.
func TestProtocolVersions(t *testing.T) {
	e := testenv.StartWith(t, "", testenv.Options{Seed: true})
	key := e.Keys["vantrow-bills/agent"]
	for _, v := range []string{"2025-06-18", "2025-11-25"} {
		t.Run(v, func(t *testing.T) {
			h := []testenv.Header{{Name: "MCP-Protocol-Version", Value: v}}
			init := e.DoWith("POST", "/mcp", key, fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"old","version":"1"}}}`, v))
			res, _ := init.Body["result"].(map[string]any)
			if res["protocolVersion"] != v {
				t.Fatalf("initialize: %s", init.Raw)
			}
			list := e.DoWith("POST", "/mcp", key, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, h...)
			if tools, _ := list.Body["result"].(map[string]any)["tools"].([]any); len(tools) < 3 {
				t.Fatalf("tools/list: %s", list.Raw)
			}
			c := e.DoWith("POST", "/mcp", key, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"step_evidence","arguments":{"step":"decide_hold"}}}`, h...)
			if sc, _ := c.Body["result"].(map[string]any)["structuredContent"].(map[string]any); sc["lane"] != "shadow" {
				t.Fatalf("tools/call: %s", c.Raw)
			}
		})
	}
	t.Run("2026-07-28 (go-sdk client)", func(t *testing.T) {
		var versions []string
		cs := connectRecording(t, e.Server.URL, key, &versions)
		res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "route_item", Arguments: map[string]any{"step": "Post to the TMS", "item": "B-9"}})
		if err != nil || res.IsError {
			t.Fatalf("call: %v %+v", err, res)
		}
		sc := res.StructuredContent.(map[string]any)
		if sc["decision"] != "act_alone" {
			t.Fatalf("route_item: %v", sc)
		}
		if last := versions[len(versions)-1]; last != "2026-07-28" {
			t.Fatalf("the go-sdk client spoke %q (all: %v), want 2026-07-28", last, versions)
		}
	})
}

// TestPortableToolNames: --tool-names portable lists ticket6_readLedger,
// and calls accept both spellings.
func TestPortableToolNames(t *testing.T) {
	e := testenv.StartWith(t, "", testenv.Options{ToolNames: "portable"})
	cs := connect(t, e.Server.URL, e.Keys["partner-programs/agent"])
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	all := strings.Join(names, ",")
	if !strings.Contains(all, "ticket6_readLedger") || strings.Contains(all, "ticket6:readLedger") {
		t.Fatalf("portable listing: %v", names)
	}
	args := map[string]any{"program": "partner-2027", "relationship": "relationship:partner-2027:creator-1"}
	for _, name := range []string{"ticket6_readLedger", "ticket6:readLedger"} {
		r, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args})
		if err != nil || r.IsError {
			t.Fatalf("call %s: %v %+v", name, err, r)
		}
	}
}

// TestColonToolNamesWarnOnce: canonical capability names carry ':', which
// the go-sdk reports as an error for every tool on every rebuild; the
// operator gets one warning that names the tools and the way out instead.
func TestColonToolNamesWarnOnce(t *testing.T) {
	e := testenv.Start(t, "")
	for _, names := range []string{mcp.NamesCanonical, mcp.NamesPortable} {
		var buf bytes.Buffer
		log := slog.New(slog.NewJSONHandler(&buf, nil))
		if _, err := mcp.New(mcp.Options{Service: e.Svc, Logger: log, ToolNames: names}); err != nil {
			t.Fatal(err)
		}
		out := buf.String()
		if strings.Contains(out, "AddTool") || strings.Contains(out, `"level":"ERROR"`) {
			t.Errorf("%s names: the SDK's tool-name errors reached the log:\n%s", names, out)
		}
		warned := strings.Count(out, "--tool-names portable")
		switch {
		case names == mcp.NamesCanonical && (warned != 1 || !strings.Contains(out, "ticket6:readLedger")):
			t.Errorf("canonical names: want one warning naming ticket6:readLedger and --tool-names portable, got:\n%s", out)
		case names == mcp.NamesPortable && warned != 0:
			t.Errorf("portable names: want no warning, got:\n%s", out)
		}
	}
}

// TestIdempotencyKeyReusedIsAToolError: an agent that reuses a key with
// another payload can fix that itself, so it gets an isError result naming
// the refusal, not a protocol error.
func TestIdempotencyKeyReusedIsAToolError(t *testing.T) {
	e := testenv.Start(t, "")
	key := e.Keys["partner-programs/agent"]
	args := func(commission string) map[string]any {
		return map[string]any{"program": "partner-2027", "relationship": "relationship:partner-2027:creator-1",
			"payload": map[string]any{"commission_id": commission}, "idempotency_key": "commission-1"}
	}
	first := callTool(t, e, key, "ticket6:approveCommission", args("c-1"))
	if first.IsError || first.RPCError != nil || first.Structured["approval_id"] == nil {
		t.Fatalf("first call: %s", first.Raw)
	}
	again := callTool(t, e, key, "ticket6:approveCommission", args("c-2"))
	if !again.IsError || !strings.HasPrefix(again.Text, "IDEMPOTENCY_KEY_REUSED: ") || !strings.Contains(again.Text, "new idempotency_key") {
		t.Fatalf("reused key with another payload: %s", again.Raw)
	}
}

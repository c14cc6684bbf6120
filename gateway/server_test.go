package gateway_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ladderhq/ladder/gateway"
)

// checkSchema checks that every property has a type and a description.
func checkSchema(t *testing.T, path string, s map[string]any, defs map[string]any) {
	t.Helper()
	if ref, ok := s["$ref"].(string); ok {
		name := strings.TrimPrefix(ref, "#/$defs/")
		d, ok := defs[name].(map[string]any)
		if !ok {
			t.Fatalf("%s: dangling $ref %s", path, ref)
		}
		checkSchema(t, path, d, defs)
		return
	}
	if s["type"] == nil {
		t.Errorf("%s: no type", path)
	}
	if d, _ := s["description"].(string); d == "" && path != "" {
		t.Errorf("%s: no description", path)
	}
	props, _ := s["properties"].(map[string]any)
	for name, p := range props {
		checkSchema(t, path+"."+name, p.(map[string]any), defs)
	}
	if items, ok := s["items"].(map[string]any); ok {
		checkSchema(t, path+"[]", items, defs)
	}
}

func TestServer(t *testing.T) {
	e := seeded(t)
	g := gateway.New(demoFile(e), gateway.Options{})
	srv := gateway.NewServer(g, "test", nil)
	ct, st := sdk.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Tools) != 1 {
		t.Fatalf("tools: %v", list.Tools)
	}
	tool := list.Tools[0]
	if tool.Name != "ask_autonomy_ladder" || tool.Title == "" || tool.Annotations == nil || !tool.Annotations.ReadOnlyHint || tool.Annotations.DestructiveHint == nil || *tool.Annotations.DestructiveHint {
		t.Fatalf("tool: %+v", tool)
	}
	if n := len(tool.Description); n < 150 || n > 500 {
		t.Errorf("description is %d characters, want 150–500", n)
	}
	for name, schema := range map[string]any{"input": tool.InputSchema, "output": tool.OutputSchema} {
		var m map[string]any
		data, _ := json.Marshal(schema)
		json.Unmarshal(data, &m)
		defs, _ := m["$defs"].(map[string]any)
		if m["type"] != "object" {
			t.Errorf("%s schema type %v", name, m["type"])
		}
		checkSchema(t, name, m, defs)
	}

	call := func(step string) (*sdk.CallToolResult, gateway.Answer) {
		t.Helper()
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "ask_autonomy_ladder", Arguments: map[string]any{"step": step}})
		if err != nil {
			t.Fatal(err)
		}
		var a gateway.Answer
		data, _ := json.Marshal(res.StructuredContent)
		json.Unmarshal(data, &a)
		return res, a
	}
	res, a := call("Check the fuel surcharge")
	if res.IsError || a.Status != "found" || a.Name != "Rate check" || a.Lane != "propose" || a.Rolling4 == nil || a.Rolling4.Accuracy == nil {
		t.Fatalf("found: %+v", a)
	}
	if text := res.Content[0].(*sdk.TextContent).Text; !strings.HasPrefix(text, "Rate check (vantrow-bills, queue bills) is in propose") {
		t.Fatalf("text %q", text)
	}
	res, a = call("Reticulate splines")
	if !res.IsError || a.Status != "not_found" || len(a.Nearest) == 0 || !strings.Contains(res.Content[0].(*sdk.TextContent).Text, "nearest names") {
		t.Fatalf("not found: %+v", a)
	}
	res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "ask_autonomy_ladder", Arguments: map[string]any{"stop": "x"}})
	if err == nil && !res.IsError {
		t.Fatalf("unknown argument accepted: %+v", res)
	}
}

package http_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/ladderhq/ladder/config"
	"github.com/ladderhq/ladder/internal/testenv"
)

// hostile are the JSON-smuggling cases every surface must refuse before a
// handler sees them (GHSA-q382-vc8q-7jhj and the case-variant advisory).
var hostile = []struct {
	name string
	// body builds a request body around a step field.
	rest, mcp string
	want      string
}{
	{"duplicate key", `{"step":"post_tms","step":"read_bill","item":"a"}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"route_item","arguments":{"step":"post_tms","step":"read_bill","item":"a"}}}`, "duplicate key"},
	{"case-variant key", `{"Step":"post_tms","item":"a"}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"route_item","arguments":{"Step":"post_tms","step":"read_bill","item":"a"}}}`, "case"},
	{"NUL-suffixed key", "{\"step\\u0000\":\"post_tms\",\"step\":\"read_bill\",\"item\":\"a\"}",
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"route_item\",\"arguments\":{\"step\\u0000\":\"x\",\"step\":\"post_tms\",\"item\":\"a\"}}}", "NUL"},
	{"invalid UTF-8 key", "{\"st\xffep\":\"post_tms\",\"item\":\"a\"}",
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"route_item\",\"arguments\":{\"st\xffep\":\"x\",\"item\":\"a\"}}}", "UTF-8"},
	{"nesting deeper than 64", `{"step":"post_tms","item":"a","features":` + strings.Repeat(`{"a":`, 70) + `1` + strings.Repeat(`}`, 70) + `}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"route_item","arguments":{"step":"post_tms","item":"a","features":` + strings.Repeat(`{"a":`, 70) + `1` + strings.Repeat(`}`, 70) + `}}}`, "nesting"},
}

func TestStrictInputEverySurface(t *testing.T) {
	e := testenv.Start(t, "")
	agent := e.Keys["vantrow-bills/agent"]
	for _, h := range hostile {
		t.Run("REST/"+h.name, func(t *testing.T) {
			r := e.Do("POST", "/v1/route", agent, h.rest)
			if r.Status != 400 || !strings.Contains(string(r.Raw), h.want) {
				t.Fatalf("got %d %s", r.Status, r.Raw)
			}
		})
		t.Run("MCP/"+h.name, func(t *testing.T) {
			r := e.Do("POST", "/mcp", agent, h.mcp)
			raw := string(r.Raw)
			refused := r.Status == 400 || strings.Contains(raw, `"isError":true`)
			if !refused || !strings.Contains(raw, h.want) || strings.Contains(raw, `"route_id"`) {
				t.Fatalf("got %d %s", r.Status, raw)
			}
		})
	}
	// Nothing reached a handler: no route was recorded.
	recs, err := e.Store.ListAudit(t.Context(), auditQuery("vantrow-bills", "route"))
	if err != nil || len(recs) != 0 {
		t.Fatalf("%d routes recorded from hostile input (%v)", len(recs), err)
	}
}

// TestStrictConfig: the config file refuses the same classes in YAML.
func TestStrictConfig(t *testing.T) {
	base := "workspaces:\n  - id: w\n    queues:\n      - id: q\n        steps:\n          - id: s\n            name: S\n"
	deep := "workspaces:\n  - id: w\n    queues:\n      - id: q\n        steps:\n          - id: s\n            name: S\n    capabilities:\n      - id: a:b\n        title: T\n        description: D\n        executor: {kind: record}\n        payload_schema: " + strings.Repeat("{a: ", 70) + "1" + strings.Repeat("}", 70) + "\n"
	tests := []struct{ name, yaml string }{
		{"duplicate key", base + "            name: T\n"},
		{"case-variant key", base + "            Lane: auto\n"},
		{"NUL in a key", base + "            \"la\\0ne\": auto\n"},
		{"invalid UTF-8", base + "            lane: \xff\n"},
		{"nesting deeper than 64", deep},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.Parse("ladder.yaml", []byte(tt.yaml))
			if err == nil {
				t.Fatal("accepted")
			}
			var ce *config.Error
			if !errors.As(err, &ce) || !strings.HasPrefix(err.Error(), "ladder.yaml:") {
				t.Fatalf("error does not name file and line: %v", err)
			}
		})
	}
}

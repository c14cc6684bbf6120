package http_test

import (
	"strings"
	"testing"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/internal/testenv"
)

// TestRefusalsSpeakTheSurfaceInUse: one refusal (a step nobody has), read
// over REST, over MCP and by a client that asks for the CLI's terms, names
// the operation that lists the steps as that reader calls it, and never as
// another surface does.
func TestRefusalsSpeakTheSurfaceInUse(t *testing.T) {
	e := testenv.Start(t, "")
	agent := e.Keys["vantrow-bills/agent"]
	route := map[string]any{"step": "Reconcile the moon", "item": "BILL-1"}

	cases := []struct {
		name    string
		text    func() string
		want    string
		notWant []string
	}{
		{"rest", func() string {
			r := e.Do("POST", "/v1/route", agent, route)
			return r.ErrorHint() + " | " + r.Body["error"].(map[string]any)["message"].(string)
		}, "GET /v1/steps", []string{"which_steps_run_alone", "ladder steps", "{{"}},
		{"cli over rest", func() string {
			r := e.DoWith("POST", "/v1/route", agent, route, testenv.Header{Name: ladder.SurfaceHeader, Value: "cli"})
			return r.ErrorHint() + " | " + r.Body["error"].(map[string]any)["message"].(string)
		}, "ladder steps", []string{"which_steps_run_alone", "/v1/", "{{"}},
		{"mcp", func() string {
			r := e.Do("POST", "/mcp", agent, rpcBody(1, "tools/call", map[string]any{"name": "route_item", "arguments": route}))
			res := r.Body["result"].(map[string]any)
			return res["content"].([]any)[0].(map[string]any)["text"].(string)
		}, "which_steps_run_alone", []string{"/v1/", "ladder steps", "{{"}},
	}
	for _, c := range cases {
		got := c.text()
		if !strings.Contains(got, c.want) {
			t.Errorf("%s: %q does not name %q", c.name, got, c.want)
		}
		for _, bad := range c.notWant {
			if strings.Contains(got, bad) {
				t.Errorf("%s: %q names %q, another surface's term", c.name, got, bad)
			}
		}
	}
}

// TestCapabilitiesListIsRESTsToolsList: the endpoint an unknown-capability
// hint names over REST lists what tools/list lists on /mcp (the served
// capabilities, with their step's lane), and never an executor's address.
func TestCapabilitiesListIsRESTsToolsList(t *testing.T) {
	e := testenv.Start(t, "")
	agent := e.Keys["vantrow-bills/agent"]
	r := e.Do("POST", "/v1/capabilities/nope:nothing/call", agent, map[string]any{"payload": map[string]any{}, "idempotency_key": "k1"})
	if r.ErrorCode() != "UNKNOWN_CAPABILITY" || !strings.Contains(r.ErrorHint(), "GET /v1/capabilities") {
		t.Fatalf("unknown capability over REST: %d %s", r.Status, r.Raw)
	}
	list := e.Do("GET", "/v1/capabilities", agent, nil)
	if list.Status != 200 {
		t.Fatalf("GET /v1/capabilities: %d %s", list.Status, list.Raw)
	}
	var rest []string
	for _, c := range list.Body["capabilities"].([]any) {
		c := c.(map[string]any)
		rest = append(rest, c["id"].(string))
		if c["step"] != nil && c["lane"] == nil {
			t.Errorf("%v is tied to a step but shows no lane", c["id"])
		}
	}
	tools := e.Do("POST", "/mcp", agent, rpcBody(1, "tools/list", nil))
	var mcp []string
	for _, tl := range tools.Body["result"].(map[string]any)["tools"].([]any) {
		name := tl.(map[string]any)["name"].(string)
		if strings.Contains(name, ":") {
			mcp = append(mcp, name)
		}
	}
	if len(rest) == 0 || strings.Join(rest, ",") != strings.Join(mcp, ",") {
		t.Fatalf("GET /v1/capabilities lists %v, tools/list %v", rest, mcp)
	}
	if strings.Contains(string(list.Raw), "demo:") || strings.Contains(string(list.Raw), "executor") {
		t.Fatalf("the list shows an executor: %s", list.Raw)
	}
	if r := e.Do("GET", "/v1/capabilities", e.Keys["vantrow-bills/admin"], nil); r.Status != 403 {
		t.Fatalf("an admin key lists capabilities: %d", r.Status)
	}
}

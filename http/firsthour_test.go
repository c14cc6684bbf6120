package http_test

import (
	"strings"
	"testing"

	"github.com/ladderhq/ladder/internal/testenv"
)

// TestKeyWithoutBearerSaysSo: a key sent as "Authorization: ldr_…",
// without the Bearer scheme, is refused saying that the scheme is missing
// and showing the header to send, on REST and on /mcp, instead of "no key
// was sent".
func TestKeyWithoutBearerSaysSo(t *testing.T) {
	e := testenv.Start(t, "")
	agent := e.Keys["vantrow-bills/agent"]
	for _, tt := range []struct {
		name, method, path string
		body               any
	}{
		{"REST", "GET", "/v1/steps", nil},
		{"MCP", "POST", "/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := e.DoWith(tt.method, tt.path, "", tt.body, testenv.Header{Name: "Authorization", Value: agent})
			if r.Status != 401 {
				t.Fatalf("status %d, want 401: %s", r.Status, r.Raw)
			}
			raw := string(r.Raw)
			if !strings.Contains(raw, "no Bearer scheme") || !strings.Contains(raw, "Authorization: Bearer ldr_") {
				t.Errorf("the refusal does not say the Bearer scheme is missing: %s", raw)
			}
			if strings.Contains(raw, agent) {
				t.Error("the response echoes the key")
			}
		})
	}
}

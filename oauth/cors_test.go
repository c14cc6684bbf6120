package oauth_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ladderhq/ladder/internal/testenv"
	"github.com/ladderhq/ladder/oauth"
)

// TestCORS: a browser-based MCP client at an allowed origin (the
// Inspector's web UI) can read /mcp's 401 challenge and answers and the
// metadata; the metadata is public to every origin; another origin gets
// no CORS answer from /mcp; the console and the REST API answer no
// origin; and nothing ever allows credentials, so the console's cookie
// session is never usable cross-origin.
func TestCORS(t *testing.T) {
	f := newFakeIssuer(t)
	l, base := listen(t)
	const inspector = "http://localhost:6274"
	cfg := strings.Replace(demoWithIdentity(base, fmtIdentity(f.URL, "")), "server:\n", "server:\n  allowed_origins: ["+inspector+"]\n", 1)
	e := testenv.StartWith(t, cfg, testenv.Options{Listener: l})
	key := e.Keys["vantrow-bills/agent"]
	preflight := func(method, headers string) map[string]string {
		return map[string]string{"Access-Control-Request-Method": method, "Access-Control-Request-Headers": headers}
	}
	const rpc = `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	for _, tt := range []struct {
		name, method, path, origin, key, body string
		headers                               map[string]string
		status                                int
		want                                  map[string]string // "" means absent
	}{
		{name: "preflight /mcp, allowed origin", method: "OPTIONS", path: "/mcp", origin: inspector,
			headers: preflight("POST", "authorization,content-type,mcp-protocol-version"), status: 204,
			want: map[string]string{"Access-Control-Allow-Origin": inspector, "Access-Control-Allow-Methods": "POST, GET, DELETE",
				"Access-Control-Allow-Headers": "Authorization, Content-Type, Accept, Mcp-Protocol-Version, Mcp-Session-Id, Last-Event-ID"}},
		{name: "401 on /mcp, allowed origin", method: "POST", path: "/mcp", origin: inspector, body: rpc, status: 401,
			want: map[string]string{"Access-Control-Allow-Origin": inspector, "Access-Control-Expose-Headers": "WWW-Authenticate, Mcp-Session-Id, Mcp-Protocol-Version, Retry-After",
				"WWW-Authenticate": `Bearer realm="ladder", resource_metadata="` + base + `/.well-known/oauth-protected-resource/mcp"`}},
		{name: "tools/list on /mcp, allowed origin", method: "POST", path: "/mcp", origin: inspector, key: key, body: rpc, status: 200,
			want: map[string]string{"Access-Control-Allow-Origin": inspector}},
		{name: "preflight /mcp, other origin", method: "OPTIONS", path: "/mcp", origin: "https://evil.example",
			headers: preflight("POST", "authorization"), status: 403, want: map[string]string{"Access-Control-Allow-Origin": "", "Access-Control-Allow-Methods": ""}},
		{name: "POST /mcp, other origin", method: "POST", path: "/mcp", origin: "https://evil.example", key: key, body: rpc, status: 403,
			want: map[string]string{"Access-Control-Allow-Origin": "", "Access-Control-Expose-Headers": ""}},
		{name: "metadata, any origin", method: "GET", path: oauth.MetadataPath + "/mcp", origin: "https://evil.example", status: 200,
			want: map[string]string{"Access-Control-Allow-Origin": "*"}},
		{name: "preflight metadata", method: "OPTIONS", path: oauth.MetadataPath + "/mcp", origin: inspector,
			headers: preflight("GET", "mcp-protocol-version"), status: 204,
			want: map[string]string{"Access-Control-Allow-Origin": "*", "Access-Control-Allow-Headers": "Mcp-Protocol-Version, Accept"}},
		{name: "console, allowed origin", method: "GET", path: "/console/signin", origin: inspector, status: 200,
			want: map[string]string{"Access-Control-Allow-Origin": ""}},
		{name: "console preflight", method: "OPTIONS", path: "/console/signin", origin: inspector, headers: preflight("POST", "content-type"),
			want: map[string]string{"Access-Control-Allow-Origin": "", "Access-Control-Allow-Methods": ""}},
		{name: "REST, allowed origin", method: "GET", path: "/v1/steps", origin: inspector, key: key, status: 200,
			want: map[string]string{"Access-Control-Allow-Origin": ""}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var body *strings.Reader
			if tt.body != "" {
				body = strings.NewReader(tt.body)
			}
			var req *http.Request
			if body != nil {
				req, _ = http.NewRequest(tt.method, base+tt.path, body)
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
			} else {
				req, _ = http.NewRequest(tt.method, base+tt.path, nil)
			}
			req.Header.Set("Origin", tt.origin)
			if tt.key != "" {
				req.Header.Set("Authorization", "Bearer "+tt.key)
			}
			for k, v := range tt.headers {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if tt.status != 0 && resp.StatusCode != tt.status {
				t.Errorf("status %d, want %d", resp.StatusCode, tt.status)
			}
			got := map[string]string{}
			for h := range tt.want {
				got[h] = resp.Header.Get(h)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("headers (-want +got):\n%s", diff)
			}
			if c := resp.Header.Get("Access-Control-Allow-Credentials"); c != "" {
				t.Errorf("Access-Control-Allow-Credentials: %q; no answer may allow credentials", c)
			}
		})
	}
}

package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ladderhq/ladder/config"
	"github.com/ladderhq/ladder/internal/testenv"
)

// TestServeIdentityWiring: `ladder serve` with an identity section serves
// the Protected Resource Metadata, answers a keyless /mcp request with a
// challenge that points at it, and shows the single sign-on button.
func TestServeIdentityWiring(t *testing.T) {
	addr := freeAddr(t)
	base := "http://" + addr
	dir := t.TempDir()
	cfg := strings.Replace(string(config.Demo()), "server:\n", "server:\n  public_url: "+base+"\n", 1) + `
identity:
  issuers:
    - name: corp
      issuer: https://login.example.com/realms/corp
      console: {client_id: ladder-console, label: Sign in with Corp}
      rules: [{client_id: bot, workspace: vantrow-bills, kind: agent}]
`
	cfgPath := filepath.Join(dir, "ladder.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr testenv.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--unsigned-audit", "--config", cfgPath, "--db", filepath.Join(dir, "l.db"), "--addr", addr}, func(string) string { return "" }, strings.NewReader(""), &stdout, &stderr)
	}()
	get := func(method, path string) (*http.Response, string) {
		req, _ := http.NewRequest(method, base+path, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if resp, _ := get("GET", "/healthz"); resp != nil && resp.StatusCode == 200 {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("serve exited: %v\n%s", err, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not answer /healthz\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	resp, body := get("GET", "/.well-known/oauth-protected-resource/mcp")
	want := `{"resource":"` + base + `/mcp","authorization_servers":["https://login.example.com/realms/corp"],"bearer_methods_supported":["header"],"resource_name":"ladder"}`
	if resp.StatusCode != 200 || strings.TrimSpace(body) != want {
		t.Errorf("metadata: %d %s, want %s", resp.StatusCode, body, want)
	}
	resp, _ = get("POST", "/mcp")
	if c := resp.Header.Get("WWW-Authenticate"); resp.StatusCode != 401 || c != `Bearer realm="ladder", resource_metadata="`+base+`/.well-known/oauth-protected-resource/mcp"` {
		t.Errorf("keyless /mcp: %d %q", resp.StatusCode, c)
	}
	resp, body = get("GET", "/console/signin")
	if resp.StatusCode != 200 || !strings.Contains(body, `href="/console/oidc/corp/start"`) || !strings.Contains(body, "Sign in with Corp") {
		t.Errorf("sign-in page has no single sign-on button: %d\n%s", resp.StatusCode, body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v\n%s", err, stderr.String())
	}
}

package oauth_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/ladderhq/ladder/oauth"
)

// Tests against a real authorization server: Ory Hydra v2.3.0, run on
// loopback with a fresh PostgreSQL database. LADDER_TEST_HYDRA names the
// hydra binary (.ci/run builds it); without it these tests skip, and CI
// fails when they did. LADDER_TEST_HYDRA_PG is the PostgreSQL server to
// create the database on (default postgres://postgres@127.0.0.1:5432).

// hydra is a running Hydra.
type hydra struct {
	Public, Admin string // base URLs
}

// hydraLogin, when set, is the URL Hydra sends browsers to for login and
// consent (the console test's handler).
func startHydra(t *testing.T, loginURL, consentURL string) *hydra {
	t.Helper()
	bin := os.Getenv("LADDER_TEST_HYDRA")
	if bin == "" {
		t.Skip("LADDER_TEST_HYDRA is not set: no Ory Hydra to test against (.ci/run builds it)")
	}
	pgBase := os.Getenv("LADDER_TEST_HYDRA_PG")
	if pgBase == "" {
		pgBase = "postgres://postgres@127.0.0.1:5432"
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgBase+"/postgres?sslmode=disable")
	if err != nil {
		t.Fatalf("PostgreSQL for Hydra at %s: %v", pgBase, err)
	}
	var rb [6]byte
	_, _ = rand.Read(rb[:])
	db := "hydra_test_" + hex.EncodeToString(rb[:])
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+db); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)")
		conn.Close(context.Background())
	})
	dsn := pgBase + "/" + db + "?sslmode=disable"
	migrate := exec.Command(bin, "migrate", "sql", "up", "-e", "--yes")
	migrate.Env = append(os.Environ(), "DSN="+dsn)
	if out, err := migrate.CombinedOutput(); err != nil {
		t.Fatalf("hydra migrate: %v\n%s", err, out)
	}
	pub, adm := freePort(t), freePort(t)
	h := &hydra{Public: fmt.Sprintf("http://127.0.0.1:%d", pub), Admin: fmt.Sprintf("http://127.0.0.1:%d", adm)}
	if loginURL == "" {
		loginURL, consentURL = h.Public+"/no-login", h.Public+"/no-consent"
	}
	cmd := exec.Command(bin, "serve", "all", "--dev")
	cmd.Env = append(os.Environ(),
		"DSN="+dsn,
		"SECRETS_SYSTEM=ladder-test-system-secret-0123456789abcdef",
		"URLS_SELF_ISSUER="+h.Public,
		"URLS_LOGIN="+loginURL, "URLS_CONSENT="+consentURL, "URLS_LOGOUT="+strings.TrimSuffix(loginURL, "/login")+"/logout",
		"STRATEGIES_ACCESS_TOKEN=jwt",
		fmt.Sprintf("SERVE_PUBLIC_PORT=%d", pub), "SERVE_PUBLIC_HOST=127.0.0.1",
		fmt.Sprintf("SERVE_ADMIN_PORT=%d", adm), "SERVE_ADMIN_HOST=127.0.0.1",
		"LOG_LEVEL=warn", "SQA_OPT_OUT=true",
	)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("hydra log:\n%s", logs.String())
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(h.Admin + "/health/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("hydra not ready after 60 s:\n%s", logs.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	return h
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// admin calls Hydra's admin API and decodes the answer into out.
func (h *hydra) admin(t *testing.T, method, path string, body, out any) {
	t.Helper()
	if err := h.adminDo(method, path, body, out); err != nil {
		t.Fatal(err)
	}
}

func (h *hydra) adminDo(method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		data, _ := json.Marshal(body)
		rd = bytes.NewReader(data)
	}
	req, _ := http.NewRequest(method, h.Admin+path, rd)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		return fmt.Errorf("hydra %s %s: %d %s", method, path, resp.StatusCode, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("hydra %s %s: %v: %s", method, path, err, data)
		}
	}
	return nil
}

// client registers an OAuth client and returns its id and secret.
func (h *hydra) client(t *testing.T, c map[string]any) (id, secret string) {
	t.Helper()
	var out struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
	}
	h.admin(t, "POST", "/admin/clients", c, &out)
	return out.ClientID, out.ClientSecret
}

// agentClient registers a client-credentials client for ladder's resource.
func (h *hydra) agentClient(t *testing.T, base, strategy string) clientcredentials.Config {
	t.Helper()
	id, secret := h.client(t, map[string]any{
		"client_name": "ladder test agent", "grant_types": []string{"client_credentials"},
		"audience": []string{base, base + "/mcp"}, "scope": "ladder",
		"access_token_strategy": strategy, "token_endpoint_auth_method": "client_secret_basic",
	})
	return clientcredentials.Config{ClientID: id, ClientSecret: secret, TokenURL: h.Public + "/oauth2/token", Scopes: []string{"ladder"},
		EndpointParams: url.Values{"audience": {base + "/mcp"}}}
}

// hydraIdentity is ladder's identity section trusting h, mapping the agent
// client and introspecting opaque tokens through h's admin API.
func hydraIdentity(h *hydra, agents ...string) string {
	var rules strings.Builder
	for _, a := range agents {
		fmt.Fprintf(&rules, "        - {client_id: %s, workspace: vantrow-bills, kind: agent}\n", a)
	}
	return fmt.Sprintf(`identity:
  issuers:
    - name: hydra
      issuer: %s
      scopes: [ladder]
      introspection: {url: %s/admin/oauth2/introspect}
      rules:
%s        - {subject: alice, workspace: vantrow-bills, kind: human}
`, h.Public, h.Admin, rules.String())
}

// TestHydraAgent: an agent gets a token from Hydra by client credentials
// and lists and calls ladder's tools with the go-sdk client over
// streamable HTTP, the oauth2 token source on its HTTP client; the call is
// recorded under Hydra's client id. The same with an opaque token checked
// by introspection. A Hydra client no rule maps is refused with 403 and
// runs nothing.
func TestHydraAgent(t *testing.T) {
	h := startHydra(t, "", "")
	l, base := listen(t)
	jwtClient := h.agentClient(t, base, "jwt")
	opaqueClient := h.agentClient(t, base, "opaque")
	stranger := h.agentClient(t, base, "jwt")
	e := startLadder(t, l, base, hydraIdentity(h, jwtClient.ClientID, opaqueClient.ClientID), oauth.Options{})
	ctx := context.Background()

	for _, tt := range []struct {
		name string
		cc   clientcredentials.Config
		item string
	}{{"jwt", jwtClient, "bill-jwt"}, {"opaque", opaqueClient, "bill-opaque"}} {
		t.Run(tt.name, func(t *testing.T) {
			tok, err := tt.cc.Token(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if isJWT := strings.Count(tok.AccessToken, ".") == 2; isJWT != (tt.name == "jwt") {
				t.Fatalf("Hydra issued %q for a %s client", tok.AccessToken, tt.name)
			}
			transport := &sdk.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: tt.cc.Client(ctx)}
			cs, err := sdk.NewClient(&sdk.Implementation{Name: "hydra-agent", Version: "1"}, nil).Connect(ctx, transport, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			list, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(list.Tools) == 0 || list.Tools[0].Name == "" {
				t.Fatalf("tools: %+v", list.Tools)
			}
			res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "route_item", Arguments: map[string]any{"step": "post_tms", "item": tt.item}})
			if err != nil || res.IsError {
				t.Fatalf("route_item: %v %+v", err, res)
			}
			r := e.Do("GET", "/v1/audit?kind=route", e.Keys["vantrow-bills/admin"], nil)
			want := "oauth:hydra:" + tt.cc.ClientID + ":" + tt.cc.ClientID
			if !strings.Contains(string(r.Raw), `"actor":"`+want+`"`) || !strings.Contains(string(r.Raw), tt.item) {
				t.Errorf("audit has no route of %s by %s: %s", tt.item, want, r.Raw)
			}
			if strings.Contains(string(r.Raw), tok.AccessToken) {
				t.Error("the audit log holds the token")
			}
		})
	}

	t.Run("unmapped client", func(t *testing.T) {
		tok, err := stranger.Token(ctx)
		if err != nil {
			t.Fatal(err)
		}
		r := e.Do("POST", "/v1/route", tok.AccessToken, map[string]any{"step": "post_tms", "item": "bill-stranger"})
		if r.Status != 403 || r.ErrorCode() != "TOKEN_UNMAPPED" || !strings.Contains(r.ErrorHint(), stranger.ClientID) {
			t.Errorf("unmapped Hydra client: %d %s", r.Status, r.Raw)
		}
		m := e.Do("POST", "/mcp", tok.AccessToken, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": "route_item", "arguments": map[string]any{"step": "post_tms", "item": "bill-stranger"}}})
		if m.Status != 403 || !strings.Contains(string(m.Raw), "TOKEN_UNMAPPED") {
			t.Errorf("unmapped Hydra client on /mcp: %d %s", m.Status, m.Raw)
		}
		a := e.Do("GET", "/v1/audit?kind=route", e.Keys["vantrow-bills/admin"], nil)
		if strings.Contains(string(a.Raw), "bill-stranger") {
			t.Errorf("an unmapped client's route was recorded: %s", a.Raw)
		}
	})

	t.Run("revoked opaque token", func(t *testing.T) {
		tok, err := opaqueClient.Token(ctx)
		if err != nil {
			t.Fatal(err)
		}
		form := url.Values{"token": {tok.AccessToken}}
		req, _ := http.NewRequest("POST", h.Public+"/oauth2/revoke", strings.NewReader(form.Encode()))
		req.SetBasicAuth(opaqueClient.ClientID, opaqueClient.ClientSecret)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("revoke: %v %v", err, resp)
		}
		resp.Body.Close()
		r := e.Do("GET", "/v1/steps", tok.AccessToken, nil)
		if r.Status != 401 || !strings.Contains(r.Header.Get("WWW-Authenticate"), `error="invalid_token"`) {
			t.Errorf("revoked opaque token: %d %q %s", r.Status, r.Header.Get("WWW-Authenticate"), r.Raw)
		}
	})
}

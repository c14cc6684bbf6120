package oauth_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/ladderhq/ladder/oauth"
)

// fetchLog is an http.RoundTripper that records the URLs it fetched.
type fetchLog struct {
	mu   sync.Mutex
	urls []string
}

func (f *fetchLog) RoundTrip(r *http.Request) (*http.Response, error) {
	f.mu.Lock()
	f.urls = append(f.urls, r.Method+" "+r.URL.String())
	f.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

func (f *fetchLog) list() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.urls)
}

// TestHydraAuthorizationCode: go-sdk's own client-side OAuth handler
// (auth.AuthorizationCodeHandler on the streamable client transport)
// meets ladder's 401 on /mcp, reads the Protected Resource Metadata the
// WWW-Authenticate header names, discovers Hydra's metadata from it,
// completes the authorization code flow with PKCE and the resource
// parameter through Hydra (a client registered for ladder's resource; the
// person is signed in at Hydra already), and then lists and calls tools;
// the call is recorded under the person and the client. Nothing but the
// ladder URL is given to the SDK.
func TestHydraAuthorizationCode(t *testing.T) {
	app := &loginApp{user: "ops-bob"}
	login := httptest.NewServer(app)
	defer login.Close()
	h := startHydra(t, login.URL+"/login", login.URL+"/consent")
	app.h = h
	l, base := listen(t)
	const redirect = "http://127.0.0.1:1/callback" // never served: the fetcher stops at it, as a CLI's loopback listener would
	clientID, _ := h.client(t, map[string]any{
		"client_name": "go-sdk agent", "grant_types": []string{"authorization_code", "refresh_token"}, "response_types": []string{"code"},
		"redirect_uris": []string{redirect}, "scope": "ladder offline_access", "audience": []string{base + "/mcp"},
		"access_token_strategy": "jwt", "token_endpoint_auth_method": "none",
	})
	e := startLadder(t, l, base, hydraIdentity(h, clientID), oauth.Options{})
	ctx := context.Background()

	// The user agent: follows Hydra's redirects through login and consent
	// and hands back the code the redirect to the client carries.
	fetches := 0
	fetcher := func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
		fetches++
		jar, _ := cookiejar.New(nil)
		var final *url.URL
		browser := &http.Client{Jar: jar, CheckRedirect: func(r *http.Request, _ []*http.Request) error {
			if strings.HasPrefix(r.URL.String(), redirect) {
				final = r.URL
				return http.ErrUseLastResponse
			}
			return nil
		}}
		resp, err := browser.Get(args.URL)
		if err != nil {
			return nil, err
		}
		resp.Body.Close()
		if final == nil {
			return nil, fmt.Errorf("the authorization ended at %s (%d), not at the redirect", resp.Request.URL, resp.StatusCode)
		}
		q := final.Query()
		if q.Get("error") != "" {
			return nil, errors.New("authorization refused: " + q.Get("error") + ": " + q.Get("error_description"))
		}
		return &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
	}
	log := &fetchLog{}
	handler, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		PreregisteredClient:      &oauthex.ClientCredentials{ClientID: clientID, Issuer: h.Public},
		RedirectURL:              redirect,
		AuthorizationCodeFetcher: fetcher,
		Client:                   &http.Client{Transport: log},
	})
	if err != nil {
		t.Fatal(err)
	}
	transport := &sdk.StreamableClientTransport{Endpoint: base + "/mcp", OAuthHandler: handler}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "go-sdk-oauth-agent", Version: "1"}, nil).Connect(ctx, transport, nil)
	if err != nil {
		t.Fatalf("connect through the OAuth handler: %v\nfetched: %q", err, log.list())
	}
	defer cs.Close()
	list, err := cs.ListTools(ctx, nil)
	if err != nil || len(list.Tools) == 0 {
		t.Fatalf("tools/list: %v %+v", err, list)
	}
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "route_item", Arguments: map[string]any{"step": "post_tms", "item": "bill-authcode"}})
	if err != nil || res.IsError {
		t.Fatalf("route_item: %v %+v", err, res)
	}
	if fetches != 1 {
		t.Errorf("the authorization ran %d times, want once", fetches)
	}
	fetched := log.list()
	for _, want := range []string{"GET " + base + "/.well-known/oauth-protected-resource/mcp", "POST " + h.Public + "/oauth2/token"} {
		if !slices.Contains(fetched, want) {
			t.Errorf("the handler did not fetch %s; it fetched %q", want, fetched)
		}
	}
	if !slices.ContainsFunc(fetched, func(u string) bool {
		return u == "GET "+h.Public+"/.well-known/openid-configuration" || u == "GET "+h.Public+"/.well-known/oauth-authorization-server"
	}) {
		t.Errorf("the handler did not discover Hydra's metadata; it fetched %q", fetched)
	}
	a := e.Do("GET", "/v1/audit?kind=route", e.Keys["vantrow-bills/admin"], nil)
	if want := "oauth:hydra:" + clientID + ":ops-bob"; !strings.Contains(string(a.Raw), `"actor":"`+want+`"`) || !strings.Contains(string(a.Raw), "bill-authcode") {
		t.Errorf("audit has no route of bill-authcode by %s: %s", want, a.Raw)
	}
}

// TestHydraInspector: the MCP Inspector's CLI (LADDER_TEST_INSPECTOR
// names its mcp-inspector; node must be on PATH; .ci/run sets both after
// scripts/mcp-conformance.sh installs them), given only ladder's URL and
// a client id registered at Hydra, meets the 401, reads ladder's
// Protected Resource Metadata, discovers Hydra and sends the person to
// Hydra's authorization endpoint; the person (this test's user agent,
// signed in at Hydra already) is sent back to the Inspector's loopback
// callback, and the Inspector exchanges the code and calls route_item,
// recorded under the person and the client.
func TestHydraInspector(t *testing.T) {
	inspector := os.Getenv("LADDER_TEST_INSPECTOR")
	if inspector == "" {
		t.Skip("LADDER_TEST_INSPECTOR is not set: no MCP Inspector to run (scripts/mcp-conformance.sh installs it)")
	}
	app := &loginApp{user: "ops-carol"}
	login := httptest.NewServer(app)
	defer login.Close()
	h := startHydra(t, login.URL+"/login", login.URL+"/consent")
	app.h = h
	l, base := listen(t)
	callback := fmt.Sprintf("http://127.0.0.1:%d/oauth/callback", freePort(t))
	clientID, _ := h.client(t, map[string]any{
		"client_name": "MCP Inspector", "grant_types": []string{"authorization_code", "refresh_token"}, "response_types": []string{"code"},
		"redirect_uris": []string{callback}, "scope": "ladder offline_access", "audience": []string{base + "/mcp"},
		"access_token_strategy": "jwt", "token_endpoint_auth_method": "none",
	})
	e := startLadder(t, l, base, hydraIdentity(h, clientID), oauth.Options{})

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	home := t.TempDir()
	cmd := exec.CommandContext(ctx, inspector, "--cli", base+"/mcp", "--transport", "http", "--method", "tools/call",
		"--tool-name", "route_item", "--tool-arg", "step=post_tms", "--tool-arg", "item=bill-inspector",
		"--client-id", clientID, "--callback-url", callback)
	// No TTY here: MCP_AUTO_OPEN_ENABLED lets the CLI start the flow, and
	// BROWSER=true makes its "open the browser" a no-op; it prints the
	// authorization URL, which this test's user agent follows.
	cmd.Env = append(os.Environ(), "HOME="+home, "MCP_AUTO_OPEN_ENABLED=true", "BROWSER=true", "MCP_INSPECTOR_SECRET_STORE=memory", "NO_COLOR=1")
	var stdout strings.Builder
	cmd.Stdout = &stdout
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var errLog strings.Builder
	authURL := make(chan string, 1)
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			errLog.WriteString(line + "\n")
			if _, u, ok := strings.Cut(line, "Please navigate to: "); ok {
				select {
				case authURL <- strings.TrimSpace(u):
				default:
				}
			}
		}
		close(authURL)
	}()
	var navigated string
	select {
	case u, ok := <-authURL:
		if !ok {
			<-scanned
			_ = cmd.Wait()
			t.Fatalf("the Inspector ended without asking for a sign-in:\nstdout: %s\nstderr: %s", stdout.String(), errLog.String())
		}
		navigated = u
	case <-ctx.Done():
		t.Fatal("the Inspector asked for no sign-in within 2 minutes")
	}
	t.Logf("the Inspector sent the person to %s", navigated)
	if !strings.HasPrefix(navigated, h.Public+"/oauth2/auth?") {
		t.Errorf("the Inspector sent the person to %s, not to Hydra's authorization endpoint %s/oauth2/auth", navigated, h.Public)
	}
	q, _ := url.Parse(navigated)
	if got := q.Query().Get("resource"); got != base+"/mcp" {
		t.Errorf("the authorization request's resource is %q, want %q (from ladder's metadata)", got, base+"/mcp")
	}
	// The person's browser: through Hydra's login and consent, back to
	// the Inspector's callback listener.
	jar, _ := cookiejar.New(nil)
	resp, err := (&http.Client{Jar: jar}).Get(navigated)
	if err != nil {
		t.Fatalf("following the authorization URL: %v", err)
	}
	resp.Body.Close()
	if !strings.HasPrefix(resp.Request.URL.String(), callback) {
		t.Errorf("the authorization ended at %s, not at the Inspector's callback", resp.Request.URL)
	}
	<-scanned // the Inspector has exited
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the Inspector: %v\nstdout: %s\nstderr: %s", err, stdout.String(), errLog.String())
	}
	t.Logf("the Inspector's answer:\n%s", stdout.String())
	if !strings.Contains(stdout.String(), "bill-inspector") {
		t.Errorf("the Inspector's route_item answer names no bill-inspector:\n%s", stdout.String())
	}
	a := e.Do("GET", "/v1/audit?kind=route", e.Keys["vantrow-bills/admin"], nil)
	if want := "oauth:hydra:" + clientID + ":ops-carol"; !strings.Contains(string(a.Raw), `"actor":"`+want+`"`) || !strings.Contains(string(a.Raw), "bill-inspector") {
		t.Errorf("audit has no route of bill-inspector by %s: %s", want, a.Raw)
	}
}

package oauth_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ladderhq/ladder/oauth"
)

// TestProtectedResourceMetadata: both forms of the RFC 9728 document, and
// a 401 without a token points at them without an error code.
func TestProtectedResourceMetadata(t *testing.T) {
	f := newFakeIssuer(t)
	l, base := listen(t)
	e := startLadder(t, l, base, fmtIdentity(f.URL, "      scopes: [ladder, openid]\n"), oauth.Options{})
	for _, tt := range []struct{ path, resource string }{
		{"/.well-known/oauth-protected-resource", base},
		{"/.well-known/oauth-protected-resource/mcp", base + "/mcp"},
	} {
		resp, err := http.Get(base + tt.path)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var got map[string]any
		if err := json.Unmarshal(data, &got); err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %s", tt.path, resp.StatusCode, data)
		}
		want := map[string]any{"resource": tt.resource, "authorization_servers": []any{f.URL}, "scopes_supported": []any{"ladder", "openid"},
			"bearer_methods_supported": []any{"header"}, "resource_name": "ladder"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("GET %s (-want +got):\n%s", tt.path, diff)
		}
	}
	r := e.Do("POST", "/v1/route", "", map[string]any{"step": "post_tms", "item": "b"})
	want := `Bearer realm="ladder", resource_metadata="` + base + `/.well-known/oauth-protected-resource"`
	if r.Status != 401 || r.Header.Get("WWW-Authenticate") != want {
		t.Errorf("no token: %d %q, want 401 %q", r.Status, r.Header.Get("WWW-Authenticate"), want)
	}
	m := e.Do("POST", "/mcp", "", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
	if want := want[:len(want)-1] + `/mcp"`; m.Status != 401 || m.Header.Get("WWW-Authenticate") != want {
		t.Errorf("no token on /mcp: %d %q, want 401 %q", m.Status, m.Header.Get("WWW-Authenticate"), want)
	}
}

// TestTokenKinds: a token is a principal like a key. An agent token routes
// (recorded under issuer, client and subject, never the token), a human
// token is refused on /mcp, an agent token can never approve, an admin
// token by group lists keys, and keys go on working beside tokens.
func TestTokenKinds(t *testing.T) {
	f := newFakeIssuer(t)
	l, base := listen(t)
	e := startLadder(t, l, base, fmtIdentity(f.URL, ""), oauth.Options{})
	agent := f.sign(t, f.kid, claims{"sub": "bills-bot", "client_id": "bills-bot", "aud": base + "/mcp"})
	human := f.sign(t, f.kid, claims{"sub": "alice", "azp": "ladder-console", "aud": []string{base}})
	admin := f.sign(t, f.kid, claims{"sub": "bob", "client_id": "cli", "aud": base, "groups": []string{"staff", "bill-admins"}})

	r := e.Do("POST", "/v1/route", agent, map[string]any{"step": "post_tms", "item": "bill-7"})
	if r.Status != 200 {
		t.Fatalf("agent token route: %d %s", r.Status, r.Raw)
	}
	if r := e.Do("POST", "/mcp", human, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}); r.Status != 403 || !strings.Contains(string(r.Raw), "HUMAN_KEY_REFUSED") {
		t.Errorf("human token on /mcp: %d %s", r.Status, r.Raw)
	}
	if r := e.Do("GET", "/v1/approvals", agent, nil); r.Status != 403 || r.ErrorCode() != "AGENT_KEY_REFUSED" {
		t.Errorf("agent token lists approvals: %d %s", r.Status, r.Raw)
	}
	if r := e.Do("GET", "/v1/approvals", human, nil); r.Status != 200 {
		t.Errorf("human token lists approvals: %d %s", r.Status, r.Raw)
	}
	if r := e.Do("GET", "/v1/keys", admin, nil); r.Status != 200 {
		t.Errorf("admin token (group rule) lists keys: %d %s", r.Status, r.Raw)
	}
	if r := e.Do("POST", "/v1/route", e.Keys["vantrow-bills/agent"], map[string]any{"step": "post_tms", "item": "bill-8"}); r.Status != 200 {
		t.Errorf("agent key beside tokens: %d %s", r.Status, r.Raw)
	}
	a := e.Do("GET", "/v1/audit?kind=route", e.Keys["vantrow-bills/admin"], nil)
	recs, _ := a.Body["records"].([]any)
	var actors []string
	for _, rec := range recs {
		actors = append(actors, rec.(map[string]any)["actor"].(string))
	}
	keyID := strings.Split(e.Keys["vantrow-bills/agent"], "_")[1]
	if diff := cmp.Diff([]string{"oauth:test:bills-bot:bills-bot", keyID}, actors, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("route actors (-want +got):\n%s", diff)
	}
	if strings.Contains(string(a.Raw), agent) || strings.Contains(string(a.Raw), strings.Split(agent, ".")[2]) {
		t.Error("the audit log holds the token")
	}
}

// TestJWKSRefreshAndCache: tokens with made-up key ids fetch the JWKS at
// most once per MinRefresh, a rotated-in key is picked up after it, and a
// verified token is served from the cache with the issuer gone.
func TestJWKSRefreshAndCache(t *testing.T) {
	f := newFakeIssuer(t)
	l, base := listen(t)
	e := startLadder(t, l, base, fmtIdentity(f.URL, ""), oauth.Options{})
	good := f.sign(t, f.kid, claims{"sub": "bills-bot", "client_id": "bills-bot", "aud": base})
	if r := e.Do("GET", "/v1/steps", good, nil); r.Status != 200 {
		t.Fatalf("good token: %d %s", r.Status, r.Raw)
	}
	for i := range 20 {
		tok := f.sign(t, "made-up-"+string(rune('a'+i)), claims{"sub": "bills-bot", "client_id": "bills-bot", "aud": base})
		if r := e.Do("GET", "/v1/steps", tok, nil); r.Status != 401 {
			t.Fatalf("unknown kid: %d %s", r.Status, r.Raw)
		}
	}
	if n := f.jwksFetch.Load(); n > 2 {
		t.Errorf("JWKS fetched %d times for 1 good and 20 unknown-kid tokens within the refresh interval, want at most 2", n)
	}
	f.closeServer()
	if r := e.Do("GET", "/v1/steps", good, nil); r.Status != 200 {
		t.Errorf("cached token with the issuer down: %d %s", r.Status, r.Raw)
	}
}

// TestJWKSFetchHoldsNoOne: while a token with an unknown key id waits on a
// slow JWKS fetch, a token whose key is cached verifies without waiting
// for it (the fetch does not hold the issuer's lock).
func TestJWKSFetchHoldsNoOne(t *testing.T) {
	f := newFakeIssuer(t)
	l, base := listen(t)
	// Counts the issuer fetches that have ended, on ladder's side.
	var ended atomic.Int64
	client := &http.Client{Timeout: 3 * time.Second, Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		defer ended.Add(1)
		return http.DefaultTransport.RoundTrip(r)
	})}
	e := startLadder(t, l, base, fmtIdentity(f.URL, ""), oauth.Options{MinRefresh: time.Millisecond, HTTPClient: client})
	tok := func(sub, kid string) string {
		return f.sign(t, kid, claims{"sub": sub, "client_id": "bills-bot", "aud": base})
	}
	if r := e.Do("GET", "/v1/steps", tok("bills-bot", f.kid), nil); r.Status != 200 {
		t.Fatalf("good token: %d %s", r.Status, r.Raw)
	}
	before := ended.Load() // discovery and the first JWKS fetch
	gate := make(chan struct{})
	f.jwksGate.Store(&gate)
	time.Sleep(5 * time.Millisecond) // past MinRefresh
	slow := make(chan int)
	unknown := tok("bills-bot", "rotated-in")
	go func() {
		req, _ := http.NewRequest("GET", base+"/v1/steps", nil)
		req.Header.Set("Authorization", "Bearer "+unknown)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			slow <- 0
			return
		}
		resp.Body.Close()
		slow <- resp.StatusCode
	}()
	for f.jwksFetch.Load() < 2 {
		time.Sleep(time.Millisecond)
	}
	// A fresh token (not in the verified-token cache) with the cached kid.
	if r := e.Do("GET", "/v1/steps", tok("bills-bot-2", f.kid), nil); r.Status != 200 {
		t.Errorf("cached-kid token during a JWKS fetch: %d %s", r.Status, r.Raw)
	}
	if n := ended.Load(); n != before {
		t.Errorf("the cached-kid token was answered only after the pending JWKS fetch ended (%d fetches ended, want %d): the fetch held it up", n, before)
	}
	close(gate)
	if status := <-slow; status != 401 {
		t.Errorf("unknown kid after the fetch: %d, want 401", status)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

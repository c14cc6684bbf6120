package oauth_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/oauth"
)

// TestConsoleSSOStartAndForgedCallbacks: the start of a console sign-in
// sends the browser to the provider with PKCE (S256), state and nonce and
// keeps them in a Lax cookie for the callback; a callback without that
// cookie, with another state, or for an issuer without console sign-in
// signs no one in.
func TestConsoleSSOStartAndForgedCallbacks(t *testing.T) {
	f := newFakeIssuer(t)
	l, base := listen(t)
	startLadder(t, l, base, fmtIdentity(f.URL, "      console: {client_id: ladder-console}\n"), oauth.Options{})
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	resp, err := noRedirect.Get(base + "/console/oidc/test/start?next=/console/steps")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, _ := url.Parse(resp.Header.Get("Location"))
	q := loc.Query()
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc.String(), f.URL+"/auth?") || q.Get("client_id") != "ladder-console" ||
		q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("state") == "" || q.Get("nonce") == "" ||
		q.Get("redirect_uri") != base+"/console/oidc/test/callback" || q.Get("response_type") != "code" {
		t.Fatalf("start: %d %s", resp.StatusCode, loc)
	}
	var flow *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "ladder_console_oidc" {
			flow = c
		}
	}
	if flow == nil || flow.SameSite != http.SameSiteLaxMode || !flow.HttpOnly || flow.Path != "/console/oidc/" {
		t.Fatalf("flow cookie: %+v", flow)
	}

	callback := func(cookie *http.Cookie, state string) (int, string) {
		req, _ := http.NewRequest("GET", base+"/console/oidc/test/callback?code=abc&state="+url.QueryEscape(state), nil)
		if cookie != nil {
			req.AddCookie(cookie)
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		for _, c := range resp.Cookies() {
			if c.Name == "ladder_console" && c.MaxAge > 0 {
				t.Errorf("a forged callback set a session cookie")
			}
		}
		return resp.StatusCode, string(body)
	}
	for _, tt := range []struct {
		name   string
		cookie *http.Cookie
		state  string
		want   string
	}{
		{"no cookie", nil, q.Get("state"), "This sign-in was not started here"},
		{"another state", flow, "forged-state", "The sign-in answer does not belong to the sign-in this browser started."},
		{"tampered cookie", &http.Cookie{Name: flow.Name, Value: strings.Replace(flow.Value, q.Get("state"), "forged-state", 1)}, "forged-state", "This sign-in was not started here"},
	} {
		status, body := callback(tt.cookie, tt.state)
		if status != http.StatusBadRequest || !strings.Contains(body, tt.want) {
			t.Errorf("%s: %d, want 400 with %q:\n%s", tt.name, status, tt.want, body)
		}
	}
	if resp, err := noRedirect.Get(base + "/console/oidc/nope/start"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("start for an unknown issuer: %v %v", err, resp.StatusCode)
	}
}

// TestSSOSessionFollowsConfig: a single sign-on session goes on only while
// the config in force still lets its issuer sign humans in to its
// workspace; one started under an issuer or rule since removed is signed
// out.
func TestSSOSessionFollowsConfig(t *testing.T) {
	f := newFakeIssuer(t)
	l, base := listen(t)
	e := startLadder(t, l, base, fmtIdentity(f.URL, "      console: {client_id: ladder-console}\n"), oauth.Options{})
	ctx := context.Background()
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, tt := range []struct {
		name, actor, workspace string
		status                 int
	}{
		{"issuer and rule in force", "oauth:test:ladder-console:alice", "vantrow-bills", http.StatusOK},
		{"issuer removed", "oauth:gone:ladder-console:alice", "vantrow-bills", http.StatusSeeOther},
		{"no human rule for the workspace", "oauth:test:ladder-console:alice", "checkcall-loads", http.StatusSeeOther},
	} {
		id, _, err := e.Svc.StartSession(ctx, ladder.Principal{KeyID: tt.actor, Workspace: tt.workspace, Kind: ladder.KeyHuman, Subject: "alice", ClientID: "ladder-console"}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		// The console's cookie: "v2.<id>.<HMAC of it>" under the test
		// environment's console secret.
		body := "v2." + id
		m := hmac.New(sha256.New, []byte("test-console-secret"))
		m.Write([]byte("session\x00" + body + "\x00"))
		req, _ := http.NewRequest("GET", base+"/console/inbox", nil)
		req.AddCookie(&http.Cookie{Name: "ladder_console", Value: body + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))})
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.status {
			t.Errorf("%s: GET /console/inbox %d, want %d", tt.name, resp.StatusCode, tt.status)
		}
	}
}

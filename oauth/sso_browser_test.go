package oauth_test

import (
	"context"
	"fmt"
	"html/template"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ladderhq/ladder/oauth"
)

// loginApp is a small login and consent app for Hydra: a form that asks
// for a user name and accepts the login under it through Hydra's admin
// API (remembered: Hydra keeps a session, which sign-out must end), a
// consent step that grants what was asked, and a logout step that accepts
// Hydra's logout request. With user set, the
// login is accepted under that name without a form (a person who is
// signed in at the provider already).
//
// Hydra v2.3.0 takes the audience of a token from its own audience
// parameter and ignores RFC 8707's resource parameter, which MCP clients
// send; the consent step grants a requested resource as the audience when
// the client is registered for it, as an RFC 8707 server would.
type loginApp struct {
	h    *hydra
	user string
	// logouts counts the provider sign-outs accepted (RP-initiated
	// logout reaches the app's /logout).
	logouts atomic.Int64
}

var loginForm = template.Must(template.New("login").Parse(`<!doctype html><html><body><h1>Test provider</h1>
<form method="post" action="/login"><input type="hidden" name="challenge" value="{{.}}">
<label>User <input id="user" name="user"></label><button id="login" type="submit">Log in</button></form></body></html>`))

func (a *loginApp) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == "GET" && r.URL.Path == "/login" && a.user != "":
		var out struct {
			RedirectTo string `json:"redirect_to"`
		}
		if err := a.h.adminDo("PUT", "/admin/oauth2/auth/requests/login/accept?login_challenge="+url.QueryEscape(r.URL.Query().Get("login_challenge")),
			map[string]any{"subject": a.user, "remember": false}, &out); err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		http.Redirect(w, r, out.RedirectTo, http.StatusFound)
	case r.Method == "GET" && r.URL.Path == "/login":
		_ = loginForm.Execute(w, r.URL.Query().Get("login_challenge"))
	case r.Method == "POST" && r.URL.Path == "/login":
		_ = r.ParseForm()
		var out struct {
			RedirectTo string `json:"redirect_to"`
		}
		if err := a.h.adminDo("PUT", "/admin/oauth2/auth/requests/login/accept?login_challenge="+url.QueryEscape(r.PostFormValue("challenge")),
			map[string]any{"subject": r.PostFormValue("user"), "remember": true}, &out); err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		http.Redirect(w, r, out.RedirectTo, http.StatusFound)
	case r.Method == "GET" && r.URL.Path == "/logout":
		var out struct {
			RedirectTo string `json:"redirect_to"`
		}
		if err := a.h.adminDo("PUT", "/admin/oauth2/auth/requests/logout/accept?logout_challenge="+url.QueryEscape(r.URL.Query().Get("logout_challenge")), nil, &out); err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		a.logouts.Add(1)
		http.Redirect(w, r, out.RedirectTo, http.StatusFound)
	case r.Method == "GET" && r.URL.Path == "/consent":
		ch := r.URL.Query().Get("consent_challenge")
		var req struct {
			RequestedScope    []string `json:"requested_scope"`
			RequestedAudience []string `json:"requested_access_token_audience"`
			RequestURL        string   `json:"request_url"`
			Client            struct {
				Audience []string `json:"audience"`
			} `json:"client"`
		}
		if err := a.h.adminDo("GET", "/admin/oauth2/auth/requests/consent?consent_challenge="+url.QueryEscape(ch), nil, &req); err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		if u, err := url.Parse(req.RequestURL); err == nil {
			for _, res := range u.Query()["resource"] {
				if slices.Contains(req.Client.Audience, res) && !slices.Contains(req.RequestedAudience, res) {
					req.RequestedAudience = append(req.RequestedAudience, res)
				}
			}
		}
		var out struct {
			RedirectTo string `json:"redirect_to"`
		}
		if err := a.h.adminDo("PUT", "/admin/oauth2/auth/requests/consent/accept?consent_challenge="+url.QueryEscape(ch),
			map[string]any{"grant_scope": req.RequestedScope, "grant_access_token_audience": req.RequestedAudience, "remember": false}, &out); err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		http.Redirect(w, r, out.RedirectTo, http.StatusFound)
	default:
		http.NotFound(w, r)
	}
}

func chromiumPath() string {
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// TestHydraConsoleSignIn: a person signs in to the console through Hydra
// in headless Chromium (authorization code with PKCE, state and nonce),
// approves an item, which is recorded under their subject, and signs out.
func TestHydraConsoleSignIn(t *testing.T) {
	exe := chromiumPath()
	if exe == "" {
		t.Skip("no Chromium installed (apt-get install -y chromium)")
	}
	app := &loginApp{}
	login := httptest.NewServer(app)
	defer login.Close()
	h := startHydra(t, login.URL+"/login", login.URL+"/consent")
	app.h = h
	l, base := listen(t)
	consoleID, _ := h.client(t, map[string]any{
		"client_name": "ladder console", "grant_types": []string{"authorization_code"}, "response_types": []string{"code"},
		"redirect_uris": []string{base + "/console/oidc/hydra/callback"}, "scope": "openid profile email",
		"post_logout_redirect_uris":  []string{base + "/console/signin"},
		"token_endpoint_auth_method": "none",
	})
	identity := fmt.Sprintf(`identity:
  issuers:
    - name: hydra
      issuer: %s
      console: {client_id: %s, label: Sign in with Test SSO}
      rules:
        - {subject: alice, workspace: vantrow-bills, kind: human}
        - {subject: mallory, workspace: vantrow-bills, kind: agent}
`, h.Public, consoleID)
	e := startLadder(t, l, base, identity, oauth.Options{})
	res := e.Do("POST", "/v1/capabilities/rates:approveRate/call", e.Keys["vantrow-bills/agent"], map[string]any{
		"bill_id": "B-SSO-1", "linehaul_usd": 1850.0, "fuel_surcharge_usd": 212.5, "idempotency_key": "rate-B-SSO-1"})
	apID, _ := res.Body["approval_id"].(string)
	if apID == "" {
		t.Fatalf("approval request: %d %s", res.Status, res.Raw)
	}

	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1000, 800),
	}
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	run := func(step string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
	}
	signIn := func(user string) {
		run("sign in as "+user,
			chromedp.Navigate(base+"/console/signin"),
			chromedp.WaitVisible(chromedp.CSS(`a[href^="/console/oidc/hydra/start"]`)),
			chromedp.Click(chromedp.CSS(`a[href^="/console/oidc/hydra/start"]`)),
			chromedp.WaitVisible(chromedp.ID("#user")),
			chromedp.SendKeys(chromedp.ID("#user"), user),
			chromedp.Click(chromedp.ID("#login")),
		)
	}
	signIn("alice")
	run("approve",
		chromedp.WaitVisible(chromedp.ID("#item-"+apID)),
		chromedp.Click(chromedp.CSS(`#item-`+apID+` form[action$="/approve"] button`)),
		chromedp.WaitVisible(chromedp.CSS(".flash")),
		chromedp.WaitNotPresent(chromedp.ID("#item-"+apID)),
	)
	ap := e.Do("GET", "/v1/approvals/"+apID, e.Keys["vantrow-bills/human"], nil)
	want := "oauth:hydra:" + consoleID + ":alice"
	if ap.Body["decided_by"] != want || ap.Body["status"] != "approved" {
		t.Errorf("approval after SSO approve: %s, want decided_by %s", ap.Raw, want)
	}
	audit := e.Do("GET", "/v1/audit?kind=console.signin", e.Keys["vantrow-bills/admin"], nil)
	if !strings.Contains(string(audit.Raw), `"actor":"`+want+`"`) || !strings.Contains(string(audit.Raw), `"subject":"alice"`) {
		t.Errorf("sign-in audit: %s", audit.Raw)
	}
	// Sign-out ends the session at Hydra too (RP-initiated logout with
	// the ID token as hint), which sends the browser back to the sign-in
	// page.
	var landed string
	run("sign out",
		chromedp.Click(chromedp.CSS(`form.signout button`)),
		chromedp.WaitVisible(chromedp.CSS(`a[href^="/console/oidc/hydra/start"]`)),
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			v, err := chromedp.Location()(ctx, tg)
			landed = v
			return err
		}),
		chromedp.Navigate(base+"/console/inbox"),
		chromedp.WaitVisible(chromedp.CSS(`a[href^="/console/oidc/hydra/start"]`)),
	)
	if n := app.logouts.Load(); n != 1 || landed != base+"/console/signin" {
		t.Errorf("sign-out: %d provider sign-outs, landed on %s; want 1 and %s/console/signin", n, landed, base)
	}
	// A person the rules make an agent cannot sign in.
	signIn("mallory")
	var text string
	run("agent refused", chromedp.WaitVisible(chromedp.CSS(".problem")), chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		v, err := chromedp.TextContent(chromedp.CSS(".problem"))(ctx, tg)
		text = v
		return err
	}))
	if !strings.Contains(text, "Only people mapped to the human kind can sign in") {
		t.Errorf("mallory's sign-in: %q", text)
	}
}

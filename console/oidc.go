package console

import (
	"crypto/subtle"
	"encoding/base64"
	"html/template"
	"net/http"
	"net/url"
	"strings"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/ladderhq/ladder"
)

// Single sign-on: OpenID Connect authorization code flow with PKCE, state
// and nonce (golang.org/x/oauth2, coreos/go-oidc). The start of a flow
// keeps its state, nonce, PKCE verifier and next= path in a short-lived
// signed cookie scoped to /console/oidc/; the callback checks the state
// against it, exchanges the code with the verifier, verifies the ID token
// (issuer, audience, expiry, signature, nonce), maps its claims by the
// identity rules and starts a session like a key sign-in does: only a
// human mapping signs in.

// oidcCookie holds one sign-in in progress.
const oidcCookie = "ladder_console_oidc"

// ssoButton is a sign-in button of the sign-in page.
type ssoButton struct {
	Name, Label string
}

// ssoButtons lists the issuers people may sign in through.
func (h *Handler) ssoButtons() []ssoButton {
	if h.sso == nil {
		return nil
	}
	var out []ssoButton
	for _, is := range h.sso.Identity().Issuers {
		if is.Console != nil {
			out = append(out, ssoButton{Name: is.Name, Label: is.Console.Label})
		}
	}
	return out
}

// oauthConfig is the OAuth client of issuer name, or ok false when the
// name has no console sign-in.
func (h *Handler) oauthConfig(r *http.Request, name string) (*oidc.Provider, oauth2.Config, ladder.Issuer, bool, error) {
	if h.sso == nil {
		return nil, oauth2.Config{}, ladder.Issuer{}, false, nil
	}
	is, ok := h.sso.IssuerByName(name)
	if !ok || is.Console == nil {
		return nil, oauth2.Config{}, ladder.Issuer{}, false, nil
	}
	p, err := h.sso.Provider(r.Context(), name)
	if err != nil {
		return nil, oauth2.Config{}, is, true, err
	}
	secret := ""
	if is.Console.ClientSecretEnv != "" && h.getenv != nil {
		secret = h.getenv(is.Console.ClientSecretEnv)
	}
	c := oauth2.Config{ClientID: is.Console.ClientID, ClientSecret: secret, Endpoint: p.Endpoint(),
		RedirectURL: h.sso.Identity().Resource + "/console/oidc/" + name + "/callback",
		Scopes:      []string{oidc.ScopeOpenID, "profile", "email"}}
	return p, c, is, true, nil
}

var errSSOUnavailable = &ladder.Error{Code: ladder.CodeKeyInvalid, Message: "The identity provider cannot be reached, so you were not signed in.",
	Hint: "Try again shortly, or sign in with your human key."}

// ssoStart sends the browser to the provider.
func (h *Handler) ssoStart(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("issuer")
	_, c, _, ok, err := h.oauthConfig(r, name)
	if !ok {
		return ladder.Errorf(ladder.CodeNotFound, "Use a sign-in button of the sign-in page.", "No single sign-on provider %q is configured.", name)
	}
	if err != nil {
		h.log.WarnContext(r.Context(), "single sign-on discovery failed", "issuer", name, "err", err)
		return h.showSignin(w, r, http.StatusBadGateway, errSSOUnavailable)
	}
	state, nonceV, pkce := nonce(), nonce(), oauth2.GenerateVerifier()
	next := localNext(r.URL.Query().Get("next"))
	body := strings.Join([]string{name, state, nonceV, pkce, base64.RawURLEncoding.EncodeToString([]byte(next))}, ".")
	// Lax, not Strict: the callback is a navigation from the provider's
	// site, which a Strict cookie would not reach.
	http.SetCookie(w, &http.Cookie{Name: oidcCookie, Value: body + "." + h.mac("oidc", body), Path: "/console/oidc/", MaxAge: 600,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: r.TLS != nil})
	http.Redirect(w, r, c.AuthCodeURL(state, oidc.Nonce(nonceV), oauth2.S256ChallengeOption(pkce)), http.StatusSeeOther)
	return nil
}

// ssoCallback finishes a sign-in the provider sent back.
func (h *Handler) ssoCallback(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("issuer")
	refuse := func(status int, msg, hint string) error {
		return h.showSignin(w, r, status, &ladder.Error{Code: ladder.CodeKeyInvalid, Message: msg, Hint: hint})
	}
	ck, err := r.Cookie(oidcCookie)
	if err != nil {
		return refuse(http.StatusBadRequest, "This sign-in was not started here, or took longer than ten minutes.", "Press the sign-in button again.")
	}
	http.SetCookie(w, &http.Cookie{Name: oidcCookie, Value: "", Path: "/console/oidc/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: r.TLS != nil})
	parts := strings.Split(ck.Value, ".")
	if len(parts) != 6 || subtle.ConstantTimeCompare([]byte(parts[5]), []byte(h.mac("oidc", strings.Join(parts[:5], ".")))) != 1 || parts[0] != name {
		return refuse(http.StatusBadRequest, "This sign-in was not started here, or took longer than ten minutes.", "Press the sign-in button again.")
	}
	state, wantNonce, pkce := parts[1], parts[2], parts[3]
	nextB, _ := base64.RawURLEncoding.DecodeString(parts[4])
	q := r.URL.Query()
	if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(state)) != 1 {
		return refuse(http.StatusBadRequest, "The sign-in answer does not belong to the sign-in this browser started.", "Press the sign-in button again.")
	}
	if e := q.Get("error"); e != "" {
		return refuse(http.StatusUnauthorized, "The identity provider did not sign you in ("+clipText(e)+").", "Try again, or ask an admin whether your account may use ladder.")
	}
	p, c, is, ok, err := h.oauthConfig(r, name)
	if !ok {
		return ladder.Errorf(ladder.CodeNotFound, "Use a sign-in button of the sign-in page.", "No single sign-on provider %q is configured.", name)
	}
	if err != nil {
		return h.showSignin(w, r, http.StatusBadGateway, errSSOUnavailable)
	}
	ctx := oidc.ClientContext(r.Context(), h.httpClient)
	tok, err := c.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(pkce))
	if err != nil {
		h.log.InfoContext(r.Context(), "single sign-on code exchange failed", "issuer", name, "err", err)
		return refuse(http.StatusUnauthorized, "The identity provider did not accept the sign-in code.", "Press the sign-in button again.")
	}
	raw, _ := tok.Extra("id_token").(string)
	idt, err := p.VerifierContext(ctx, &oidc.Config{ClientID: is.Console.ClientID}).Verify(ctx, raw)
	if err != nil || subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(wantNonce)) != 1 {
		h.log.InfoContext(r.Context(), "single sign-on ID token refused", "issuer", name, "err", err)
		return refuse(http.StatusUnauthorized, "The identity provider's ID token did not verify.", "Press the sign-in button again.")
	}
	var all map[string]any
	if err := idt.Claims(&all); err != nil {
		return refuse(http.StatusUnauthorized, "The identity provider's ID token did not verify.", "Press the sign-in button again.")
	}
	pr, err := h.sso.MapPerson(name, all)
	if err != nil {
		e := ladder.AsError(err)
		return h.showSignin(w, r, http.StatusForbidden, &ladder.Error{Code: e.Code, Message: e.Message, Hint: e.Hint})
	}
	if ladder.CheckKeyKind(pr, ladder.KeyHuman) != nil {
		return h.showSignin(w, r, http.StatusForbidden, &ladder.Error{Code: ladder.CodeKeyKindRefused,
			Message: "Only people mapped to the human kind can sign in to the console; the identity rules make you " + string(pr.Kind) + ".", Hint: "Ask an admin to add a human rule for you under identity.issuers (" + name + ")."})
	}
	id, se, err := h.svc.StartSession(r.Context(), pr, h.ttl)
	if err != nil {
		if ladder.ErrorCode(err) == ladder.CodeAuditUnavailable {
			return &ladder.Error{Code: ladder.CodeAuditUnavailable, Message: "The audit log cannot be written right now, so you were not signed in.", Hint: "Try again shortly.", Err: err}
		}
		return err
	}
	maxAge := max(int(se.ExpiresAt.Sub(h.svc.Now()).Seconds()), 1)
	http.SetCookie(w, cookie(r, sessionCookie, h.encode(id), maxAge))
	if len(raw) <= maxIDTokenCookie {
		http.SetCookie(w, idTokenCookieFor(r, raw, maxAge))
	}
	next := localNext(string(nextB))
	if next == "" {
		next = defaultNext
	}
	// A page, not a redirect: a navigation that began on the provider's
	// site does not carry the Strict session cookie, even through our
	// redirect; a refresh from this page is our own.
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	return ssoDone.Execute(w, next)
}

var ssoSignedOut = template.Must(template.New("ssoout").Parse(`<!doctype html><html><head><meta charset="utf-8"><meta http-equiv="refresh" content="0;url={{.}}"><title>Signed out</title></head><body><p>Signed out of ladder. <a href="{{.}}">Sign out at your identity provider too</a>.</p></body></html>`))

var ssoDone = template.Must(template.New("sso").Parse(`<!doctype html><html><head><meta charset="utf-8"><meta http-equiv="refresh" content="0;url={{.}}"><title>Signed in</title></head><body><p>Signed in. <a href="{{.}}">Continue</a>.</p></body></html>`))

func clipText(s string) string {
	if len(s) > 80 {
		s = s[:80]
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e {
			return '?'
		}
		return r
	}, s)
}

// ssoStillAllows reports whether a single sign-on session may go on under
// the identity config now in force: its issuer still has console sign-in
// and a human rule for the session's workspace. A restart with an issuer
// or its human rules removed so ends the sessions it had started, rather
// than leaving them to run out their time.
func (h *Handler) ssoStillAllows(se ladder.Session) bool {
	if h.sso == nil {
		return false
	}
	// The actor is oauth:<issuer>:<client>:<subject>; issuer names hold
	// no colon.
	rest, _ := strings.CutPrefix(se.KeyID, "oauth:")
	name, _, _ := strings.Cut(rest, ":")
	is, ok := h.sso.IssuerByName(name)
	if !ok || is.Console == nil {
		return false
	}
	for _, r := range is.Rules {
		if r.Kind == ladder.KeyHuman && r.Workspace == se.Workspace {
			return true
		}
	}
	return false
}

// idTokenCookie holds a single sign-on session's ID token, sent back to
// the provider as id_token_hint at sign-out (OpenID Connect RP-Initiated
// Logout 1.0), which providers such as Hydra and Okta need to end their
// session and return the browser to ladder. Only the sign-out form's path
// receives it; it is HttpOnly and Strict like the session cookie, and
// grants nothing here (no request is authenticated by it).
const idTokenCookie = "ladder_console_idt"

// maxIDTokenCookie: a larger ID token (one carrying many groups) is not
// kept, as browsers drop cookies over 4 KB; sign-out then sends no hint.
const maxIDTokenCookie = 3800

func idTokenCookieFor(r *http.Request, value string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: idTokenCookie, Value: value, Path: "/console/signout", MaxAge: maxAge, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil}
}

// ssoLogoutURL returns where a signing-out browser goes to end the
// provider's session too: the issuer's end_session_endpoint with the ID
// token as hint, the console client's id and the sign-in page as
// post_logout_redirect_uri (register it at the provider). It is "" for a
// key session, an issuer without console sign-in, or a provider that
// advertises no end_session_endpoint (or cannot be reached: the ladder
// session has ended all the same).
func (h *Handler) ssoLogoutURL(r *http.Request, keyID string) string {
	if h.sso == nil || !ladder.IsTokenActor(keyID) {
		return ""
	}
	rest, _ := strings.CutPrefix(keyID, "oauth:")
	name, _, _ := strings.Cut(rest, ":")
	is, ok := h.sso.IssuerByName(name)
	if !ok || is.Console == nil {
		return ""
	}
	p, err := h.sso.Provider(r.Context(), name)
	if err != nil {
		return ""
	}
	var meta struct {
		EndSession string `json:"end_session_endpoint"`
	}
	if p.Claims(&meta) != nil || meta.EndSession == "" {
		return ""
	}
	u, err := url.Parse(meta.EndSession)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return ""
	}
	q := u.Query()
	q.Set("client_id", is.Console.ClientID)
	q.Set("post_logout_redirect_uri", h.sso.Identity().Resource+"/console/signin")
	if c, err := r.Cookie(idTokenCookie); err == nil && c.Value != "" {
		q.Set("id_token_hint", c.Value)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

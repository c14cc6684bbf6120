package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"
	"unicode"

	"github.com/ladderhq/ladder"
)

// Cookie names.
const (
	sessionCookie = "ladder_console"
	preCookie     = "ladder_console_pre" // binds the sign-in form's CSRF token
)

// defaultNext is where a sign-in lands without a usable next= path.
const defaultNext = "/console/inbox"

// session is a signed-in person: the session id the cookie carries (the
// store keeps only its hash), the key id and workspace, and when the
// session ends.
type session struct {
	ID        string
	KeyID     string
	Workspace string
	Expires   time.Time
}

func (h *Handler) mac(parts ...string) string {
	m := hmac.New(sha256.New, h.secret)
	for _, p := range parts {
		m.Write([]byte(p))
		m.Write([]byte{0})
	}
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// encode is the cookie value of a session id: "v2.<id>.<mac>". The id
// alone is what counts (it is looked up on every request); the signature
// lets a forged or stale-format cookie be refused without a read.
func (h *Handler) encode(id string) string {
	body := "v2." + id
	return body + "." + h.mac("session", body)
}

// decode checks a cookie value's signature and returns its session id.
func (h *Handler) decode(v string) (string, bool) {
	i := strings.LastIndexByte(v, '.')
	if i < 0 {
		return "", false
	}
	body, sig := v[:i], v[i+1:]
	if !hmac.Equal([]byte(sig), []byte(h.mac("session", body))) {
		return "", false
	}
	id, ok := strings.CutPrefix(body, "v2.")
	return id, ok && id != ""
}

// session returns the request's session while the store says it may be
// used: not signed out, its key not revoked, not expired. ok is false for
// a missing, forged or ended session; err is set only when the store
// cannot answer.
func (h *Handler) session(r *http.Request) (s session, ok bool, err error) {
	c, cerr := r.Cookie(sessionCookie)
	if cerr != nil {
		return session{}, false, nil
	}
	id, valid := h.decode(c.Value)
	if !valid {
		return session{}, false, nil
	}
	se, err := h.svc.Session(r.Context(), id)
	if err != nil {
		if ladder.ErrorCode(err) == ladder.CodeKeyInvalid {
			return session{}, false, nil
		}
		return session{}, false, err
	}
	if ladder.IsTokenActor(se.KeyID) && !h.ssoStillAllows(se) {
		return session{}, false, nil
	}
	return session{ID: id, KeyID: se.KeyID, Workspace: se.Workspace, Expires: se.ExpiresAt}, true, nil
}

// csrfToken is the form token of a session: bound to its id, so it dies
// with the session (sign-out, key revocation, expiry) and a token of one
// session is worthless in another.
func (h *Handler) csrfToken(s session) string { return h.mac("csrf", s.ID) }

func (h *Handler) csrfOK(s session, token string) bool {
	return token != "" && hmac.Equal([]byte(token), []byte(h.csrfToken(s)))
}

func cookie(r *http.Request, name, value string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: name, Value: value, Path: "/console/", MaxAge: maxAge, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil}
}

func (h *Handler) clearSession(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, cookie(r, sessionCookie, "", -1))
}

func nonce() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// localNext returns next as a same-origin path under /console/ to go to
// after sign-in, or "" when it is not one. It decodes and cleans first,
// then checks, so that "/console/../%5Cevil.example" (which a bare prefix
// check passes and http.Redirect cleans into "/\evil.example", another
// origin to a browser) is refused. Backslashes, control characters and
// spaces are refused outright, and so is "//" anywhere: browsers read a
// backslash as a slash and drop tabs and newlines, so any of them can turn
// a path into "//host".
func localNext(next string) string {
	if next == "" || len(next) > 2048 || strings.ContainsAny(next, `\`) || strings.IndexFunc(next, badRune) >= 0 {
		return ""
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" {
		return ""
	}
	p := u.Path // decoded
	if strings.ContainsAny(p, `\`) || strings.IndexFunc(p, badRune) >= 0 || !strings.HasPrefix(p, "/") || strings.Contains(p, "//") {
		return ""
	}
	clean := path.Clean(p)
	if strings.HasSuffix(p, "/") && clean != "/" {
		clean += "/"
	}
	if clean == "/console" {
		clean = "/console/"
	}
	if !strings.HasPrefix(clean, "/console/") || strings.HasPrefix(clean, "/console//") {
		return ""
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		q = nil
	}
	// Rebuilt from its parts, re-encoded: nothing of the raw string (a
	// fragment, an odd escape) reaches the Location header.
	out := &url.URL{Path: clean, RawQuery: q.Encode()}
	return out.String()
}

// badRune is a character no next= path may hold: controls and spaces.
func badRune(r rune) bool {
	return unicode.IsControl(r) || unicode.IsSpace(r) || r == unicode.ReplacementChar
}

// signinData is the sign-in page's data.
type signinData struct {
	Next     string
	PreToken string
	// Providers are the single sign-on buttons (oidc.go).
	Providers []ssoButton
}

// signinPage shows the sign-in form with a CSRF token bound to a
// pre-session cookie.
func (h *Handler) signinPage(w http.ResponseWriter, r *http.Request) error {
	return h.showSignin(w, r, http.StatusOK, nil)
}

func (h *Handler) showSignin(w http.ResponseWriter, r *http.Request, status int, e *ladder.Error) error {
	pre := ""
	if c, err := r.Cookie(preCookie); err == nil && len(c.Value) >= 16 && len(c.Value) <= 64 {
		pre = c.Value
	} else {
		pre = nonce()
		http.SetCookie(w, cookie(r, preCookie, pre, 3600))
	}
	h.render(w, r, status, "signin", page{Title: "Sign in", Error: e, Data: signinData{Next: localNext(r.FormValue("next")), PreToken: h.mac("signin", pre), Providers: h.ssoButtons()}})
	return nil
}

// signin checks a human key and starts a new session. Agent and admin keys
// are refused; an invalid key gets the same answer whatever is wrong with
// it. Every sign-in gets a fresh session id from the store, whatever
// cookie the browser brought (no session fixation).
func (h *Handler) signin(w http.ResponseWriter, r *http.Request) error {
	if err := r.ParseForm(); err != nil {
		return h.showSignin(w, r, http.StatusBadRequest, &ladder.Error{Code: ladder.CodeInvalidArgument, Message: "The form could not be read."})
	}
	c, err := r.Cookie(preCookie)
	if err != nil || !hmac.Equal([]byte(r.PostFormValue("csrf")), []byte(h.mac("signin", c.Value))) {
		h.renderError(w, r, errCSRF)
		return nil
	}
	invalid := func(code ladder.Code) error {
		return h.showSignin(w, r, http.StatusUnauthorized, &ladder.Error{Code: code, Message: "That key is not valid.", Hint: "Check the key; it may be revoked or expired. Ask an admin for a human key (ladder keys create --kind human)."})
	}
	token := strings.TrimSpace(r.PostFormValue("key"))
	p, err := h.svc.Authenticate(r.Context(), token)
	if err != nil {
		e := ladder.AsError(err)
		if e.Code == ladder.CodeKeyMissing || e.Code == ladder.CodeKeyInvalid {
			return invalid(e.Code)
		}
		return err
	}
	if ladder.CheckKeyKind(p, ladder.KeyHuman) != nil {
		// Sign-in answers every refused kind alike (as StartSession does),
		// in the console's words.
		return h.showSignin(w, r, http.StatusForbidden, &ladder.Error{Code: ladder.CodeKeyKindRefused, Message: "Only a human key can sign in to the console; this is an " + string(p.Kind) + " key.", Hint: "Use the human key of your workspace."})
	}
	id, se, err := h.svc.StartSession(r.Context(), p, h.ttl)
	if err != nil {
		e := ladder.AsError(err)
		switch e.Code {
		case ladder.CodeKeyInvalid:
			return invalid(e.Code)
		case ladder.CodeAuditUnavailable:
			return &ladder.Error{Code: e.Code, Message: "The audit log cannot be written right now, so you were not signed in.", Hint: "Try again shortly.", Err: err}
		}
		return err
	}
	maxAge := int(se.ExpiresAt.Sub(h.svc.Now()).Seconds())
	http.SetCookie(w, cookie(r, sessionCookie, h.encode(id), max(maxAge, 1)))
	http.SetCookie(w, cookie(r, preCookie, "", -1))
	next := localNext(r.PostFormValue("next"))
	if next == "" {
		next = defaultNext
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
	return nil
}

// signout ends the session: the store revokes it, so the cookie and every
// form token of the session are refused from now on, on every replica. A
// single sign-on session is then ended at the provider too (ssoLogoutURL).
func (h *Handler) signout(w http.ResponseWriter, r *http.Request) error {
	s, _ := sessionFrom(r.Context())
	if err := h.svc.EndSession(r.Context(), s.ID); err != nil {
		e := ladder.AsError(err)
		if e.Code == ladder.CodeAuditUnavailable {
			return &ladder.Error{Code: e.Code, Message: "The audit log cannot be written right now, so you were not signed out.", Hint: "Try again shortly.", Err: err}
		}
		return err
	}
	// A single sign-on session ends at the provider too, where it
	// advertises an end_session_endpoint (RP-initiated logout).
	end := h.ssoLogoutURL(r, s.KeyID)
	h.clearSession(w, r)
	http.SetCookie(w, idTokenCookieFor(r, "", -1))
	if end != "" {
		// A page, not a redirect: the console's CSP (form-action 'self')
		// stops a form's redirect to another origin.
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		return ssoSignedOut.Execute(w, end)
	}
	http.Redirect(w, r, "/console/signin?done=signedout", http.StatusSeeOther)
	return nil
}

package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ladderhq/ladder"
)

// Cookie names.
const (
	sessionCookie = "ladder_console"
	preCookie     = "ladder_console_pre" // binds the sign-in form's CSRF token
)

// session is a signed-in person: the key id, its workspace and when the
// sign-in ends. Nonce makes each sign-in's CSRF token its own.
type session struct {
	KeyID     string
	Workspace string
	Expires   time.Time
	Nonce     string
}

func (h *Handler) mac(parts ...string) string {
	m := hmac.New(sha256.New, h.secret)
	for _, p := range parts {
		m.Write([]byte(p))
		m.Write([]byte{0})
	}
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// encode signs s as "v1.keyid.workspace.expiry.nonce.mac".
func (h *Handler) encode(s session) string {
	body := strings.Join([]string{"v1", s.KeyID, base64.RawURLEncoding.EncodeToString([]byte(s.Workspace)), strconv.FormatInt(s.Expires.Unix(), 10), s.Nonce}, ".")
	return body + "." + h.mac("session", body)
}

// decode checks a cookie value's signature and expiry.
func (h *Handler) decode(v string) (session, bool) {
	i := strings.LastIndexByte(v, '.')
	if i < 0 {
		return session{}, false
	}
	body, sig := v[:i], v[i+1:]
	if !hmac.Equal([]byte(sig), []byte(h.mac("session", body))) {
		return session{}, false
	}
	f := strings.Split(body, ".")
	if len(f) != 5 || f[0] != "v1" {
		return session{}, false
	}
	ws, err := base64.RawURLEncoding.DecodeString(f[2])
	if err != nil {
		return session{}, false
	}
	exp, err := strconv.ParseInt(f[3], 10, 64)
	if err != nil {
		return session{}, false
	}
	s := session{KeyID: f[1], Workspace: string(ws), Expires: time.Unix(exp, 0), Nonce: f[4]}
	if !h.svc.Now().Before(s.Expires) {
		return session{}, false
	}
	return s, true
}

// session returns the request's valid signed session (the key is checked
// separately, in authed).
func (h *Handler) session(r *http.Request) (session, bool) {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return session{}, false
	}
	return h.decode(c.Value)
}

func (h *Handler) csrfToken(s session) string { return h.mac("csrf", s.KeyID, s.Nonce) }

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

// signinData is the sign-in page's data.
type signinData struct {
	Next     string
	PreToken string
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
	next := r.FormValue("next")
	if !strings.HasPrefix(next, "/console/") || strings.HasPrefix(next, "/console//") {
		next = ""
	}
	h.render(w, r, status, "signin", page{Title: "Sign in", Error: e, Data: signinData{Next: next, PreToken: h.mac("signin", pre)}})
	return nil
}

// signin checks a human key and starts a session. Agent and admin keys are
// refused; an invalid key gets the same answer whatever is wrong with it.
func (h *Handler) signin(w http.ResponseWriter, r *http.Request) error {
	if err := r.ParseForm(); err != nil {
		return h.showSignin(w, r, http.StatusBadRequest, &ladder.Error{Code: ladder.CodeInvalidArgument, Message: "The form could not be read."})
	}
	c, err := r.Cookie(preCookie)
	if err != nil || !hmac.Equal([]byte(r.PostFormValue("csrf")), []byte(h.mac("signin", c.Value))) {
		h.renderError(w, r, errCSRF)
		return nil
	}
	token := strings.TrimSpace(r.PostFormValue("key"))
	p, err := h.svc.Authenticate(r.Context(), token)
	if err != nil {
		e := ladder.AsError(err)
		if e.Code == ladder.CodeKeyMissing || e.Code == ladder.CodeKeyInvalid {
			return h.showSignin(w, r, http.StatusUnauthorized, &ladder.Error{Code: e.Code, Message: "That key is not valid.", Hint: "Check the key; it may be revoked or expired. Ask an admin for a human key (ladder keys create --kind human)."})
		}
		return err
	}
	if p.Kind != ladder.KeyHuman {
		return h.showSignin(w, r, http.StatusForbidden, &ladder.Error{Code: ladder.CodeKeyKindRefused, Message: "Only a human key can sign in to the console; this is an " + string(p.Kind) + " key.", Hint: "Use the human key of your workspace."})
	}
	k, err := h.svc.Store().GetKey(r.Context(), p.KeyID)
	if err != nil {
		return &ladder.Error{Code: ladder.CodeAuditUnavailable, Message: "The store does not answer.", Hint: "Try again shortly.", Err: err}
	}
	now := h.svc.Now()
	s := session{KeyID: p.KeyID, Workspace: p.Workspace, Expires: now.Add(h.ttl).Truncate(time.Second), Nonce: nonce()}
	if k.ExpiresAt != nil && k.ExpiresAt.Before(s.Expires) {
		s.Expires = *k.ExpiresAt
	}
	if err := h.auditSession(r, p, "console.signin"); err != nil {
		return err
	}
	http.SetCookie(w, cookie(r, sessionCookie, h.encode(s), int(s.Expires.Sub(now).Seconds())))
	http.SetCookie(w, cookie(r, preCookie, "", -1))
	next := r.PostFormValue("next")
	if !strings.HasPrefix(next, "/console/") || strings.HasPrefix(next, "/console//") {
		next = "/console/inbox"
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
	return nil
}

// signout ends the session in this browser.
func (h *Handler) signout(w http.ResponseWriter, r *http.Request) error {
	if err := h.auditSession(r, principalOf(r), "console.signout"); err != nil {
		return err
	}
	h.clearSession(w, r)
	http.Redirect(w, r, "/console/signin?done=signedout", http.StatusSeeOther)
	return nil
}

// auditSession records a sign-in or sign-out under the person's key id.
func (h *Handler) auditSession(r *http.Request, p ladder.Principal, kind string) error {
	e, err := ladder.NewAuditEntry(p.Workspace, p.KeyID, kind, p.KeyID, h.svc.Now(), map[string]any{"key_id": p.KeyID})
	if err != nil {
		return err
	}
	if _, err := h.svc.Store().AppendAudit(r.Context(), e); err != nil {
		if errors.Is(err, ladder.ErrUnavailable) {
			return &ladder.Error{Code: ladder.CodeAuditUnavailable, Message: "The audit log cannot be written right now, so you were not signed in or out.", Hint: "Try again shortly.", Err: err}
		}
		return &ladder.Error{Code: ladder.CodeAuditUnavailable, Message: "The audit log failed.", Hint: "Try again shortly.", Err: err}
	}
	return nil
}

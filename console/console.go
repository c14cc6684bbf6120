// Package console serves ladder's console: the server-rendered pages under
// /console where people with a human key approve, audit and pin lanes
// (DESIGN.md §3.4). Pages are html/template with embedded assets and no
// front-end build step; every action is a plain form POST that works
// without JavaScript. Sessions live in the database (service.StartSession):
// the cookie carries a random session id, signed, and every request looks
// it up, so any replica sharing the database serves it, and signing out,
// revoking the key or expiry ends it on every replica at once. Form CSRF
// tokens are bound to the session id and die with it.
package console

import (
	"bytes"
	"context"
	"crypto/rand"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/ladderhq/ladder"
	lhttp "github.com/ladderhq/ladder/http"
	"github.com/ladderhq/ladder/oauth"
	"github.com/ladderhq/ladder/service"
)

//go:embed all:assets
var assets embed.FS

// SecretEnv is the environment variable holding the session secret.
const SecretEnv = "LADDER_CONSOLE_SECRET"

// DefaultSessionTTL is how long a sign-in lasts (capped by the key's expiry).
const DefaultSessionTTL = 12 * time.Hour

// Options configure the console.
type Options struct {
	Service *service.Service
	Logger  *slog.Logger
	// Secret signs session cookies and CSRF tokens; replicas behind one
	// address need the same one. Empty means: the value of
	// LADDER_CONSOLE_SECRET (read with Getenv), else a secret derived from
	// the audit secret, else a random one for this process (sessions then
	// do not survive a restart nor cross replicas; a warning says so).
	Secret []byte
	// Getenv reads the environment; nil reads nothing.
	Getenv func(string) string
	// SessionTTL is how long a sign-in lasts; 0 means DefaultSessionTTL.
	SessionTTL time.Duration
	// SSO, when set, adds a sign-in button for every issuer with console
	// sign-in (OpenID Connect, see oidc.go).
	SSO *oauth.Verifier
	// HTTPClient calls the identity provider's token endpoint; nil means a
	// client with a 10 s timeout.
	HTTPClient *http.Client
}

// Handler is the console's http.Handler; mount it at "/console/".
type Handler struct {
	svc    *service.Service
	log    *slog.Logger
	secret []byte
	ttl    time.Duration
	mux    *http.ServeMux
	static http.Handler

	sso        *oauth.Verifier
	getenv     func(string) string
	httpClient *http.Client

	chainMu sync.Mutex
	chain   ladder.ChainVerifier
	chainOK error // the first break found, if any
}

// New returns the console handler.
func New(opts Options) *Handler {
	h := &Handler{svc: opts.Service, log: opts.Logger, secret: opts.Secret, ttl: opts.SessionTTL, mux: http.NewServeMux()}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	h.sso, h.getenv, h.httpClient = opts.SSO, opts.Getenv, opts.HTTPClient
	if h.httpClient == nil {
		h.httpClient = &http.Client{Timeout: 10 * time.Second}
	}
	if h.ttl <= 0 {
		h.ttl = DefaultSessionTTL
	}
	if len(h.secret) == 0 && opts.Getenv != nil {
		h.secret = []byte(opts.Getenv(SecretEnv))
	}
	if len(h.secret) == 0 {
		h.secret = h.svc.DerivedSecret("console sessions")
		if len(h.secret) > 0 {
			h.log.Info("console sessions are signed with a secret derived from the audit secret; set " + SecretEnv + " to choose one")
		}
	}
	if len(h.secret) == 0 {
		h.secret = make([]byte, 32)
		_, _ = rand.Read(h.secret)
		h.log.Warn("console sessions are signed with a random per-process secret: they end on restart and do not cross replicas; set " + SecretEnv)
	}
	sub, _ := fs.Sub(assets, "assets/static")
	h.static = http.StripPrefix("/console/assets/", http.FileServerFS(sub))
	h.routes()
	return h
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "same-origin")
	hd.Set("X-Frame-Options", "DENY")
	h.mux.ServeHTTP(w, r)
}

func (h *Handler) routes() {
	h.mux.Handle("GET /console/assets/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		h.static.ServeHTTP(w, r)
	}))
	h.handle("GET /console/{$}", func(w http.ResponseWriter, r *http.Request) error {
		_, ok, err := h.session(r)
		if err != nil {
			return storeDown(err)
		}
		if ok {
			http.Redirect(w, r, "/console/overview", http.StatusSeeOther)
		} else {
			http.Redirect(w, r, "/console/signin", http.StatusSeeOther)
		}
		return nil
	})
	h.handle("GET /console/signin", h.signinPage)
	h.handle("POST /console/signin", h.signin)
	h.handle("POST /console/signout", h.authed(h.signout))
	h.handle("GET /console/oidc/{issuer}/start", h.ssoStart)
	h.handle("GET /console/oidc/{issuer}/callback", h.ssoCallback)

	h.handle("GET /console/overview", h.authed(h.overview))
	h.handle("GET /console/inbox", h.authed(h.inbox))
	h.handle("GET /console/approvals/{id}", h.authed(h.approvalPage))
	h.handle("POST /console/approvals/{id}/approve", h.authed(h.approve))
	h.handle("POST /console/approvals/{id}/reject", h.authed(h.reject))
	h.handle("GET /console/routes/{id}", h.authed(h.routePage))
	h.handle("POST /console/routes/{id}/review", h.authed(h.review))

	h.handle("GET /console/steps", h.authed(h.steps))
	h.handle("GET /console/steps/{queue}/{step}", h.authed(h.stepPage))
	h.handle("POST /console/steps/{queue}/{step}/pin", h.authed(h.pin(true)))
	h.handle("POST /console/steps/{queue}/{step}/unpin", h.authed(h.pin(false)))

	h.handle("GET /console/gate", h.authed(h.gateHistory))
	h.handle("GET /console/audit", h.authed(h.auditLog))
	h.handle("GET /console/audit/records/{seq}/proof", h.authed(h.auditProof))
	h.handle("GET /console/webhooks", h.authed(h.deliveries))
	h.handle("POST /console/webhooks/{id}/redeliver", h.authed(h.redeliver))
	h.handle("/console/", func(w http.ResponseWriter, r *http.Request) error {
		return errNotFound
	})
}

// handlerFunc is a console handler that returns its error; handle renders it.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

func (h *Handler) handle(pattern string, fn handlerFunc) {
	h.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		if err := fn(w, r); err != nil {
			h.renderError(w, r, err)
		}
	})
}

// errNotFound is the answer for anything not found in the person's
// workspace — an id of another workspace gets the same page as an id that
// does not exist.
var errNotFound = &ladder.Error{Code: ladder.CodeNotFound, Message: "There is nothing here in your workspace.", Hint: "Go back to the inbox and follow a link from there."}

// errSignedOut sends a signed-out visitor to the sign-in form.
var errSignedOut = errors.New("signed out")

// errCSRF refuses a form whose CSRF token is missing or wrong.
var errCSRF = &ladder.Error{Code: ladder.CodeInvalidArgument, Message: "This form has expired or did not come from the console, so nothing was done.", Hint: "Reload the page and submit the form again."}

// page is what every template receives.
type page struct {
	Title   string
	Nav     string
	Session *session
	CSRF    string
	Flash   string
	Error   *ladder.Error
	Data    any
}

// render writes a page with status.
func (h *Handler) render(w http.ResponseWriter, r *http.Request, status int, name string, p page) {
	t, ok := pages()[name]
	if !ok {
		panic("console: no template " + name)
	}
	if s, ok := sessionFrom(r.Context()); ok {
		p.CSRF = h.csrfToken(s)
		// The session id is a bearer secret the HttpOnly cookie keeps from
		// scripts: no page carries it.
		s.ID = ""
		p.Session = &s
	}
	if p.Flash == "" {
		p.Flash = flashText(r.URL.Query().Get("done"))
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", p); err != nil {
		h.log.ErrorContext(r.Context(), "console template", "template", name, "err", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// renderError is the one place an error becomes a console response.
func (h *Handler) renderError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, errSignedOut) {
		if r.Method == http.MethodGet {
			http.Redirect(w, r, "/console/signin?next="+urlQueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		h.render(w, r, http.StatusUnauthorized, "signin", page{Title: "Sign in", Error: &ladder.Error{Code: ladder.CodeKeyMissing, Message: "You are signed out, so nothing was done.", Hint: "Sign in with your human key, then try again."}})
		return
	}
	e := ladder.AsError(err)
	csrf := e == errCSRF
	e = e.Render(ladder.SurfaceConsole)
	status := lhttp.Status(e.Code)
	switch e.Code {
	case ladder.CodeApprovalNotFound, ladder.CodeRouteNotFound, ladder.CodeStepNotFound, ladder.CodeNotFound:
		e, status = errNotFound, http.StatusNotFound
	case ladder.CodeInternal, ladder.CodeAuditUnavailable:
		h.log.ErrorContext(r.Context(), "console request failed", "method", r.Method, "path", r.URL.Path, "code", e.Code, "err", err)
	}
	if csrf {
		status = http.StatusForbidden
	}
	h.render(w, r, status, "error", page{Title: "Not done", Error: e})
}

// flashText is the confirmation shown after an action redirects.
func flashText(done string) string {
	switch done {
	case "approved":
		return "Approved. The call ran once; the audit log records it under your key."
	case "approved-failed":
		return "Approved, but the call did not run; see the approval for the error."
	case "rejected":
		return "Rejected. Nothing ran; the agent sees your reason."
	case "reviewed":
		return "Review recorded."
	case "pinned":
		return "The step is pinned."
	case "unpinned":
		return "The step is unpinned; the rules move it again."
	case "redelivered":
		return "Sent again: the delivery is pending and due now, its tries counted anew."
	case "signedout":
		return "You are signed out."
	}
	return ""
}

type sessionKey struct{}

func sessionFrom(ctx context.Context) (session, bool) {
	s, ok := ctx.Value(sessionKey{}).(session)
	return s, ok
}

func principalOf(r *http.Request) ladder.Principal {
	s, _ := sessionFrom(r.Context())
	return ladder.Principal{KeyID: s.KeyID, Workspace: s.Workspace, Kind: ladder.KeyHuman}
}

// authed runs fn only for a signed-in person whose session the store still
// holds as active (and whose key is still a valid human key), and checks
// the CSRF token of every POST against the session's.
func (h *Handler) authed(fn handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		s, ok, err := h.session(r)
		if err != nil {
			return storeDown(err)
		}
		if !ok {
			if _, err := r.Cookie(sessionCookie); err == nil {
				h.clearSession(w, r)
			}
			return errSignedOut
		}
		r = r.WithContext(context.WithValue(r.Context(), sessionKey{}, s))
		if r.Method == http.MethodPost {
			if err := r.ParseForm(); err != nil {
				return &ladder.Error{Code: ladder.CodeInvalidArgument, Message: "The form could not be read.", Hint: "Reload the page and try again."}
			}
			if !h.csrfOK(s, r.PostFormValue("csrf")) {
				return errCSRF
			}
		}
		return fn(w, r)
	}
}

// urlQueryEscape escapes a next= value; only local console paths are kept.
func urlQueryEscape(s string) string {
	return template.URLQueryEscaper(localNext(s))
}

// storeDown is the answer when the store cannot say whether a session is
// still valid: nothing is done, and the session is not ended for it.
func storeDown(err error) error {
	return &ladder.Error{Code: ladder.CodeAuditUnavailable, Message: "The store does not answer, so nothing was done.", Hint: "Try again shortly.", Err: err}
}

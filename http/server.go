// Package http serves ladder's REST API (/v1/…), health and metrics
// endpoints, and mounts the MCP surface and the console. Handlers return
// errors; one function, writeError, maps an error to its status and body.
package http

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/internal/mcpwire"
	"github.com/ladderhq/ladder/internal/metrics"
	"github.com/ladderhq/ladder/internal/strictjson"
	"github.com/ladderhq/ladder/internal/tracing"
	"github.com/ladderhq/ladder/service"
)

// MaxBodyBytes caps every request body (1 MiB); larger bodies get 413.
const MaxBodyBytes = 1 << 20

// Options configure a Server.
type Options struct {
	Service *service.Service
	Logger  *slog.Logger
	// AccessLog gets the line every request but a probe or a scrape
	// leaves ("msg":"request"); nil means Logger. cmd/ladder gives it a
	// handler whose lines are written a few at a time (internal/logbuf).
	AccessLog *slog.Logger
	// TracerProvider makes the authentication span and names the
	// request's span (otelhttp's, started around this handler) after its
	// route; nil makes none.
	TracerProvider trace.TracerProvider
	// Registry receives the HTTP metrics and is served on /metrics. A nil
	// Registry gets a fresh one.
	Registry *prometheus.Registry
	// BaseURL is this server's public URL, used in links such as a step's
	// evidence URL. Empty means it is derived from each request's Host.
	BaseURL string
	// Mounts are extra handlers (the MCP surface, the console) by pattern.
	Mounts map[string]http.Handler
	// MaxInFlight caps the requests served at once; one more is answered
	// 503 OVERLOADED at once instead of queueing. 0 means
	// DefaultMaxInFlight; a negative value turns the cap off. Health and
	// metrics endpoints are not counted. A request takes its slot only
	// once it is authenticated and its body is read (see admit).
	MaxInFlight int
	// MaxInFlightPerKey caps the requests one key has in progress, its body
	// being read included; one more is answered 429 RATE_LIMITED at once.
	// 0 means DefaultMaxInFlightPerKey; negative turns the cap off.
	MaxInFlightPerKey int
	// MaxInFlightPerAddress is the same cap for requests without a valid
	// key (the console, keyless /mcp) per client address — an IPv4
	// address or an IPv6 /64. 0 means DefaultMaxInFlightPerAddress;
	// negative turns the cap off (do so behind a proxy, where every client
	// has the proxy's address, or raise it).
	MaxInFlightPerAddress int
	// BodyTimeout bounds the reading of a whole request body; a body not
	// in by then is answered 408 BODY_TIMEOUT. 0 means DefaultBodyTimeout;
	// negative leaves only the http.Server's own timeouts.
	BodyTimeout time.Duration
	// Challenge is the WWW-Authenticate value of a refusal on a path: a
	// 401's, and a 403's for a missing token scope (oauth.Verifier's,
	// which points clients at the Protected Resource Metadata). Nil means
	// Bearer realm="ladder" on every 401.
	Challenge func(path string, e *ladder.Error) string
	// AllowedOrigins are the browser origins besides the server's own host
	// that may call /mcp (server.allowed_origins); they get CORS answers
	// there (see cors).
	AllowedOrigins []string
}

// DefaultMaxInFlight is the concurrency cap when Options.MaxInFlight is 0.
const DefaultMaxInFlight = 256

// Server is ladder's HTTP handler.
type Server struct {
	tracer  trace.Tracer // nil: tracing off
	svc     *service.Service
	log     *slog.Logger
	access  slog.Handler // the access log's handler (Options.AccessLog)
	reg     *prometheus.Registry
	baseURL string
	mux     *http.ServeMux
	handler http.Handler

	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	refusals *prometheus.CounterVec
	inflight chan struct{} // nil: no cap
	// lookups bounds the key lookups admit runs before the global cap
	// (the same size as it; nil: no cap).
	lookups     chan struct{}
	perKey      *slots
	perAddr     *slots
	bodyTimeout time.Duration // 0: none
	challenge   func(path string, e *ladder.Error) string
	// allowedOrigins: Options.AllowedOrigins.
	allowedOrigins []string
	// rpcCode is the /mcp mount's JSON-RPC code table, for the refusals
	// admit answers on /mcp before the mount runs.
	rpcCode func(ladder.Code) int
}

// RPCCoder is a mount that owns a JSON-RPC code table: the MCP surface
// (package mcp, which imports this package for Status and so cannot be
// imported by it). A refusal admit answers on /mcp gets its code here.
type RPCCoder interface {
	RPCCode(ladder.Code) int
}

// New returns a Server with every route registered.
func New(opts Options) *Server {
	s := &Server{tracer: tracing.Tracer(opts.TracerProvider), svc: opts.Service, log: opts.Logger, reg: opts.Registry, baseURL: strings.TrimSuffix(opts.BaseURL, "/"), mux: http.NewServeMux(), challenge: opts.Challenge, allowedOrigins: opts.AllowedOrigins}
	if s.challenge == nil {
		s.challenge = DefaultChallenge
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.access = s.log.Handler()
	if opts.AccessLog != nil {
		s.access = opts.AccessLog.Handler()
	}
	if s.reg == nil {
		s.reg = prometheus.NewRegistry()
	}
	s.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ladder_http_requests_total", Help: "HTTP requests by route pattern, method and status.",
	}, []string{"route", "method", "status"})
	s.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "ladder_http_request_duration_seconds", Help: "HTTP request latency by route pattern and method.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
	}, []string{"route", "method"})
	s.reg.MustRegister(s.requests, s.latency)
	s.refusals = metrics.Refusals(s.reg)
	metrics.ShadowProposalsDropped(s.reg, s.svc.ShadowProposalsDropped)
	switch {
	case opts.MaxInFlight == 0:
		s.inflight = make(chan struct{}, DefaultMaxInFlight)
	case opts.MaxInFlight > 0:
		s.inflight = make(chan struct{}, opts.MaxInFlight)
	}
	if s.inflight != nil {
		s.lookups = make(chan struct{}, cap(s.inflight))
	}
	s.perKey = newSlots(opts.MaxInFlightPerKey, DefaultMaxInFlightPerKey)
	s.perAddr = newSlots(opts.MaxInFlightPerAddress, DefaultMaxInFlightPerAddress)
	switch {
	case opts.BodyTimeout == 0:
		s.bodyTimeout = DefaultBodyTimeout
	case opts.BodyTimeout > 0:
		s.bodyTimeout = opts.BodyTimeout
	}

	s.routes()
	// Without an MCP mount nothing serves /mcp; -32000 is the generic
	// refusal.
	s.rpcCode = func(ladder.Code) int { return ladder.RPCRefused }
	for pattern, h := range opts.Mounts {
		s.mux.Handle(pattern, h)
		if c, ok := h.(RPCCoder); ok && pattern == "/mcp" {
			s.rpcCode = c.RPCCode
		}
	}
	s.handler = s.cors(s.instrument(s.mux))
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// Registry returns the metrics registry.
func (s *Server) Registry() *prometheus.Registry { return s.reg }

func (s *Server) routes() {
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	s.handle("GET /readyz", func(w http.ResponseWriter, r *http.Request) error {
		if err := s.svc.Ready(r.Context()); err != nil {
			// The service logs when writes start failing and when they
			// recover; a balancer polling every second needs no line each.
			s.log.DebugContext(r.Context(), "not ready", "err", err)
			le := ladder.AsError(err)
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not ready", "reason": strings.TrimSuffix(le.Message, ".") + "; " + le.Hint})
			return nil
		}
		ready := map[string]string{"status": "ready"}
		if s.svc.CheckpointKey() == "" {
			ready["audit_log"] = "UNSIGNED: this server signs no checkpoints of the audit logs (--unsigned-audit); nobody outside can check its history"
		}
		writeJSON(w, http.StatusOK, ready)
		return nil
	})
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{Registry: s.reg}))

	s.handle("GET /v1/keys", s.auth(s.listKeys, ladder.KeyAdmin))
	s.handle("POST /v1/keys", s.auth(s.createKey, ladder.KeyAdmin))
	s.handle("POST /v1/keys/{id}/revoke", s.auth(s.revokeKey, ladder.KeyAdmin))
	s.ladderRoutes()
	s.capabilityRoutes()
	s.gateRoutes()
	s.auditRoutes()
	s.tlogRoutes()
	s.importRoutes()
	s.webhookRoutes()

	s.handle("/", func(w http.ResponseWriter, r *http.Request) error {
		// This catch-all matches every method, so the mux never answers
		// 405 by itself: a path served for other methods says which.
		if allow := s.allowedMethods(r); len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			return ladder.Errorf(ladder.CodeMethodNotAllowed, "use "+strings.Join(allow, " or ")+" "+r.URL.Path+" (the Allow header lists them)", "The endpoint %s does not answer %s.", r.URL.Path, r.Method)
		}
		return ladder.Errorf(ladder.CodeNotFound, "see the API reference in docs/reference.md", "No endpoint %s %s.", r.Method, r.URL.Path)
	})
}

// allowedMethods returns the methods the mux serves r's path for with a
// pattern of its own (not the catch-all), in a fixed order.
func (s *Server) allowedMethods(r *http.Request) []string {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if m == r.Method {
			continue
		}
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := s.mux.Handler(probe); pattern != "" && pattern != "/" {
			allow = append(allow, m)
		}
	}
	return allow
}

// handlerFunc is an HTTP handler that returns its error instead of writing it.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

func (s *Server) handle(pattern string, h handlerFunc) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			s.writeError(w, r, err)
		}
	})
}

type principalKey struct{}

// principal returns the authenticated caller of r.
func principal(r *http.Request) ladder.Principal {
	p, _ := r.Context().Value(principalKey{}).(ladder.Principal)
	return p
}

// auth wraps h so that it runs only for a valid key of one of the kinds.
func (s *Server) auth(h handlerFunc, kinds ...ladder.KeyKind) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		// admit has authenticated the key already; look it up only when
		// the request did not come through it.
		p, ok := r.Context().Value(principalKey{}).(ladder.Principal)
		if !ok {
			tok, berr := ladder.BearerToken(mcpwire.HeaderValue(r.Header, "Authorization"))
			if berr != nil {
				return berr
			}
			var err error
			if p, err = s.svc.Authenticate(r.Context(), tok); err != nil {
				return err
			}
		}
		if kerr := ladder.CheckKeyKind(p, kinds...); kerr != nil {
			return kerr
		}
		setLogKey(w, p.KeyID)
		if err := s.svc.Admit(p); err != nil {
			return err
		}
		return h(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	}
}

// authChecked is auth for a handler that may take its key from the
// service's view of verified keys, as the front door found it for POST
// /v1/route (service.AuthenticateHint), instead of reading it again: the
// handler's writes commit only while the key is active
// (ladder.RequireActiveKey), and the handler calls confirmKey before it
// writes its answer, which reads the key from the store unless one of
// those writes committed. An error the handler returns unwritten is
// answered only after the same confirmation, so a key revoked since it
// was verified is refused on every path, as the door would refuse it.
func (s *Server) authChecked(h handlerFunc, kinds ...ladder.KeyKind) handlerFunc {
	inner := s.auth(h, kinds...)
	return func(w http.ResponseWriter, r *http.Request) error {
		tok, _ := ladder.BearerToken(mcpwire.HeaderValue(r.Header, "Authorization"))
		p, hinted, ok := ladder.VerifiedKey(r.Context(), tok)
		if !ok || !hinted {
			return inner(w, r)
		}
		ctx, kc := ladder.RequireActiveKey(r.Context(), p.KeyID)
		c := &keyConfirmation{kc: kc, p: p}
		ctx = context.WithValue(context.WithValue(ctx, principalKey{}, p), keyConfirmationKey{}, c)
		if err := inner(w, r.WithContext(ctx)); err != nil {
			if kerr := c.confirm(ctx, s.svc); kerr != nil {
				return kerr
			}
			return err
		}
		return nil
	}
}

type keyConfirmationKey struct{}

// keyConfirmation is the one confirmation a request authenticated from the
// view of verified keys may need (authChecked).
type keyConfirmation struct {
	kc   *ladder.KeyCheck
	p    ladder.Principal
	done bool
	err  error
}

// confirm reads the key from the store, once, unless a write of the
// request committed under the key's check: nil while the key is active.
func (c *keyConfirmation) confirm(ctx context.Context, svc *service.Service) error {
	if c.done || (c.kc.Confirmed() && !c.kc.Refused()) {
		return c.err
	}
	c.done, c.err = true, svc.ConfirmKey(ctx, c.p)
	return c.err
}

// confirmKey is what a handler under authChecked calls before it writes
// its answer: nil when the request's key is active (or was read from the
// store, not the view), else the refusal to answer with instead.
func (s *Server) confirmKey(r *http.Request) error {
	if c, ok := r.Context().Value(keyConfirmationKey{}).(*keyConfirmation); ok {
		return c.confirm(r.Context(), s.svc)
	}
	return nil
}

// DefaultChallenge is the WWW-Authenticate value of a 401 without OAuth
// configured.
func DefaultChallenge(string, *ladder.Error) string { return `Bearer realm="ladder"` }

// errorBody is the JSON shape of every REST error.
type errorBody struct {
	Error struct {
		Code    ladder.Code    `json:"code"`
		Message string         `json:"message"`
		Hint    string         `json:"hint,omitempty"`
		Data    map[string]any `json:"data,omitempty"`
	} `json:"error"`
}

// writeError is the one place an error becomes a response.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	e := ladder.AsError(err).Render(ladder.ParseSurface(r.Header.Get(ladder.SurfaceHeader)))
	status := Status(e.Code)
	s.refusals.WithLabelValues("rest", string(e.Code)).Inc()
	if e.Code == ladder.CodeInternal || e.Code == ladder.CodeAuditUnavailable {
		s.log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "code", e.Code, "err", err)
	}
	if c := s.challenge(r.URL.Path, e); c != "" && (status == http.StatusUnauthorized || e.Code == ladder.CodeScopeMissing) {
		w.Header().Set("WWW-Authenticate", c)
	}
	if ra, ok := e.Data["retry_after_seconds"]; ok {
		w.Header().Set("Retry-After", fmt.Sprint(ra))
	}
	var body errorBody
	body.Error.Code, body.Error.Message, body.Error.Hint, body.Error.Data = e.Code, e.Message, e.Hint, e.Data
	writeJSON(w, status, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// decode reads r's body strictly into v (see strictjson), turning an
// oversized body into BODY_TOO_LARGE and a malformed one into INVALID_JSON
// naming the field.
func decode(r *http.Request, v any) error {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return &ladder.Error{Code: ladder.CodeBodyTooLarge, Message: fmt.Sprintf("The body is over %d bytes.", MaxBodyBytes), Hint: "send a smaller body"}
		}
		return ladder.Errorf(ladder.CodeInvalidJSON, "resend the request", "Could not read the body: %v.", err)
	}
	if err := strictjson.Unmarshal(data, v); err != nil {
		var se *strictjson.Error
		if errors.As(err, &se) && se.Path != "" {
			return ladder.InvalidField(se.Path, "The body is not valid strict JSON: "+err.Error()+".", "fix the field "+se.Path+" and resend")
		}
		return &ladder.Error{Code: ladder.CodeInvalidJSON, Message: "The body is not valid strict JSON: " + err.Error() + ".", Hint: "send one JSON object with the documented fields"}
	}
	return nil
}

// statusWriter records the status a handler wrote.
type statusWriter struct {
	http.ResponseWriter
	status int
	keyID  string
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// setLogKey lets the access log name the key (by id only). It finds the
// log's statusWriter under w rather than in the request's context, so
// instrument need not copy every request to carry it.
func setLogKey(w http.ResponseWriter, id string) {
	for {
		switch x := w.(type) {
		case *statusWriter:
			x.keyID = id
			return
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return
		}
	}
}

// instrument adds the body limit, admission (admit), panic recovery,
// metrics and the access log.
func (s *Server) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		r.Body = http.MaxBytesReader(sw, r.Body, MaxBodyBytes)
		// A refusal at the door is counted there and not logged: a flood
		// of them must stay cheap.
		refused := false
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.log.ErrorContext(r.Context(), "panic", "panic", p, "stack", string(debug.Stack()))
				if sw.status == 0 {
					s.writeError(sw, r, fmt.Errorf("panic: %v", p))
				}
			}
			if refused {
				return
			}
			status := sw.status
			if status == 0 {
				status = http.StatusOK
			}
			route := r.Pattern
			if route == "" || route == "/" {
				route = "other"
			}
			if s.tracer != nil {
				if sp := trace.SpanFromContext(r.Context()); sp.IsRecording() && route != "other" {
					// HTTP conventions: "{method} {http.route}", the route
					// being the pattern's path.
					path := route
					if _, p, ok := strings.Cut(route, " "); ok {
						path = p
					}
					sp.SetName(r.Method + " " + path)
					sp.SetAttributes(attribute.String("http.route", path))
				}
			}
			d := time.Since(start)
			s.requests.WithLabelValues(route, r.Method, strconv.Itoa(status)).Inc()
			s.latency.WithLabelValues(route, r.Method).Observe(d.Seconds())
			if route != "GET /metrics" && route != "GET /healthz" {
				s.logRequest(r, status, d, sw.keyID)
			}
		}()
		if !exempt(r.URL.Path) {
			admitted, release, ok := s.admit(sw, r)
			if !ok {
				refused = true
				return
			}
			defer release()
			r = admitted
		}
		next.ServeHTTP(sw, r)
	})
}

// logRequest writes r's access log line. It hands the record to the
// handler itself, as log/slog's documentation shows for wrappers, with no
// source position: Logger.LogAttrs would walk the stack for one on every
// request, and the line never shows it.
func (s *Server) logRequest(r *http.Request, status int, d time.Duration, keyID string) {
	ctx := r.Context()
	if !s.access.Enabled(ctx, slog.LevelInfo) {
		return
	}
	rec := slog.NewRecord(time.Now(), slog.LevelInfo, "request", 0)
	rec.AddAttrs(slog.String("method", r.Method), slog.String("path", r.URL.Path),
		slog.Int("status", status), slog.Duration("duration", d), slog.String("key_id", keyID))
	_ = s.access.Handle(ctx, rec) // as Logger.LogAttrs, which drops a handler's error
}

// exempt reports whether path is a probe or metrics endpoint, which
// admission leaves alone so operators can see an overloaded server.
func exempt(path string) bool {
	return path == "/healthz" || path == "/readyz" || path == "/metrics"
}

// baseURLFor returns the server's public URL for links in responses.
func (s *Server) baseURLFor(r *http.Request) string {
	if s.baseURL != "" {
		return s.baseURL
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/config"
	"github.com/ladderhq/ladder/demo"
	lhttp "github.com/ladderhq/ladder/http"
	"github.com/ladderhq/ladder/internal/groupcommit"
	"github.com/ladderhq/ladder/internal/logbuf"
	"github.com/ladderhq/ladder/internal/metrics"
	"github.com/ladderhq/ladder/oauth"
	"github.com/ladderhq/ladder/postgres"
	"github.com/ladderhq/ladder/service"
	"github.com/ladderhq/ladder/sqlite"
	"github.com/ladderhq/ladder/telemetry"
	"github.com/ladderhq/ladder/upstream"
)

// stack is a loaded config, an open store and the service over them.
type stack struct {
	cfg   *config.Config
	store ladder.Store
	svc   *service.Service
	pool  *upstream.Pool
	log   *slog.Logger
	// getenv is the environment the command was given.
	getenv func(string) string
	// tokens verifies OAuth access tokens; nil without an identity
	// section.
	tokens *oauth.Verifier
	// tel is the tracing the OTEL_* variables set up (serve and demo
	// only; off otherwise).
	tel *telemetry.Provider
}

func (s *stack) Close() error {
	s.pool.Close()
	s.flushTraces()
	s.svc.Close() // one last try to store the call results it holds
	return s.store.Close()
}

// flushTraces sends the spans still queued and stops the exporter, within
// five seconds: a collector that is down must not hold up a stop.
func (s *stack) flushTraces() {
	if !s.tel.Enabled() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.tel.Shutdown(ctx); err != nil {
		s.log.Warn("flushing traces", "err", err)
	}
	s.tel = nil
}

// newLogger returns the JSON logger every command uses.
func newLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// serverLogs are a server's loggers, over one output: log writes each line
// at once; access, the access log, gathers its lines and writes them a few
// times a second (internal/logbuf), and a line of log writes them first.
type serverLogs struct {
	log, access *slog.Logger
	buf         *logbuf.Writer
}

func newServerLogs(w io.Writer) serverLogs {
	b := logbuf.New(w)
	return serverLogs{log: newLogger(b.Immediate()), access: newLogger(b), buf: b}
}

// flush writes out the access lines still gathered; a server calls it as
// it stops.
func (l serverLogs) flush() { _ = l.buf.Flush() }

// openStore opens PostgreSQL for a postgres:// URL and SQLite for anything
// else.
func openStore(ctx context.Context, db string, getenv func(string) string, log *slog.Logger) (ladder.Store, error) {
	if strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://") {
		return openPostgres(ctx, db, getenv, log)
	}
	st, err := sqlite.Open(ctx, db, sqlite.Options{Logger: log})
	if err != nil {
		return nil, err
	}
	return st, nil
}

// openStoreReadOnly opens an existing database for commands that only read
// it: a SQLite file in mode=ro (a missing file is an error naming it, never
// created; nothing is migrated), or PostgreSQL with read-only transactions.
func openStoreReadOnly(ctx context.Context, db string, getenv func(string) string, log *slog.Logger) (ladder.Store, error) {
	if strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://") {
		st, err := postgres.Open(ctx, db, postgres.Options{Logger: log, Schema: getenv("LADDER_PG_SCHEMA"), ReadOnly: true})
		if err != nil {
			return nil, err
		}
		return st, nil
	}
	st, err := sqlite.Open(ctx, db, sqlite.Options{Logger: log, ReadOnly: true})
	if err != nil {
		return nil, err
	}
	return st, nil
}

// stackOptions say how a command uses its stack.
type stackOptions struct {
	// readOnly opens the database read-only: a missing SQLite file is an
	// error naming it, and nothing is migrated or written.
	readOnly bool
	// noSteps stores no step states: the demo stores them itself, as its
	// history starts them (demo.Seed).
	noSteps bool
	// traces sets up tracing from the OTEL_* variables (serve, demo).
	traces bool
	// warn, when set, gets the start-up warnings instead of the logger: a
	// command run by a person prints them as one plain line each.
	warn func(msg string)
}

// openStack loads the config and opens the store.
func openStack(ctx context.Context, cfg *config.Config, db string, getenv func(string) string, log *slog.Logger) (*stack, error) {
	return openStackWith(ctx, cfg, db, getenv, log, stackOptions{})
}

// openStackWith is openStack with options.
func openStackWith(ctx context.Context, cfg *config.Config, db string, getenv func(string) string, log *slog.Logger, o stackOptions) (*stack, error) {
	open := openStore
	if o.readOnly {
		open = openStoreReadOnly
	}
	st, err := open(ctx, db, getenv, log)
	if err != nil {
		return nil, err
	}
	tel := &telemetry.Provider{}
	if o.traces {
		if tel, err = telemetry.New(ctx, getenv, telemetry.Options{ServiceName: "ladder", Version: version}); err != nil {
			st.Close()
			return nil, fmt.Errorf("traces: %w", err)
		}
		if tel.Enabled() {
			log.Info("tracing on", "endpoint", tel.Endpoint, "protocol", tel.Protocol)
		}
	}
	pool := upstream.NewPool(getenv, log)
	pool.Trace(tel.TracerProvider, tel.Propagator)
	svc, tokens, err := newService(ctx, cfg, st, pool, getenv, log, o, tel.TracerProvider)
	if err != nil {
		tel.Shutdown(ctx)
		st.Close()
		return nil, fmt.Errorf("start: %w", err)
	}
	return &stack{cfg: cfg, store: st, svc: svc, pool: pool, log: log, getenv: getenv, tokens: tokens, tel: tel}, nil
}

// serveOptions are the flags serve and demo share.
type serveOptions struct {
	addr    string
	baseURL string
	// listener, when set, is already bound to addr (the demo binds before
	// it seeds, so a busy port fails at once).
	listener net.Listener
	// ready is called once listening, before the first request is
	// served; an error from it stops the server.
	ready func(url string) error
	demo  bool // links use the listening address
	// toolNames is the MCP tool-name form: canonical or portable.
	toolNames string
	// openWorkspace serves that workspace's MCP tools without a key to
	// loopback clients. For conformance testing only.
	openWorkspace string
	// maxInFlight caps concurrent requests (0: the default, 256).
	maxInFlight int
	// maxPerKey and maxPerAddress cap the requests in progress per key and,
	// without a key, per client address; bodyTimeout bounds reading a body
	// (0: the http package's defaults).
	maxPerKey, maxPerAddress int
	bodyTimeout              time.Duration
	// accessLog gets the access log's lines; nil: the stack's logger.
	accessLog *slog.Logger
	// mounts are extra handlers by pattern (the Slack interactivity
	// endpoint).
	mounts map[string]http.Handler
}

// writeStats is a store that reports its group commit; both do.
type writeStats interface{ WriteStats() groupcommit.Stats }

var (
	_ writeStats = (*sqlite.Store)(nil)
	_ writeStats = (*postgres.Store)(nil)
)

// serveStack serves st until ctx ends, then shuts down gracefully, letting
// in-flight requests finish.
func serveStack(ctx context.Context, st *stack, o serveOptions) error {
	if _, ok := st.store.(*sqlite.Store); ok {
		raiseProcs(st.getenv, st.log)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if err := checkToolDefinitions(ctx, st, reg); err != nil {
		if o.listener != nil {
			o.listener.Close()
		}
		return err
	}
	st.pool.Observe = metrics.UpstreamObserver(reg)
	metrics.ResultsWaiting(reg, st.svc.ResultsWaiting)
	if ws, ok := st.store.(writeStats); ok {
		metrics.StoreWrites(reg, ws.WriteStats)
	}
	st.svc.ObserveLaneChanges(metrics.LaneChanges(reg))
	metrics.OldestPendingApproval(reg, st.svc.OldestPendingApproval)
	ln := o.listener
	if ln == nil {
		var err error
		if ln, err = listen(o.addr); err != nil {
			return err
		}
	}
	url := "http://" + ln.Addr().String()
	if o.baseURL == "" && o.demo {
		o.baseURL = url
	}
	ev, err := newEventTargets(st, eventBaseURL(o.baseURL, st.cfg, url))
	if err != nil {
		ln.Close()
		return err
	}
	o.mounts = ev.mounts
	h, err := newHandler(st, reg, o)
	if err != nil {
		ln.Close()
		return err
	}
	dispatched := startDispatcher(ctx, st, reg, ev.endpoints)
	defer dispatched()
	srv := newHTTPServer(h, st.log)
	st.log.Info("listening", "addr", ln.Addr().String(), "url", url)
	if o.ready != nil {
		if err := o.ready(url); err != nil {
			ln.Close()
			return err
		}
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	go releaseStartupPagesLater(ctx, st.log)
	go expireLoop(ctx, st)
	go recoverLoop(ctx, st)
	go tlogLoop(ctx, st)
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	st.log.Info("shutting down; letting in-flight requests finish")
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shutdown: %w", err)
	}
	// The last requests' spans go out before the process does.
	st.flushTraces()
	return nil
}

// listen binds addr, or says which address is busy and how to pick
// another.
func listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w (is another server using the port? pick another with --addr)", addr, err)
	}
	return ln, nil
}

// newHTTPServer returns the server with every timeout set, so a slow or
// silent client cannot hold a connection open: headers in 5 s, the whole
// request in 30 s, the answer in 60 s, an idle keep-alive for 120 s.
func newHTTPServer(h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

func cmdServe(ctx context.Context, e env, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	cfgPath := fs.String("config", "ladder.yaml", "config file")
	db := fs.String("db", "ladder.db", "SQLite file path, or a postgres:// URL")
	addr := fs.String("addr", envOr(e, "LADDER_ADDR", "127.0.0.1:8080"), "address to listen on (or LADDER_ADDR)")
	baseURL := fs.String("base-url", "", "public URL of this server for links (default: from each request's Host)")
	toolNames := fs.String("tool-names", "canonical", "MCP tool names: canonical (ticket6:readLedger) or portable (ticket6_readLedger)")
	maxInFlight := fs.Int("max-inflight", lhttp.DefaultMaxInFlight, "requests served at once; more are answered 503 OVERLOADED instead of queueing (negative: no cap)")
	maxPerKey := fs.Int("max-inflight-per-key", lhttp.DefaultMaxInFlightPerKey, "requests one key may have in progress, bodies being read included; more are answered 429 RATE_LIMITED (negative: no cap)")
	maxPerAddress := fs.Int("max-inflight-per-address", lhttp.DefaultMaxInFlightPerAddress, "requests without a valid key (console, keyless /mcp) one client address (IPv4, or IPv6 /64) may have in progress; more are answered 429 RATE_LIMITED (negative: no cap; behind a proxy every client has its address)")
	unsigned := fs.Bool("unsigned-audit", false, "run without a checkpoint key: the audit logs' checkpoints are not signed and no witness can check them (not for production)")
	bodyTimeout := fs.Duration("body-timeout", lhttp.DefaultBodyTimeout, "time to read a whole request body; a body not in by then is answered 408 BODY_TIMEOUT")
	if err := parseFlags(e, fs, args); err != nil {
		return err
	}
	logs := newServerLogs(e.stderr)
	defer logs.flush()
	log := logs.log
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	st, err := openStackWith(ctx, cfg, *db, e.getenv, log, stackOptions{traces: true})
	if err != nil {
		return err
	}
	defer st.Close()
	if key := st.svc.CheckpointKey(); key != "" {
		log.Info("audit log checkpoints are signed", "checkpoint_key", key)
	} else if !*unsigned {
		return exitError{code: 2, msg: "ladder serve: no checkpoint key: set " + cfg.Server.CheckpointKeyEnv + " (server.checkpoint_key_env) to the private half `ladder keys checkpoint-key` prints (docs/audit-log.md), or start with --unsigned-audit to run without signed audit checkpoints"}
	} else {
		log.Warn("UNSIGNED AUDIT LOG: --unsigned-audit: the audit logs' checkpoints are not signed, so nobody outside this server can check that its history was not rewritten; set LADDER_CHECKPOINT_KEY for production")
	}
	if uses := demoURLs(cfg); len(uses) > 0 {
		// A config started from `ladder demo --print-config` keeps working,
		// loudly: its demo: executors get the built-in stand-in systems.
		log.Warn("these capabilities call the built-in demo upstream (demo: URLs); point their executors at real services for production", "capabilities", strings.Join(uses, "; "))
		up, err := demo.StartUpstream()
		if err != nil {
			return err
		}
		defer up.Close()
		st.pool.Rewrite = up.Resolve
	}
	token, err := st.svc.Bootstrap(ctx, e.getenv("LADDER_ADMIN_KEY"))
	if err != nil {
		return err
	}
	if token != "" && e.getenv("LADDER_ADMIN_KEY") == "" {
		fmt.Fprintf(e.stdout, "First start on an empty database: this admin key manages every workspace.\nIt is shown once; store it now.\n\n  %s\n\n", token)
	}
	return serveStack(ctx, st, serveOptions{addr: *addr, baseURL: *baseURL, toolNames: *toolNames, maxInFlight: *maxInFlight, accessLog: logs.access,
		maxPerKey: *maxPerKey, maxPerAddress: *maxPerAddress, bodyTimeout: *bodyTimeout})
}

// expireLoop stores the expiry of pending approvals past their time, and
// deletes console sessions past theirs, once a minute (readers see both
// expired before that anyway).
func expireLoop(ctx context.Context, st *stack) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if n, err := st.svc.ExpireDue(ctx); err != nil {
				st.log.Warn("expire approvals", "err", err)
			} else if n > 0 {
				st.log.Info("expired approvals", "count", n)
			}
			if _, err := st.svc.DeleteExpiredSessions(ctx); err != nil {
				st.log.Warn("delete expired console sessions", "err", err)
			}
		}
	}
}

// recoverLoop runs the call sweep at start and once a minute: calls left
// running past their executor's timeout plus the margin are marked
// unknown, and approvals left executing are settled from their calls (see
// service.RecoverCalls).
func recoverLoop(ctx context.Context, st *stack) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		if r, err := st.svc.RecoverCalls(ctx); err != nil {
			st.log.Warn("recover calls", "err", err)
		} else if r.MarkedUnknown > 0 || r.ApprovalsSettled > 0 {
			st.log.Info("recovered calls", "marked_unknown", r.MarkedUnknown, "approvals_settled", r.ApprovalsSettled)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// tlogInterval is how often serve integrates new audit records into the
// workspaces' logs and signs the grown logs' checkpoints.
const tlogInterval = 3 * time.Second

// tlogLoop runs service.IntegrateLogs at start and every tlogInterval.
func tlogLoop(ctx context.Context, st *stack) {
	t := time.NewTicker(tlogInterval)
	defer t.Stop()
	failing := false
	for {
		if err := st.svc.IntegrateLogs(ctx); err != nil && ctx.Err() == nil {
			if !failing {
				st.log.Error("audit logs: integrate", "err", err)
			}
			failing = true
		} else if failing {
			st.log.Info("audit logs: integrating again")
			failing = false
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

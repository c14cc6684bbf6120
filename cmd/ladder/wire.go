package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/config"
	"github.com/ladderhq/ladder/console"
	lhttp "github.com/ladderhq/ladder/http"
	"github.com/ladderhq/ladder/internal/metrics"
	"github.com/ladderhq/ladder/mcp"
	"github.com/ladderhq/ladder/oauth"
	"github.com/ladderhq/ladder/postgres"
	"github.com/ladderhq/ladder/service"
	"github.com/ladderhq/ladder/translog"
	"github.com/ladderhq/ladder/upstream"
)

// newService wires a config and a store into the service and makes sure
// every declared step has a state.
func newService(ctx context.Context, cfg *config.Config, st ladder.Store, pool *upstream.Pool, getenv func(string) string, log *slog.Logger, o stackOptions, tp trace.TracerProvider) (*service.Service, *oauth.Verifier, error) {
	parts := cfg.Parts()
	var tokens ladder.TokenVerifier
	var verifier *oauth.Verifier
	if cfg.Identity != nil {
		verifier = oauth.New(oauth.Options{Identity: *cfg.Identity, Getenv: getenv, Logger: log})
		tokens = verifier
	}
	secret, derived := cfg.Server.AuditSecret(getenv)
	if derived {
		msg := "audit sampling secret derived from the config file; set " + cfg.Server.AuditSecretEnv + " so agents cannot predict which items are audited"
		if o.warn != nil {
			o.warn(msg)
		} else {
			log.Warn(msg)
		}
	}
	signer, err := checkpointSigner(cfg.Server.CheckpointKeyEnv, getenv)
	if err != nil {
		return nil, nil, err
	}
	svc, err := service.New(service.Options{Store: st, Checkpoints: signer, Workspaces: parts.Workspaces, Rules: parts.Rules, AuditSecret: secret, Logger: log, Gates: parts.Gates,
		Runner: pool, ApprovalTTL: cfg.Server.ApprovalTTL, RatePerSecond: cfg.Server.RatePerSecond, RateBurst: cfg.Server.RateBurst,
		MaxShadowPerStep: cfg.Server.MaxShadowProposals, Tokens: tokens, TracerProvider: tp})
	if err != nil {
		return nil, nil, err
	}
	if o.readOnly || o.noSteps {
		// The steps' states are the database's; a read-only command adds
		// none, and the demo adds them with its history.
		return svc, verifier, nil
	}
	if err := st.EnsureSteps(ctx, svc.InitialStates()); err != nil {
		return nil, nil, err
	}
	return svc, verifier, nil
}

// checkToolDefinitions compares every capability's definition with the one
// the previous start recorded; each change is logged, counted in
// ladder_tool_definition_changes_total and written to the audit log.
func checkToolDefinitions(ctx context.Context, st *stack, reg prometheus.Registerer) error {
	changes := metrics.ToolDefinitionChanges(reg)
	_, err := st.svc.CheckToolDefinitions(ctx, func(c ladder.ToolDefinitionChange) {
		changes.WithLabelValues(c.Workspace, c.Capability, c.Change).Inc()
	})
	if err != nil {
		return fmt.Errorf("start: %w", err)
	}
	return nil
}

// newHandler builds the HTTP handler: REST, /mcp, health, metrics.
func newHandler(st *stack, reg *prometheus.Registry, o serveOptions) (http.Handler, error) {
	var challenge func(string, *ladder.Error) string
	if st.tokens != nil {
		challenge = st.tokens.Challenge
	}
	tp := st.tel.TracerProvider
	m, err := mcp.New(mcp.Options{TracerProvider: tp, Propagator: st.tel.Propagator, Service: st.svc, Logger: st.log, BaseURL: o.baseURL, AllowedOrigins: st.cfg.Server.AllowedOrigins,
		OpenWorkspace: o.openWorkspace, ToolNames: o.toolNames, Version: version, Registry: reg, Challenge: challenge})
	if err != nil {
		return nil, err
	}
	mounts := map[string]http.Handler{"/mcp": m, "/console/": console.New(console.Options{Service: st.svc, Logger: st.log, Getenv: st.getenv, SSO: st.tokens})}
	if st.tokens != nil {
		meta := st.tokens.MetadataHandler()
		mounts[oauth.MetadataPath] = meta
		mounts[oauth.MetadataPath+"/mcp"] = meta
	}
	for p, h := range o.mounts {
		mounts[p] = h
	}
	h := http.Handler(lhttp.New(lhttp.Options{TracerProvider: tp, Service: st.svc, Logger: st.log, AccessLog: o.accessLog, Registry: reg, BaseURL: o.baseURL,
		Mounts: mounts, MaxInFlight: o.maxInFlight, Challenge: challenge, AllowedOrigins: st.cfg.Server.AllowedOrigins,
		MaxInFlightPerKey: o.maxPerKey, MaxInFlightPerAddress: o.maxPerAddress, BodyTimeout: o.bodyTimeout}))
	return st.tel.Handler(h), nil
}

// openPostgres opens the PostgreSQL store. The schema comes from the
// DSN's search_path, or LADDER_PG_SCHEMA when set.
func openPostgres(ctx context.Context, dsn string, getenv func(string) string, log *slog.Logger) (ladder.Store, error) {
	st, err := postgres.Open(ctx, dsn, postgres.Options{Logger: log, Schema: getenv("LADDER_PG_SCHEMA")})
	if err != nil {
		return nil, err
	}
	return st, nil
}

// demoURLs lists the capabilities whose executors point at the demo's
// in-process upstream ("demo:NAME"), which only `ladder demo` serves.
func demoURLs(cfg *config.Config) []string {
	var out []string
	for _, w := range cfg.Workspaces {
		for _, c := range w.Capabilities {
			if c.Served && strings.HasPrefix(c.Executor.URL, config.DemoScheme+":") {
				out = append(out, fmt.Sprintf("%s %s (%s)", w.ID, c.ID, c.Executor.URL))
			}
		}
	}
	return out
}

// checkpointSigner returns the signer of the checkpoint key in the
// environment variable name (server.checkpoint_key_env, default
// LADDER_CHECKPOINT_KEY: the private half `ladder keys checkpoint-key`
// prints), nil when it is not set, and an error naming the variable when
// it holds no key.
func checkpointSigner(name string, getenv func(string) string) (*translog.Signer, error) {
	skey := getenv(name)
	if skey == "" {
		return nil, nil
	}
	s, err := translog.NewSigner(skey)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return s, nil
}

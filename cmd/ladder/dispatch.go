package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ladderhq/ladder/config"
	"github.com/ladderhq/ladder/internal/metrics"
	"github.com/ladderhq/ladder/postgres"
	"github.com/ladderhq/ladder/webhook"
)

// webhookEndpoints builds the endpoints the config declares, reading each
// signing secret from its environment variable. A secret that is missing
// or malformed stops the start, naming the config line.
func webhookEndpoints(cfg *config.Config, getenv func(string) string, publicURL string) ([]webhook.Endpoint, error) {
	client := &http.Client{
		// A redirect would carry the signed event somewhere the config
		// does not name: the answer counts as the endpoint's.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	var (
		out  []webhook.Endpoint
		errs []error
	)
	for _, w := range cfg.Workspaces {
		for _, h := range w.Webhooks {
			var keys [][]byte
			for _, env := range []struct{ field, name string }{{"secret_env", h.SecretEnv}, {"old_secret_env", h.OldSecretEnv}} {
				if env.name == "" {
					continue
				}
				path := h.Path + "." + env.field
				v := getenv(env.name)
				if v == "" {
					errs = append(errs, fmt.Errorf("%s: %s: %s is not set; set it to the endpoint's whsec_ signing secret", cfg.Position(path), path, env.name))
					continue
				}
				key, err := webhook.ParseSecret(v)
				if err != nil {
					errs = append(errs, fmt.Errorf("%s: %s: %s: %v", cfg.Position(path), path, env.name, err))
					continue
				}
				keys = append(keys, key)
			}
			out = append(out, webhook.Endpoint{
				Name: config.EndpointName(w.ID, h.Name), Workspace: w.ID, Events: h.Events,
				MaxInFlight: h.MaxInFlight, MaxAttempts: h.MaxAttempts, Backoff: h.Backoff, Timeout: h.Timeout,
				Sender: &webhook.Hook{URL: h.URL, Keys: keys, Client: client, PublicURL: strings.TrimSuffix(publicURL, "/")},
			})
		}
	}
	return out, errors.Join(errs...)
}

// startDispatcher starts delivering the outbox's events to the configured
// endpoints, and registers the delivery metrics. The function it returns
// waits, after ctx ends, for the tries in progress to be recorded. An
// event goes to the endpoints configured when it is fanned out (within
// moments of its commit); a server without endpoints fans each event out
// to none, so nothing is sent long after the fact when one is added.
func startDispatcher(ctx context.Context, st *stack, reg prometheus.Registerer, publicURL string) (func(), error) {
	eps, err := webhookEndpoints(st.cfg, st.getenv, publicURL)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	observe := metrics.Webhooks(reg, st.store.DeliveryStats)
	d := webhook.New(webhook.Options{Store: st.store, Endpoints: eps, Logger: st.log.With("component", "webhooks"), Observe: observe})
	if pg, ok := st.store.(*postgres.Store); ok {
		// Hear of changes committed by any replica at once: the
		// dispatcher of events to deliver, and the agents waiting on an
		// approval of its decision.
		go func() {
			for ev := range pg.Subscribe(ctx) {
				switch ev.Kind {
				case postgres.EventOutbox:
					d.Kick()
					if ev.ApprovalID != "" {
						st.svc.ApprovalChanged(ev.ApprovalID)
					}
				case postgres.EventApproval:
					st.svc.ApprovalChanged(ev.ApprovalID)
				case postgres.EventResync:
					d.Kick()
					st.svc.ApprovalChanged("")
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.Run(ctx)
	}()
	return func() { <-done }, nil
}

// eventBaseURL is the base of the console links events carry: --base-url,
// else the config's public_url when the file sets one (its default,
// http:// plus listen, may not be where this process listens), else the
// address this process listens on.
func eventBaseURL(flagURL string, cfg *config.Config, listening string) string {
	switch {
	case flagURL != "":
		return flagURL
	case cfg.Server.PublicURL != "" && cfg.Server.PublicURL != "http://"+cfg.Server.Listen:
		return cfg.Server.PublicURL
	}
	return listening
}

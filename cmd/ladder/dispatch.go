package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ladderhq/ladder"
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
// endpoints (first retiring the pending deliveries of endpoints the config
// no longer has, and pruning delivered ones past server.webhook_retention
// as it goes), and registers the delivery metrics. The function it returns
// waits, after ctx ends, for the tries in progress to be recorded. An
// event goes to the endpoints configured when it is fanned out (within
// moments of its commit); a server without endpoints fans each event out
// to none, so nothing is sent long after the fact when one is added.
func startDispatcher(ctx context.Context, st *stack, reg prometheus.Registerer, eps []webhook.Endpoint) func() {
	observe := metrics.Webhooks(reg, st.store.DeliveryStats)
	d := webhook.New(webhook.Options{Store: st.store, Endpoints: eps, Logger: st.log.With("component", "webhooks"), Observe: observe,
		Retention: st.cfg.Server.WebhookRetention})
	if pg, ok := st.store.(*postgres.Store); ok {
		// Hear of changes committed by any replica at once: the
		// dispatcher of events to deliver, the agents waiting on an
		// approval of its decision, and the views of step states and of
		// verified keys requests are decided from (hints the commit
		// re-checks).
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
				case postgres.EventStep:
					st.svc.StepChanged(ladder.StepKey{Workspace: ev.Workspace, Queue: ev.Queue, Step: ev.Step})
				case postgres.EventKey:
					st.svc.KeyChanged(ev.KeyID)
				case postgres.EventResync:
					d.Kick()
					st.svc.ApprovalChanged("")
					st.svc.StepChanged(ladder.StepKey{})
					st.svc.KeyChanged("")
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.Run(ctx)
	}()
	return func() { <-done }
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

// eventTargets are where events go: the endpoints the dispatcher
// delivers to, and the handlers Slack calls back.
type eventTargets struct {
	endpoints []webhook.Endpoint
	mounts    map[string]http.Handler
}

// newEventTargets builds the webhook and Slack endpoints the config
// declares, reading their secrets from the environment; a secret that is
// missing or malformed stops the start, naming the config line.
func newEventTargets(st *stack, publicURL string) (eventTargets, error) {
	eps, err := webhookEndpoints(st.cfg, st.getenv, publicURL)
	slackEps, mounts, serr := slackTargets(st, publicURL)
	if err = errors.Join(err, serr); err != nil {
		return eventTargets{}, fmt.Errorf("config: %w", err)
	}
	return eventTargets{endpoints: append(eps, slackEps...), mounts: mounts}, nil
}

// slackTargets builds each workspace's Slack target and, when any
// exists, the interactivity endpoint /slack/{workspace}/interactions.
func slackTargets(st *stack, publicURL string) ([]webhook.Endpoint, map[string]http.Handler, error) {
	var (
		eps  []webhook.Endpoint
		errs []error
	)
	h := &webhook.SlackInteractions{Workspaces: map[string]webhook.SlackWorkspace{}, Decide: st.svc.DecideFromChat, Logger: st.log.With("component", "slack")}
	client := &http.Client{Timeout: 15 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, w := range st.cfg.Workspaces {
		sc := w.Slack
		if sc == nil {
			continue
		}
		need := func(field, env string) string {
			if env == "" {
				return ""
			}
			v := st.getenv(env)
			if v == "" {
				path := sc.Path + "." + field
				errs = append(errs, fmt.Errorf("%s: %s: %s is not set", st.cfg.Position(path), path, env))
			}
			return v
		}
		ws := w.ID
		s := &webhook.Slack{WebhookURL: need("webhook_url_env", sc.WebhookURLEnv), Token: need("bot_token_env", sc.BotTokenEnv), Channel: sc.Channel,
			APIURL: sc.APIURL, Client: client, PublicURL: strings.TrimSuffix(publicURL, "/"),
			Detail: func(ctx context.Context, ev ladder.Event) (json.RawMessage, string) {
				return st.svc.ApprovalMessage(ctx, ws, ev.Data.ApprovalID)
			}}
		secret := need("signing_secret_env", sc.SigningSecretEnv)
		h.Workspaces[ws] = webhook.SlackWorkspace{SigningSecret: []byte(secret), Users: sc.Users, Emails: sc.Emails, Slack: s}
		eps = append(eps, webhook.Endpoint{Name: config.EndpointName(ws, "slack"), Workspace: ws, Events: sc.Events,
			MaxInFlight: 1, MaxAttempts: config.DefaultWebhookAttempts, Backoff: config.DefaultWebhookBackoff, Timeout: config.DefaultWebhookTimeout, Sender: s})
	}
	if len(h.Workspaces) == 0 {
		return nil, nil, errors.Join(errs...)
	}
	return eps, map[string]http.Handler{"POST /slack/{workspace}/interactions": h}, errors.Join(errs...)
}

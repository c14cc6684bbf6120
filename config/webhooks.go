package config

import (
	"fmt"
	"net/url"
	"slices"

	"time"

	"github.com/ladderhq/ladder"
)

// Defaults of a webhook endpoint.
const (
	DefaultWebhookAttempts    = 10
	DefaultWebhookInFlight    = 4
	DefaultWebhookBackoff     = time.Second
	DefaultWebhookTimeout     = 10 * time.Second
	maxWebhookAttempts        = 100
	maxWebhookInFlight        = 64
	minWebhookBackoff         = 10 * time.Millisecond
	maxWebhookTimeout         = time.Minute
	webhookEventsExpectedList = "approval.requested, approval.decided, approval.expired, approval.execution_failed, lane.changed, gate.held, audit.unavailable"
)

type fileWebhook struct {
	Name         string   `yaml:"name" json:"name" jsonschema:"Endpoint name, unique in the workspace (ops-hook); deliveries are listed under workspace/name."`
	URL          string   `yaml:"url" json:"url" jsonschema:"Where events are POSTed: http:// or https://."`
	SecretEnv    string   `yaml:"secret_env" json:"secret_env" jsonschema:"Environment variable holding the Standard Webhooks signing secret (whsec_ then base64 of at least 24 random bytes). The secret itself never goes in this file."`
	OldSecretEnv string   `yaml:"old_secret_env,omitempty" json:"old_secret_env,omitempty" jsonschema:"While a secret rotates: environment variable holding the previous secret. Every message then carries two signatures, so receivers that know either verify."`
	Events       []string `yaml:"events,omitempty" json:"events,omitempty" jsonschema:"Event types to send (approval.requested, approval.decided, approval.expired, approval.execution_failed, lane.changed, gate.held, audit.unavailable). Default every type."`
	MaxAttempts  int      `yaml:"max_attempts,omitempty" json:"max_attempts,omitempty" jsonschema:"Tries before a delivery is dead-lettered (1 to 100). Default 10."`
	MaxInFlight  int      `yaml:"max_in_flight,omitempty" json:"max_in_flight,omitempty" jsonschema:"Deliveries to this endpoint in progress at once, per replica (1 to 64). Default 4."`
	Backoff      string   `yaml:"backoff,omitempty" json:"backoff,omitempty" jsonschema:"Wait after the first failed try, as a Go duration; it doubles after each failure, with jitter, up to 1h. Default 1s; at least 10ms."`
	Timeout      string   `yaml:"timeout,omitempty" json:"timeout,omitempty" jsonschema:"Time limit of one try, as a Go duration (up to 1m). Default 10s."`
}

// Webhook is a checked webhook endpoint of a workspace.
type Webhook struct {
	Name         string
	URL          string
	SecretEnv    string
	OldSecretEnv string
	// Events are the types sent; empty means every type.
	Events      []string
	MaxAttempts int
	MaxInFlight int
	Backoff     time.Duration
	Timeout     time.Duration
	// Path is the field path of the endpoint, for Config.Position.
	Path string
}

// webhooks checks a workspace's webhook endpoints.
func (b *builder) webhooks(fws []fileWebhook, at string) []Webhook {
	var out []Webhook
	seen := map[string]string{}
	for i := range fws {
		fw, wat := &fws[i], fmt.Sprintf("%s.webhooks[%d]", at, i)
		w := Webhook{Name: fw.Name, URL: fw.URL, SecretEnv: fw.SecretEnv, OldSecretEnv: fw.OldSecretEnv, Events: fw.Events,
			MaxAttempts: DefaultWebhookAttempts, MaxInFlight: DefaultWebhookInFlight, Backoff: DefaultWebhookBackoff, Timeout: DefaultWebhookTimeout, Path: wat}
		b.id(wat+".name", "webhook", fw.Name)
		if prev, dup := seen[fw.Name]; dup && fw.Name != "" {
			b.fail(wat+".name", "webhook name %q is already used by %s; names are unique in a workspace", fw.Name, prev)
		}
		seen[fw.Name] = wat
		if fw.Name == "slack" {
			b.fail(wat+".name", "the name slack is the Slack target's (workspace/slack in the deliveries); choose another")
		}
		if u, err := url.Parse(fw.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			b.fail(wat+".url", "%q is not a webhook URL; expected http://host/… or https://host/…", fw.URL)
		} else if u.User != nil {
			b.fail(wat+".url", "the URL carries credentials; receivers verify the webhook-signature header instead")
		}
		for _, f := range []struct{ path, v string }{{wat + ".secret_env", fw.SecretEnv}, {wat + ".old_secret_env", fw.OldSecretEnv}} {
			if f.v != "" && !envPattern.MatchString(f.v) {
				b.fail(f.path, "%q is not an environment variable name; expected letters, digits and _ (LADDER_WEBHOOK_SECRET)", f.v)
			}
		}
		if fw.SecretEnv == "" {
			b.fail(wat+".secret_env", "secret_env is missing; name the environment variable holding the whsec_ signing secret")
		}
		for j, ev := range fw.Events {
			if !slices.Contains(eventTypes(), ev) {
				b.fail(fmt.Sprintf("%s.events[%d]", wat, j), "%q is not an event type; expected one of %s", ev, webhookEventsExpectedList)
			}
		}
		if b.has(wat + ".max_attempts") {
			if fw.MaxAttempts < 1 || fw.MaxAttempts > maxWebhookAttempts {
				b.fail(wat+".max_attempts", "%d is out of range; expected 1 to %d", fw.MaxAttempts, maxWebhookAttempts)
			}
			w.MaxAttempts = fw.MaxAttempts
		}
		if b.has(wat + ".max_in_flight") {
			if fw.MaxInFlight < 1 || fw.MaxInFlight > maxWebhookInFlight {
				b.fail(wat+".max_in_flight", "%d is out of range; expected 1 to %d", fw.MaxInFlight, maxWebhookInFlight)
			}
			w.MaxInFlight = fw.MaxInFlight
		}
		if fw.Backoff != "" {
			w.Backoff = b.duration(wat+".backoff", fw.Backoff, DefaultWebhookBackoff)
			if w.Backoff < minWebhookBackoff {
				b.fail(wat+".backoff", "%q is too short; expected at least 10ms", fw.Backoff)
			}
		}
		if fw.Timeout != "" {
			w.Timeout = b.duration(wat+".timeout", fw.Timeout, DefaultWebhookTimeout)
			if w.Timeout > maxWebhookTimeout {
				b.fail(wat+".timeout", "%q is too long; expected at most 1m", fw.Timeout)
			}
		}
		out = append(out, w)
	}
	return out
}

// EndpointName is how a workspace's endpoint is named on the server (and
// in the deliveries): workspace/name.
func EndpointName(workspace, name string) string { return workspace + "/" + name }

// eventTypes are the event types a filter may name.
func eventTypes() []string { return ladder.EventTypes() }

package config

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestWebhooks(t *testing.T) {
	cfg, err := Parse("t.yaml", []byte(with(
		"    webhooks:",
		"      - name: ops",
		"        url: https://hooks.example/ladder",
		"        secret_env: OPS_HOOK_SECRET",
		"        old_secret_env: OPS_HOOK_SECRET_OLD",
		"        events: [approval.requested, lane.changed]",
		"        max_attempts: 3",
		"        backoff: 100ms",
		"      - name: all",
		"        url: http://127.0.0.1:9000/",
		"        secret_env: ALL_SECRET",
	)))
	if err != nil {
		t.Fatal(err)
	}
	want := []Webhook{
		{Name: "ops", URL: "https://hooks.example/ladder", SecretEnv: "OPS_HOOK_SECRET", OldSecretEnv: "OPS_HOOK_SECRET_OLD",
			Events: []string{"approval.requested", "lane.changed"}, MaxAttempts: 3, MaxInFlight: 4, Backoff: 100 * time.Millisecond, Timeout: 10 * time.Second,
			Path: "workspaces[0].webhooks[0]"},
		{Name: "all", URL: "http://127.0.0.1:9000/", SecretEnv: "ALL_SECRET", MaxAttempts: 10, MaxInFlight: 4, Backoff: time.Second, Timeout: 10 * time.Second,
			Path: "workspaces[0].webhooks[1]"},
	}
	if diff := cmp.Diff(want, cfg.Workspaces[0].Webhooks); diff != "" {
		t.Errorf("webhooks (-want +got):\n%s", diff)
	}
	if got := cfg.Position("workspaces[0].webhooks[1].secret_env").String(); got != "t.yaml:18" {
		t.Errorf("position of the second secret_env = %s, want t.yaml:18", got)
	}
}

func TestWebhookErrors(t *testing.T) {
	const wh = "workspaces[0].webhooks[0]"
	tests := []struct {
		name  string
		extra []string
		want  []string
	}{
		{"bad url, secret and event", []string{
			"    webhooks:",
			"      - name: ops",
			"        url: ftp://x",
			"        secret_env: not-a-name",
			"        events: [approval.granted]",
		}, []string{
			`t.yaml:10: ` + wh + `.url: "ftp://x" is not a webhook URL; expected http://host/… or https://host/…`,
			`t.yaml:11: ` + wh + `.secret_env: "not-a-name" is not an environment variable name; expected letters, digits and _ (LADDER_WEBHOOK_SECRET)`,
			`t.yaml:12: ` + wh + `.events[0]: "approval.granted" is not an event type; expected one of approval.requested, approval.decided, approval.expired, approval.execution_failed, lane.changed, gate.held, audit.unavailable`,
		}},
		{"limits and duplicate", []string{
			"    webhooks:",
			"      - name: ops",
			"        url: https://u:p@hooks.example/",
			"        secret_env: S",
			"        max_attempts: 0",
			"        backoff: 1ms",
			"      - name: ops",
			"        url: https://hooks.example/",
			"        secret_env: S",
		}, []string{
			`t.yaml:10: ` + wh + `.url: the URL carries credentials; receivers verify the webhook-signature header instead`,
			`t.yaml:12: ` + wh + `.max_attempts: 0 is out of range; expected 1 to 100`,
			`t.yaml:13: ` + wh + `.backoff: "1ms" is too short; expected at least 10ms`,
			`t.yaml:14: workspaces[0].webhooks[1].name: webhook name "ops" is already used by ` + wh + `; names are unique in a workspace`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, parseErrs(t, with(tt.extra...))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSlackErrors(t *testing.T) {
	const sl = "workspaces[0].slack"
	tests := []struct {
		name  string
		extra []string
		want  []string
	}{
		{"nothing to post with", []string{
			"    slack:",
			"      signing_secret_env: S",
		}, []string{`t.yaml:8: ` + sl + `: slack needs webhook_url_env, or bot_token_env with channel, to post with`}},
		{"bot without channel, email without bot", []string{
			"    slack:",
			"      webhook_url_env: HOOK",
			"      users:",
			"        - {email: bob@example.com, principal: bob}",
			"        - {principal: eve}",
		}, []string{
			`t.yaml:8: ` + sl + `.signing_secret_env: signing_secret_env is missing; name the environment variable holding the Slack app's signing secret`,
			`t.yaml:11: ` + sl + `.users[0].email: matching by email needs bot_token_env (users.info); give slack_user instead`,
			`t.yaml:12: ` + sl + `.users[1]: give slack_user or email, one of them`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, parseErrs(t, with(tt.extra...))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

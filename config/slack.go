package config

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
)

type fileSlack struct {
	WebhookURLEnv    string          `yaml:"webhook_url_env,omitempty" json:"webhook_url_env,omitempty" jsonschema:"Environment variable holding a Slack incoming webhook URL (a secret) to post to. Either this or bot_token_env with channel."`
	BotTokenEnv      string          `yaml:"bot_token_env,omitempty" json:"bot_token_env,omitempty" jsonschema:"Environment variable holding a Slack bot token (xoxb-…) that posts with chat.postMessage to channel, and looks users' emails up with users.info."`
	Channel          string          `yaml:"channel,omitempty" json:"channel,omitempty" jsonschema:"Channel id (C0123ABC) the bot posts to; required with bot_token_env."`
	SigningSecretEnv string          `yaml:"signing_secret_env" json:"signing_secret_env" jsonschema:"Environment variable holding the Slack app's signing secret, which checks that Approve and Reject clicks come from Slack."`
	APIURL           string          `yaml:"api_url,omitempty" json:"api_url,omitempty" jsonschema:"Base URL of the Slack Web API. Default https://slack.com/api; change it only for a proxy or a test stand-in."`
	Events           []string        `yaml:"events,omitempty" json:"events,omitempty" jsonschema:"Event types to post. Default every type. approval.requested is posted with Approve and Reject buttons, the others as plain messages."`
	Users            []fileSlackUser `yaml:"users,omitempty" json:"users,omitempty" jsonschema:"Who may decide from Slack: each Slack user (by user id, or by email with bot_token_env) and the person (principal) the decision is recorded as. Anyone else's click is refused and changes nothing."`
}

type fileSlackUser struct {
	SlackUser string `yaml:"slack_user,omitempty" json:"slack_user,omitempty" jsonschema:"Slack user id (U0123ABC)."`
	Email     string `yaml:"email,omitempty" json:"email,omitempty" jsonschema:"The Slack user's email; matched with users.info, so it needs bot_token_env."`
	Principal string `yaml:"principal" json:"principal" jsonschema:"The person the decision is recorded as (decided_by slack:PRINCIPAL), e.g. alice."`
}

// Slack is a checked Slack target of a workspace.
type Slack struct {
	WebhookURLEnv    string
	BotTokenEnv      string
	Channel          string
	SigningSecretEnv string
	APIURL           string
	Events           []string
	// Users maps a Slack user id to a principal; Emails a lowercase email.
	Users  map[string]string
	Emails map[string]string
	// Path is the field path of the target, for Config.Position.
	Path string
}

// DefaultSlackAPI is the Slack Web API's base URL.
const DefaultSlackAPI = "https://slack.com/api"

func (b *builder) slack(fs *fileSlack, at string) *Slack {
	if fs == nil {
		return nil
	}
	at += ".slack"
	s := &Slack{WebhookURLEnv: fs.WebhookURLEnv, BotTokenEnv: fs.BotTokenEnv, Channel: fs.Channel, SigningSecretEnv: fs.SigningSecretEnv,
		APIURL: DefaultSlackAPI, Events: fs.Events, Users: map[string]string{}, Emails: map[string]string{}, Path: at}
	for _, f := range []struct{ path, v string }{{at + ".webhook_url_env", fs.WebhookURLEnv}, {at + ".bot_token_env", fs.BotTokenEnv}, {at + ".signing_secret_env", fs.SigningSecretEnv}} {
		if f.v != "" && !envPattern.MatchString(f.v) {
			b.fail(f.path, "%q is not an environment variable name; expected letters, digits and _ (SLACK_BOT_TOKEN)", f.v)
		}
	}
	switch {
	case fs.WebhookURLEnv == "" && fs.BotTokenEnv == "":
		b.fail(at, "slack needs webhook_url_env, or bot_token_env with channel, to post with")
	case fs.WebhookURLEnv != "" && fs.BotTokenEnv != "":
		b.fail(at+".bot_token_env", "give webhook_url_env or bot_token_env, not both")
	case fs.BotTokenEnv != "" && fs.Channel == "":
		b.fail(at+".channel", "channel is missing; the bot posts to a channel id such as C0123ABC")
	case fs.WebhookURLEnv != "" && fs.Channel != "":
		b.fail(at+".channel", "channel is not used with webhook_url_env: an incoming webhook posts to its own channel")
	}
	if fs.SigningSecretEnv == "" {
		b.fail(at+".signing_secret_env", "signing_secret_env is missing; name the environment variable holding the Slack app's signing secret")
	}
	if fs.APIURL != "" {
		if u, err := url.Parse(fs.APIURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			b.fail(at+".api_url", "%q is not a URL; expected https://host/…", fs.APIURL)
		}
		s.APIURL = strings.TrimSuffix(fs.APIURL, "/")
	}
	for j, ev := range fs.Events {
		if !slices.Contains(eventTypes(), ev) {
			b.fail(fmt.Sprintf("%s.events[%d]", at, j), "%q is not an event type; expected one of %s", ev, webhookEventsExpectedList)
		}
	}
	for j, u := range fs.Users {
		uat := fmt.Sprintf("%s.users[%d]", at, j)
		switch {
		case (u.SlackUser == "") == (u.Email == ""):
			b.fail(uat, "give slack_user or email, one of them")
		case u.Email != "" && fs.BotTokenEnv == "":
			b.fail(uat+".email", "matching by email needs bot_token_env (users.info); give slack_user instead")
		case u.Email != "" && !strings.Contains(u.Email, "@"):
			b.fail(uat+".email", "%q is not an email address", u.Email)
		}
		if !idPattern.MatchString(u.Principal) && !strings.Contains(u.Principal, "@") {
			b.fail(uat+".principal", "%q is not a principal; expected a name such as alice or an email", u.Principal)
		}
		if u.SlackUser != "" {
			s.Users[u.SlackUser] = u.Principal
		}
		if u.Email != "" {
			s.Emails[strings.ToLower(u.Email)] = u.Principal
		}
	}
	return s
}

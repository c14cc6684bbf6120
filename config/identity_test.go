package config

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ladderhq/ladder"
)

// TestIdentity reads a full identity section: defaults applied (audiences,
// label), rules in order with the file:line they were declared at.
func TestIdentity(t *testing.T) {
	src := with(
		"server: {public_url: https://ladder.example.com}", // 8
		"identity:",        // 9
		"  issuers:",       // 10
		"    - name: corp", // 11
		"      issuer: https://login.example.com/realms/corp", // 12
		"      scopes: [ladder]",                              // 13
		"      console: {client_id: ladder-console}",          // 14
		"      introspection: {url: https://login.example.com/introspect, client_id: ladder, client_secret_env: INTROSPECT_SECRET}", // 15
		"      rules:", // 16
		"        - {client_id: bot-1, workspace: ws, kind: agent}",         // 17
		"        - {group: approvers, workspace: ws, kind: human}",         // 18
		"        - {claim: role, value: ops, workspace: '*', kind: admin}", // 19
	)
	cfg, err := Parse("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := &ladder.Identity{Resource: "https://ladder.example.com", Issuers: []ladder.Issuer{{
		Name: "corp", URL: "https://login.example.com/realms/corp",
		Audiences:     []string{"https://ladder.example.com", "https://ladder.example.com/mcp"},
		Scopes:        []string{"ladder"},
		Introspection: &ladder.Introspection{URL: "https://login.example.com/introspect", ClientID: "ladder", ClientSecretEnv: "INTROSPECT_SECRET"},
		Console:       &ladder.ConsoleClient{ClientID: "ladder-console", Label: "Sign in with corp"},
		Rules: []ladder.IdentityRule{
			{ClientID: "bot-1", Workspace: "ws", Kind: ladder.KeyAgent, Where: "t.yaml:17"},
			{Group: "approvers", Workspace: "ws", Kind: ladder.KeyHuman, Where: "t.yaml:18"},
			{Claim: "role", Value: "ops", Workspace: "*", Kind: ladder.KeyAdmin, Where: "t.yaml:19"},
		},
	}}}
	if diff := cmp.Diff(want, cfg.Identity); diff != "" {
		t.Errorf("Identity (-want +got):\n%s", diff)
	}
}

// TestIdentityErrors: every fault of the identity section names its line
// and says what is expected.
func TestIdentityErrors(t *testing.T) {
	pre := []string{
		"server: {public_url: https://ladder.example.com}", // 8
		"identity:",  // 9
		"  issuers:", // 10
	}
	tests := []struct {
		name  string
		extra []string
		want  []string
	}{
		{"http issuer off loopback", []string{
			"    - name: corp",                       // 11
			"      issuer: http://login.example.com", // 12
			"      rules: [{client_id: a, workspace: ws, kind: agent}]",
		}, []string{`t.yaml:12: identity.issuers[0].issuer: "http://login.example.com" is http on a host that is not loopback; tokens and secrets would cross the network in the clear, so use https`}},
		{"rule faults", []string{
			"    - name: corp",                        // 11
			"      issuer: https://login.example.com", // 12
			"      rules:",                            // 13
			"        - {client_id: a, subject: b, workspace: ws, kind: agent}", // 14
			"        - {claim: role, workspace: nope, kind: robot}",            // 15
			"        - {group: g, workspace: '*', kind: human}",                // 16
		}, []string{
			`t.yaml:14: identity.issuers[0].rules[0]: a rule matches exactly one of client_id, subject, claim (with value) or group; this one names 2`,
			`t.yaml:15: identity.issuers[0].rules[1].value: value is missing; a claim rule matches tokens whose claim role has this value`,
			`t.yaml:15: identity.issuers[0].rules[1].kind: "robot" is not a kind; expected one of agent, human, admin`,
			`t.yaml:15: identity.issuers[0].rules[1].workspace: "nope" is not a workspace of this file; expected one of ws`,
			`t.yaml:16: identity.issuers[0].rules[2].workspace: only an admin rule may span every workspace (*); name one workspace for agent and human rules`,
		}},
		{"duplicate names, no rules, secret without env", []string{
			"    - name: corp",                    // 11
			"      issuer: https://a.example.com", // 12
			"      rules: [{client_id: a, workspace: ws, kind: agent}]",
			"    - name: corp",                                                       // 14
			"      issuer: https://a.example.com",                                    // 15
			"      introspection: {url: https://a.example.com/i, client_id: ladder}", // 16
			"      rules: []",                                                        // 17
		}, []string{
			`t.yaml:14: identity.issuers[1].name: issuer name "corp" is already used by identity.issuers[0]; issuer names are unique`,
			`t.yaml:15: identity.issuers[1].issuer: issuer "https://a.example.com" is already declared by identity.issuers[0]; declare each issuer once`,
			`t.yaml:16: identity.issuers[1].introspection.client_secret_env: client_secret_env is missing; name the environment variable holding client "ladder"'s secret`,
			`t.yaml:17: identity.issuers[1].rules: no rules are declared; a token of this issuer could never map to a workspace, so add at least one rule (client_id, subject, claim or group → workspace and kind)`,
		}},
		{"unknown field", []string{
			"    - name: corp",                    // 11
			"      issuer: https://a.example.com", // 12
			"      audience: https://x",           // 13
			"      rules: [{client_id: a, workspace: ws, kind: agent}]",
		}, []string{`t.yaml:13: identity.issuers[0].audience: unknown field "audience"; did you mean "audiences"?`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := parseErrs(t, with(append(append([]string{}, pre...), tt.extra...)...))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

// TestIdentityResourceMustBeHTTPS: without identity.resource, a public_url
// that is plain http off loopback cannot be the resource.
func TestIdentityResourceMustBeHTTPS(t *testing.T) {
	got := parseErrs(t, with(
		"server: {public_url: http://ladder.example.com}", // 8
		"identity:", // 9
		"  issuers: [{name: corp, issuer: https://a.example.com, rules: [{client_id: a, workspace: ws, kind: agent}]}]",
	))
	want := []string{`t.yaml:9: identity: the resource defaults to server.public_url "http://ladder.example.com", which is not https; set server.public_url or identity.resource to the https URL clients reach this server at (http is allowed on a loopback host only)`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

// TestIdentityOneIntrospector: an opaque token does not say whose it is,
// so only one issuer may introspect (it is never sent to another).
func TestIdentityOneIntrospector(t *testing.T) {
	got := parseErrs(t, with(
		"server: {public_url: https://ladder.example.com}", // 8
		"identity:",  // 9
		"  issuers:", // 10
		"    - {name: a, issuer: https://a.example.com, introspection: {url: https://a.example.com/i}, rules: [{client_id: x, workspace: ws, kind: agent}]}", // 11
		"    - {name: b, issuer: https://b.example.com, introspection: {url: https://b.example.com/i}, rules: [{client_id: y, workspace: ws, kind: agent}]}", // 12
	))
	want := []string{`t.yaml:12: identity.issuers[1].introspection: identity.issuers[0] has introspection already; only one issuer may introspect, since an opaque token does not say whose it is and would be sent to every issuer's endpoint`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

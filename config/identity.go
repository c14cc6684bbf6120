package config

import (
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/ladderhq/ladder"
)

// identity checks the identity section: URLs, unique issuer names, and
// rules that each match one thing and name a workspace of the file and a
// kind.
func (b *builder) identity(fi *fileIdentity, cfg *Config) *ladder.Identity {
	id := &ladder.Identity{Resource: cfg.Server.PublicURL}
	if fi.Resource != "" {
		if b.serverURL("identity.resource", fi.Resource, "https://ladder.example.com") {
			id.Resource = strings.TrimRight(fi.Resource, "/")
		}
	} else if !secureURL(id.Resource) {
		b.fail("identity", "the resource defaults to server.public_url %q, which is not https; set server.public_url or identity.resource to the https URL clients reach this server at (http is allowed on a loopback host only)", id.Resource)
	}
	if len(fi.Issuers) == 0 {
		b.fail("identity.issuers", "no issuers are declared; expected at least one trusted authorization server, or no identity section")
	}
	names, urls := map[string]string{}, map[string]string{}
	introspector := ""
	for i := range fi.Issuers {
		fis := &fi.Issuers[i]
		at := fmt.Sprintf("identity.issuers[%d]", i)
		is := ladder.Issuer{Name: fis.Name, URL: strings.TrimSpace(fis.Issuer), ClientIDClaim: fis.ClientIDClaim, GroupsClaim: fis.GroupsClaim}
		b.id(at+".name", "issuer", fis.Name)
		if prev, dup := names[fis.Name]; dup && fis.Name != "" {
			b.fail(at+".name", "issuer name %q is already used by %s; issuer names are unique", fis.Name, prev)
		}
		names[fis.Name] = at
		if is.URL == "" {
			b.fail(at+".issuer", "the issuer URL is missing; expected the URL tokens name in iss, e.g. https://login.example.com/realms/corp")
		} else if b.serverURL(at+".issuer", is.URL, "https://login.example.com/realms/corp") {
			if prev, dup := urls[is.URL]; dup {
				b.fail(at+".issuer", "issuer %q is already declared by %s; declare each issuer once", is.URL, prev)
			}
			urls[is.URL] = at
		}
		is.Audiences = fis.Audiences
		if len(is.Audiences) == 0 {
			is.Audiences = []string{id.Resource, id.Resource + "/mcp"}
		}
		for j, a := range fis.Audiences {
			if strings.TrimSpace(a) == "" {
				b.fail(fmt.Sprintf("%s.audiences[%d]", at, j), "the audience is empty; expected this server's resource URL")
			}
		}
		for j, sc := range fis.Scopes {
			if sc == "" || strings.ContainsAny(sc, " \t\n\"\\") {
				b.fail(fmt.Sprintf("%s.scopes[%d]", at, j), "%q is not a scope; expected one scope token without spaces or quotes", sc)
			}
			is.Scopes = append(is.Scopes, sc)
		}
		if in := fis.Introspection; in != nil {
			if introspector != "" {
				b.fail(at+".introspection", "%s has introspection already; only one issuer may introspect, since an opaque token does not say whose it is and would be sent to every issuer's endpoint", introspector)
			}
			introspector = at
			b.serverURL(at+".introspection.url", in.URL, "https://login.example.com/oauth2/introspect")
			switch {
			case in.ClientID != "" && in.ClientSecretEnv == "":
				b.fail(at+".introspection.client_secret_env", "client_secret_env is missing; name the environment variable holding client %q's secret", in.ClientID)
			case in.ClientID == "" && in.ClientSecretEnv != "":
				b.fail(at+".introspection.client_id", "client_id is missing; client_secret_env needs the client id it belongs to")
			}
			b.envName(at+".introspection.client_secret_env", in.ClientSecretEnv)
			is.Introspection = &ladder.Introspection{URL: in.URL, ClientID: in.ClientID, ClientSecretEnv: in.ClientSecretEnv}
		}
		if c := fis.Console; c != nil {
			if c.ClientID == "" {
				b.fail(at+".console.client_id", "the console client id is missing; register ladder's console as an OpenID Connect client with the issuer and put its id here")
			}
			b.envName(at+".console.client_secret_env", c.ClientSecretEnv)
			label := c.Label
			if label == "" {
				label = "Sign in with " + fis.Name
			}
			is.Console = &ladder.ConsoleClient{ClientID: c.ClientID, ClientSecretEnv: c.ClientSecretEnv, Label: label}
		}
		if len(fis.Rules) == 0 {
			b.fail(at+".rules", "no rules are declared; a token of this issuer could never map to a workspace, so add at least one rule (client_id, subject, claim or group → workspace and kind)")
		}
		for j := range fis.Rules {
			if r, ok := b.identityRule(&fis.Rules[j], fmt.Sprintf("%s.rules[%d]", at, j), cfg); ok {
				is.Rules = append(is.Rules, r)
			}
		}
		id.Issuers = append(id.Issuers, is)
	}
	return id
}

func (b *builder) identityRule(fr *fileIdentityRule, at string, cfg *Config) (ladder.IdentityRule, bool) {
	r := ladder.IdentityRule{ClientID: fr.ClientID, Subject: fr.Subject, Claim: fr.Claim, Value: fr.Value, Group: fr.Group,
		Workspace: fr.Workspace, Kind: ladder.KeyKind(fr.Kind), Where: cfg.Position(at).String()}
	ok := true
	n := 0
	for _, v := range []string{fr.ClientID, fr.Subject, fr.Claim, fr.Group} {
		if v != "" {
			n++
		}
	}
	if n != 1 {
		b.fail(at, "a rule matches exactly one of client_id, subject, claim (with value) or group; this one names %d", n)
		ok = false
	}
	if fr.Claim != "" && fr.Value == "" {
		b.fail(at+".value", "value is missing; a claim rule matches tokens whose claim %s has this value", fr.Claim)
		ok = false
	}
	if fr.Claim == "" && fr.Value != "" {
		b.fail(at+".value", "value is only read with claim; name the claim it belongs to")
		ok = false
	}
	if !r.Kind.Valid() {
		b.fail(at+".kind", "%q is not a kind; expected one of agent, human, admin", fr.Kind)
		ok = false
	}
	switch {
	case fr.Workspace == "":
		b.fail(at+".workspace", "the workspace is missing; expected the id of a workspace of this file")
		ok = false
	case fr.Workspace == "*":
		if r.Kind != ladder.KeyAdmin {
			b.fail(at+".workspace", "only an admin rule may span every workspace (*); name one workspace for agent and human rules")
			ok = false
		}
	default:
		if _, found := cfg.Workspace(fr.Workspace); !found {
			var ids []string
			for _, w := range cfg.Workspaces {
				ids = append(ids, w.ID)
			}
			b.fail(at+".workspace", "%q is not a workspace of this file; expected one of %s", fr.Workspace, strings.Join(ids, ", "))
			ok = false
		}
	}
	return r, ok
}

// serverURL checks an absolute https URL (http on a loopback host), with
// no query or fragment, and reports whether it is one.
func (b *builder) serverURL(path, v, example string) bool {
	u, err := url.Parse(v)
	if err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil || (u.Scheme != "https" && u.Scheme != "http") {
		b.fail(path, "%q is not an absolute https URL; expected e.g. %s", v, example)
		return false
	}
	if !secureURL(v) {
		b.fail(path, "%q is http on a host that is not loopback; tokens and secrets would cross the network in the clear, so use https", v)
		return false
	}
	return true
}

// secureURL reports whether v is https, or http on a loopback host.
func secureURL(v string) bool {
	u, err := url.Parse(v)
	if err != nil {
		return false
	}
	if u.Scheme == "https" {
		return true
	}
	if u.Scheme != "http" {
		return false
	}
	h := u.Hostname()
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

func (b *builder) envName(path, v string) {
	if v != "" && !envPattern.MatchString(v) {
		b.fail(path, "%q is not an environment variable name; expected letters, digits and _ (the secret itself never goes in this file)", v)
	}
}

package ladder

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// Identity beyond keys (DESIGN §8): ladder is an OAuth 2.1 resource server.
// An access token from a trusted issuer is verified (package oauth) and its
// claims are mapped by the rules below to exactly one workspace and kind;
// from there on the token is a Principal like a key, and the same kind rules
// apply everywhere.

// Identity is the server's trust in OAuth authorization servers, as the
// config declares it.
type Identity struct {
	// Resource is this server's resource identifier (RFC 8707, RFC 9728):
	// its public URL, without a trailing slash. The /mcp endpoint's
	// resource is Resource + "/mcp".
	Resource string
	// Issuers are the trusted authorization servers, in config order.
	Issuers []Issuer
}

// Issuer is one trusted authorization server.
type Issuer struct {
	// Name is a short id: it names the issuer in audit records and in the
	// console's sign-in URL.
	Name string
	// URL is the issuer identifier; a token's iss must equal it exactly.
	URL string
	// Audiences are the aud values accepted: a token must name one of them
	// (RFC 8707). By default this server's resource and its /mcp resource.
	Audiences []string
	// Scopes must all be granted to a token (scope or scp claim).
	Scopes []string
	// ClientIDClaim names the claim holding the client id; "" tries
	// client_id (RFC 9068), azp, cid (Okta) and appid (Entra ID v1), in
	// that order.
	ClientIDClaim string
	// GroupsClaim names the claim holding group memberships (default
	// "groups").
	GroupsClaim string
	// Introspection, when set, checks opaque tokens (RFC 7662).
	Introspection *Introspection
	// Console, when set, lets people sign in to the console through this
	// issuer (OpenID Connect authorization code flow with PKCE).
	Console *ConsoleClient
	// Rules map a token's claims to a workspace and kind.
	Rules []IdentityRule
}

// Introspection is an issuer's RFC 7662 endpoint and the client ladder
// authenticates to it as.
type Introspection struct {
	URL             string
	ClientID        string
	ClientSecretEnv string // environment variable holding the secret
}

// ConsoleClient is the OpenID Connect client the console signs people in
// as.
type ConsoleClient struct {
	ClientID        string
	ClientSecretEnv string // environment variable holding the secret; "" for a public client
	// Label is the sign-in button's text.
	Label string
}

// IdentityRule maps tokens whose claims match to a workspace and kind.
// Exactly one of ClientID, Subject, Claim (with Value) and Group is set.
type IdentityRule struct {
	ClientID  string
	Subject   string
	Claim     string
	Value     string
	Group     string
	Workspace string
	Kind      KeyKind
	// Where names the rule for people, e.g. "ladder.yaml:41".
	Where string
}

// TokenClaims are the claims of a verified token that the rules read.
type TokenClaims struct {
	Subject  string
	ClientID string
	Groups   []string
	// All holds every claim as decoded JSON, for Claim rules.
	All map[string]any
}

// Describe says what the rule matches, for hints.
func (r IdentityRule) Describe() string {
	switch {
	case r.ClientID != "":
		return fmt.Sprintf("client_id %q", r.ClientID)
	case r.Subject != "":
		return fmt.Sprintf("subject %q", r.Subject)
	case r.Claim != "":
		return fmt.Sprintf("claim %s = %q", r.Claim, r.Value)
	}
	return fmt.Sprintf("group %q", r.Group)
}

// Matches reports whether the rule matches c.
func (r IdentityRule) Matches(c TokenClaims) bool {
	switch {
	case r.ClientID != "":
		return c.ClientID == r.ClientID
	case r.Subject != "":
		return c.Subject == r.Subject
	case r.Claim != "":
		return claimHas(c.All[r.Claim], r.Value)
	case r.Group != "":
		return slices.Contains(c.Groups, r.Group)
	}
	return false
}

// claimHas reports whether a claim's value is want, or a list holding it.
// Numbers and booleans match their JSON spelling.
func claimHas(v any, want string) bool {
	switch x := v.(type) {
	case string:
		return x == want
	case bool, float64:
		return fmt.Sprint(x) == want
	case []any:
		for _, e := range x {
			if s, ok := e.(string); ok && s == want {
				return true
			}
		}
	}
	return false
}

// MapToken returns the one workspace and kind that iss's rules give c.
// No matching rule, or matching rules that disagree, is TOKEN_UNMAPPED
// with a hint naming what a rule would have to match.
func MapToken(iss Issuer, c TokenClaims) (workspace string, kind KeyKind, err *Error) {
	var hit []IdentityRule
	for _, r := range iss.Rules {
		if r.Matches(c) {
			hit = append(hit, r)
		}
	}
	if len(hit) == 0 {
		what := fmt.Sprintf("client_id %q or subject %q", c.ClientID, c.Subject)
		return "", "", &Error{Code: CodeTokenUnmapped,
			Message: fmt.Sprintf("The token of %s from issuer %q matches no identity rule, so it names no workspace.", describeCaller(c), iss.Name),
			Hint:    fmt.Sprintf("ask an admin to add a rule under identity.issuers (%s) mapping %s to a workspace and kind; nothing was done", iss.Name, what),
			Data:    map[string]any{"issuer": iss.Name, "subject": c.Subject, "client_id": c.ClientID}}
	}
	first := hit[0]
	for _, r := range hit[1:] {
		if r.Workspace != first.Workspace || r.Kind != first.Kind {
			return "", "", &Error{Code: CodeTokenUnmapped,
				Message: fmt.Sprintf("The token of %s matches identity rules that disagree: %s gives %s %s, %s gives %s %s.", describeCaller(c), first.Where, first.Workspace, first.Kind, r.Where, r.Workspace, r.Kind),
				Hint:    "ask an admin to make the rules of issuer " + iss.Name + " give this token one workspace and kind; nothing was done",
				Data:    map[string]any{"issuer": iss.Name, "subject": c.Subject, "client_id": c.ClientID}}
		}
	}
	return first.Workspace, first.Kind, nil
}

func describeCaller(c TokenClaims) string {
	if c.ClientID != "" && c.ClientID != c.Subject {
		return fmt.Sprintf("subject %q (client %q)", c.Subject, c.ClientID)
	}
	return fmt.Sprintf("subject %q", c.Subject)
}

// TokenActor is the name a token principal goes by in audit records,
// approvals, reviews and logs: "oauth:<issuer>:<client id>:<subject>". It
// holds who the caller is and through which client, never the token.
func TokenActor(issuer, clientID, subject string) string {
	return "oauth:" + issuer + ":" + clientID + ":" + subject
}

// IsTokenActor reports whether a principal's KeyID names a token rather
// than a key.
func IsTokenActor(keyID string) bool { return strings.HasPrefix(keyID, "oauth:") }

// TokenVerifier turns an access token that is not a ladder key into its
// principal (package oauth implements it). Invalid tokens are KEY_INVALID
// with a message saying what was wrong; a valid token no rule maps is
// TOKEN_UNMAPPED; one lacking a required scope is SCOPE_MISSING.
type TokenVerifier interface {
	VerifyToken(ctx context.Context, token string) (Principal, error)
}

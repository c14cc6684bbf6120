// Package oauth makes ladder an OAuth 2.1 resource server as the MCP
// authorization spec describes: it verifies access tokens from the issuers
// the config trusts and maps them to principals (ladder.MapToken), serves
// the Protected Resource Metadata of RFC 9728, and writes the
// WWW-Authenticate challenges of RFC 6750 that let clients find it.
//
// JWT access tokens are checked against the issuer's JWKS, found through
// OpenID Connect discovery (coreos/go-oidc) and verified with go-jose: the
// issuer exactly, the audience (RFC 8707: this server's resource), exp and
// nbf with a small skew, and the algorithm pinned to an asymmetric one the
// key itself allows (never none, never HMAC, so a public key can never be
// used as an HMAC secret). Opaque tokens go to the issuer's introspection
// endpoint (RFC 7662) where the config names one. A verified token is
// cached until it expires, so the hot path does no network and no
// signature check; a token whose key id the cached JWKS lacks refreshes it,
// at most once per MinRefresh per issuer, and without holding up tokens
// whose keys are cached.
//
// Package console uses the same Verifier for OpenID Connect sign-in (see
// SignIn).
package oauth

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/go-jose/go-jose/v4"

	"github.com/ladderhq/ladder"
)

// Defaults of Options.
const (
	// DefaultSkew is the clock skew allowed on exp, nbf and iat.
	DefaultSkew = 30 * time.Second
	// DefaultMinRefresh is the least time between two JWKS fetches of one
	// issuer, so tokens with made-up key ids cannot make ladder hammer the
	// issuer.
	DefaultMinRefresh = 5 * time.Second
	// DefaultIntrospectionCache is the longest an introspection answer is
	// reused: short, since introspection exists so revocation takes effect.
	DefaultIntrospectionCache = time.Minute
	// maxCached bounds the verified-token cache.
	maxCached = 10000
	// maxTokenLen bounds what is parsed at all.
	maxTokenLen = 16 << 10
	// maxClaimLen bounds sub and client id, which name the caller in
	// audit records.
	maxClaimLen = 255
)

// Options configure a Verifier.
type Options struct {
	Identity ladder.Identity
	// HTTPClient fetches discovery documents and JWKS and calls
	// introspection endpoints; nil means a client with a 10 s timeout.
	HTTPClient *http.Client
	// Getenv reads the client secrets the config names by variable.
	Getenv func(string) string
	Now    func() time.Time
	Logger *slog.Logger
	// Skew and MinRefresh default to DefaultSkew and DefaultMinRefresh.
	Skew       time.Duration
	MinRefresh time.Duration
}

// Verifier verifies access tokens and maps them to principals. It
// implements ladder.TokenVerifier and is safe for concurrent use.
type Verifier struct {
	id         ladder.Identity
	client     *http.Client
	getenv     func(string) string
	now        func() time.Time
	log        *slog.Logger
	skew       time.Duration
	minRefresh time.Duration
	issuers    []*issuer

	mu    sync.Mutex
	cache map[[32]byte]cached
}

var _ ladder.TokenVerifier = (*Verifier)(nil)

type cached struct {
	p     ladder.Principal
	until time.Time
}

// New returns a Verifier for the issuers of opts.Identity. Nothing is
// fetched yet: discovery runs at an issuer's first token, so the server
// starts while an issuer is down.
func New(opts Options) *Verifier {
	v := &Verifier{id: opts.Identity, client: opts.HTTPClient, getenv: opts.Getenv, now: opts.Now, log: opts.Logger,
		skew: opts.Skew, minRefresh: opts.MinRefresh, cache: map[[32]byte]cached{}}
	if v.client == nil {
		v.client = &http.Client{Timeout: 10 * time.Second}
	}
	if v.getenv == nil {
		v.getenv = func(string) string { return "" }
	}
	if v.now == nil {
		v.now = time.Now
	}
	if v.log == nil {
		v.log = slog.New(slog.DiscardHandler)
	}
	if v.skew <= 0 {
		v.skew = DefaultSkew
	}
	if v.minRefresh <= 0 {
		v.minRefresh = DefaultMinRefresh
	}
	for _, is := range opts.Identity.Issuers {
		i := &issuer{cfg: is, v: v}
		i.src = i
		v.issuers = append(v.issuers, i)
	}
	return v
}

// Identity returns the identity config the Verifier was built from.
func (v *Verifier) Identity() ladder.Identity { return v.id }

// VerifyToken checks an access token and returns its principal. A token
// that is not valid is KEY_INVALID, with a message saying why (it becomes
// the challenge's error_description); a valid token that no rule maps is
// TOKEN_UNMAPPED and one lacking a required scope SCOPE_MISSING. An issuer
// that cannot be reached is KEY_INVALID too, saying so, and is logged.
func (v *Verifier) VerifyToken(ctx context.Context, token string) (ladder.Principal, error) {
	now := v.now()
	key := sha256.Sum256([]byte(token))
	v.mu.Lock()
	c, ok := v.cache[key]
	v.mu.Unlock()
	if ok && now.Before(c.until) {
		return c.p, nil
	}
	p, until, err := v.verify(ctx, token, now)
	if err != nil {
		return ladder.Principal{}, err
	}
	v.remember(key, cached{p: p, until: until}, now)
	return p, nil
}

// remember caches a verified token. At the cap, expired entries are swept;
// if none were, the token is not cached (it is verified again next time,
// still without network).
func (v *Verifier) remember(key [32]byte, c cached, now time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.cache) >= maxCached {
		for k, e := range v.cache {
			if !now.Before(e.until) {
				delete(v.cache, k)
			}
		}
		if len(v.cache) >= maxCached {
			return
		}
	}
	v.cache[key] = c
}

func (v *Verifier) verify(ctx context.Context, token string, now time.Time) (ladder.Principal, time.Time, error) {
	if len(token) > maxTokenLen {
		return ladder.Principal{}, time.Time{}, tokenInvalid("The access token is over %d bytes.", maxTokenLen)
	}
	if strings.Count(token, ".") == 2 {
		return v.verifyJWT(ctx, token, now)
	}
	// An opaque token: the one issuer that introspects (config allows no
	// more, so a token is never shown to another issuer).
	for _, is := range v.issuers {
		if is.cfg.Introspection != nil {
			return is.introspect(ctx, token, now)
		}
	}
	return ladder.Principal{}, time.Time{}, tokenInvalid("The bearer token is neither a ladder key nor a JWT access token.")
}

func (v *Verifier) issuerByURL(url string) *issuer {
	for _, is := range v.issuers {
		if is.cfg.URL == url {
			return is
		}
	}
	return nil
}

// IssuerByName returns the trusted issuer of that config name.
func (v *Verifier) IssuerByName(name string) (ladder.Issuer, bool) {
	for _, is := range v.issuers {
		if is.cfg.Name == name {
			return is.cfg, true
		}
	}
	return ladder.Issuer{}, false
}

// principal maps checked claims to a principal: the required scopes, the
// rules.
func (is *issuer) principal(c ladder.TokenClaims, granted []string) (ladder.Principal, error) {
	if c.Subject == "" {
		return ladder.Principal{}, tokenInvalid("The access token has no sub claim.")
	}
	if len(c.Subject) > maxClaimLen || len(c.ClientID) > maxClaimLen {
		return ladder.Principal{}, tokenInvalid("The access token's sub or client id is over %d bytes.", maxClaimLen)
	}
	var missing []string
	for _, s := range is.cfg.Scopes {
		if !slices.Contains(granted, s) {
			missing = append(missing, s)
		}
	}
	if len(missing) > 0 {
		return ladder.Principal{}, &ladder.Error{Code: ladder.CodeScopeMissing,
			Message: fmt.Sprintf("The access token lacks the scope %s that issuer %q's tokens need here.", strings.Join(missing, " "), is.cfg.Name),
			Hint:    "request a token with scope " + strings.Join(is.cfg.Scopes, " ") + "; nothing was done",
			Data:    map[string]any{"required_scopes": is.cfg.Scopes}}
	}
	ws, kind, merr := ladder.MapToken(is.cfg, c)
	if merr != nil {
		return ladder.Principal{}, merr
	}
	return ladder.Principal{KeyID: ladder.TokenActor(is.cfg.Name, c.ClientID, c.Subject), Workspace: ws, Kind: kind, Subject: c.Subject, ClientID: c.ClientID}, nil
}

// tokenClaims reads sub, the client id and groups from the decoded claims.
func (is *issuer) tokenClaims(all map[string]any) ladder.TokenClaims {
	c := ladder.TokenClaims{All: all}
	c.Subject, _ = all["sub"].(string)
	names := []string{"client_id", "azp", "cid", "appid"}
	if is.cfg.ClientIDClaim != "" {
		names = []string{is.cfg.ClientIDClaim}
	}
	for _, n := range names {
		if s, ok := all[n].(string); ok && s != "" {
			c.ClientID = s
			break
		}
	}
	gc := is.cfg.GroupsClaim
	if gc == "" {
		gc = "groups"
	}
	c.Groups = stringList(all[gc])
	return c
}

// grantedScopes reads the scope claim (RFC 9068: space-separated) or scp
// (a list, or a string on Entra ID).
func grantedScopes(all map[string]any) []string {
	if s, ok := all["scope"].(string); ok {
		return strings.Fields(s)
	}
	if s, ok := all["scp"].(string); ok {
		return strings.Fields(s)
	}
	return stringList(all["scp"])
}

func stringList(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		var out []string
		for _, e := range x {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// tokenInvalid is the refusal of a token that is not valid: KEY_INVALID, the
// refusal name of a bad credential, with a message saying what was wrong.
func tokenInvalid(format string, args ...any) *ladder.Error {
	return &ladder.Error{Code: ladder.CodeKeyInvalid, Message: fmt.Sprintf(format, args...),
		Hint: "get a new access token from your authorization server for this server's resource (see /.well-known/oauth-protected-resource), or send a ladder key"}
}

// issuer is one trusted issuer with its discovered endpoints and keys.
type issuer struct {
	cfg ladder.Issuer
	v   *Verifier
	// src finds verification keys: the issuer itself (its JWKS), or a
	// fixed set in the fuzz target.
	src keySource

	mu          sync.Mutex
	provider    *oidc.Provider
	jwksURI     string
	discoverErr error
	discoverAt  time.Time
	keys        []jose.JSONWebKey
	fetchedAt   time.Time // last JWKS fetch attempt
	fetchErr    error
	// fetching is closed when the JWKS fetch in progress ends; nil when
	// none is.
	fetching chan struct{}
}

// discover runs OpenID Connect discovery once; a failure is retried at
// most once per MinRefresh.
func (is *issuer) discover(ctx context.Context) (*oidc.Provider, string, error) {
	is.mu.Lock()
	defer is.mu.Unlock()
	if is.provider != nil {
		return is.provider, is.jwksURI, nil
	}
	now := is.v.now()
	if is.discoverErr != nil && now.Sub(is.discoverAt) < is.v.minRefresh {
		return nil, "", is.discoverErr
	}
	is.discoverAt = now
	p, err := oidc.NewProvider(oidc.ClientContext(ctx, is.v.client), is.cfg.URL)
	if err != nil {
		is.discoverErr = fmt.Errorf("discover issuer %s: %w", is.cfg.URL, err)
		is.v.log.WarnContext(ctx, "issuer discovery failed", "issuer", is.cfg.Name, "err", err)
		return nil, "", is.discoverErr
	}
	var meta struct {
		JWKSURI string `json:"jwks_uri"`
	}
	if err := p.Claims(&meta); err != nil || meta.JWKSURI == "" {
		is.discoverErr = fmt.Errorf("discover issuer %s: no jwks_uri", is.cfg.URL)
		return nil, "", is.discoverErr
	}
	is.provider, is.jwksURI, is.discoverErr = p, meta.JWKSURI, nil
	return p, meta.JWKSURI, nil
}

// Provider returns the issuer's discovered OpenID provider (for console
// sign-in).
func (v *Verifier) Provider(ctx context.Context, name string) (*oidc.Provider, error) {
	for _, is := range v.issuers {
		if is.cfg.Name == name {
			p, _, err := is.discover(ctx)
			return p, err
		}
	}
	return nil, errors.New("no such issuer")
}

// MapPerson maps the claims of an ID token the console verified (see
// package console's OpenID Connect sign-in) to a principal by the rules of
// issuer name. The client id is the console's; required scopes are for
// access tokens and do not apply.
func (v *Verifier) MapPerson(name string, all map[string]any) (ladder.Principal, error) {
	for _, is := range v.issuers {
		if is.cfg.Name != name || is.cfg.Console == nil {
			continue
		}
		c := is.tokenClaims(all)
		c.ClientID = is.cfg.Console.ClientID
		if c.Subject == "" || len(c.Subject) > maxClaimLen {
			return ladder.Principal{}, tokenInvalid("The ID token has no usable sub claim.")
		}
		ws, kind, merr := ladder.MapToken(is.cfg, c)
		if merr != nil {
			return ladder.Principal{}, merr
		}
		return ladder.Principal{KeyID: ladder.TokenActor(is.cfg.Name, c.ClientID, c.Subject), Workspace: ws, Kind: kind, Subject: c.Subject, ClientID: c.ClientID}, nil
	}
	return ladder.Principal{}, tokenInvalid("No issuer %q with console sign-in is configured.", name)
}

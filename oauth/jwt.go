package oauth

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/ladderhq/ladder"
)

// signingAlgs are the algorithms a token may be signed with: asymmetric
// only. "none" and the HMAC algorithms are absent, so a token signed with
// an issuer's public key as an HMAC secret is refused before any key is
// looked up.
var signingAlgs = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512, jose.EdDSA,
}

// keySource finds the verification key of a token's header; the network
// one is the issuer's JWKS, tests and the fuzz target give a fixed set.
type keySource interface {
	key(ctx context.Context, kid string, alg jose.SignatureAlgorithm) (jose.JSONWebKey, error)
}

// verifyJWT checks a compact JWS access token: its issuer must be trusted,
// its signature made with a key that issuer publishes, for an algorithm
// that key allows; then iss, aud, exp, nbf and iat.
func (v *Verifier) verifyJWT(ctx context.Context, token string, now time.Time) (ladder.Principal, time.Time, error) {
	tok, err := jwt.ParseSigned(token, signingAlgs)
	if err != nil {
		if alg := headerAlg(token); alg != "" && !slices.Contains(signingAlgs, jose.SignatureAlgorithm(alg)) {
			return ladder.Principal{}, time.Time{}, tokenInvalid("The access token is signed with algorithm %q, which this server does not accept; tokens must be signed with an asymmetric key (RS256, PS256, ES256, EdDSA and their kin).", clip(alg))
		}
		return ladder.Principal{}, time.Time{}, tokenInvalid("The access token is not a well-formed signed JWT.")
	}
	var unverified jwt.Claims
	if err := tok.UnsafeClaimsWithoutVerification(&unverified); err != nil {
		return ladder.Principal{}, time.Time{}, tokenInvalid("The access token's claims are not a JSON object of JWT claims.")
	}
	is := v.issuerByURL(unverified.Issuer)
	if is == nil {
		return ladder.Principal{}, time.Time{}, tokenInvalid("The access token's issuer %q is not one this server trusts.", clip(unverified.Issuer))
	}
	return is.checkJWT(ctx, tok, is.src, now)
}

// checkJWT verifies tok's signature with a key from keys and checks its
// claims for issuer is.
func (is *issuer) checkJWT(ctx context.Context, tok *jwt.JSONWebToken, keys keySource, now time.Time) (ladder.Principal, time.Time, error) {
	if len(tok.Headers) != 1 {
		return ladder.Principal{}, time.Time{}, tokenInvalid("The access token must carry exactly one signature.")
	}
	h := tok.Headers[0]
	alg := jose.SignatureAlgorithm(h.Algorithm)
	k, err := keys.key(ctx, h.KeyID, alg)
	if err != nil {
		return ladder.Principal{}, time.Time{}, err
	}
	var std jwt.Claims
	var all map[string]any
	if err := tok.Claims(k.Key, &std, &all); err != nil {
		return ladder.Principal{}, time.Time{}, tokenInvalid("The access token's signature does not verify with the issuer's key %q.", clip(h.KeyID))
	}
	if std.Expiry == nil {
		return ladder.Principal{}, time.Time{}, tokenInvalid("The access token has no exp claim; this server accepts only tokens that expire.")
	}
	err = std.ValidateWithLeeway(jwt.Expected{Issuer: is.cfg.URL, Time: now}, is.v.skew)
	switch {
	case errors.Is(err, jwt.ErrExpired):
		return ladder.Principal{}, time.Time{}, tokenInvalid("The access token expired at %s.", std.Expiry.Time().UTC().Format(time.RFC3339))
	case errors.Is(err, jwt.ErrNotValidYet):
		return ladder.Principal{}, time.Time{}, tokenInvalid("The access token is not valid before %s.", std.NotBefore.Time().UTC().Format(time.RFC3339))
	case errors.Is(err, jwt.ErrIssuedInTheFuture):
		return ladder.Principal{}, time.Time{}, tokenInvalid("The access token was issued in the future (iat %s).", std.IssuedAt.Time().UTC().Format(time.RFC3339))
	case errors.Is(err, jwt.ErrInvalidIssuer):
		return ladder.Principal{}, time.Time{}, tokenInvalid("The access token's issuer %q is not %q.", clip(std.Issuer), is.cfg.URL)
	case err != nil:
		return ladder.Principal{}, time.Time{}, tokenInvalid("The access token's claims are not valid: %v.", err)
	}
	if !slices.ContainsFunc(std.Audience, func(a string) bool { return slices.Contains(is.cfg.Audiences, a) }) {
		return ladder.Principal{}, time.Time{}, tokenInvalid("The access token's audience %s does not name this server (%s).", clipList(std.Audience), strings.Join(is.cfg.Audiences, " or "))
	}
	p, err := is.principal(is.tokenClaims(all), grantedScopes(all))
	if err != nil {
		return ladder.Principal{}, time.Time{}, err
	}
	return p, std.Expiry.Time(), nil
}

// key returns the issuer's key kid for alg, fetching the JWKS when it is
// not cached or lacks kid (at most once per MinRefresh). The fetch runs
// without the issuer's lock, so tokens whose keys are cached go on
// verifying while it waits on the network; lookups of a key the cache
// lacks wait for the fetch in progress rather than start another.
func (is *issuer) key(ctx context.Context, kid string, alg jose.SignatureAlgorithm) (jose.JSONWebKey, error) {
	_, jwksURI, err := is.discover(ctx)
	if err != nil {
		return jose.JSONWebKey{}, tokenInvalid("The access token's issuer %q cannot be reached to fetch its keys, so the token cannot be checked.", is.cfg.URL)
	}
	is.mu.Lock()
	defer is.mu.Unlock()
	for {
		if k, ok := pick(is.keys, kid, alg); ok {
			return k, nil
		}
		if is.fetching == nil {
			break
		}
		done := is.fetching
		is.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			is.mu.Lock()
			return jose.JSONWebKey{}, tokenInvalid("The keys of issuer %q were still being fetched when the request ended.", is.cfg.URL)
		}
		is.mu.Lock()
	}
	now := is.v.now()
	if is.fetchedAt.IsZero() || now.Sub(is.fetchedAt) >= is.v.minRefresh {
		is.fetchedAt = now
		done := make(chan struct{})
		is.fetching = done
		is.mu.Unlock()
		// Not the request's context: others wait on this fetch, and the
		// HTTP client's timeout bounds it.
		keys, ferr := is.fetchJWKS(context.WithoutCancel(ctx), jwksURI)
		is.mu.Lock()
		is.fetching = nil
		close(done)
		is.fetchErr = ferr
		if ferr == nil {
			is.keys = keys
		} else {
			is.v.log.WarnContext(ctx, "jwks fetch failed", "issuer", is.cfg.Name, "err", ferr)
		}
	}
	if k, ok := pick(is.keys, kid, alg); ok {
		return k, nil
	}
	if is.fetchErr != nil && len(is.keys) == 0 {
		return jose.JSONWebKey{}, tokenInvalid("The keys of issuer %q cannot be fetched, so the access token cannot be checked.", is.cfg.URL)
	}
	return jose.JSONWebKey{}, tokenInvalid("The access token's key id %q is not among issuer %q's published keys for %s.", clip(kid), is.cfg.URL, alg)
}

func (is *issuer) fetchJWKS(ctx context.Context, uri string) ([]jose.JSONWebKey, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, uri, nil)
	if err != nil {
		return nil, err
	}
	resp, err := is.v.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("jwks %s: status %d", uri, resp.StatusCode)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("jwks %s: %w", uri, err)
	}
	return set.Keys, nil
}

// pick finds the key for a token header: by kid (or, without a kid, the
// only key that fits), public, for signing, allowing alg, of the type alg
// needs. A key that names its own algorithm pins it.
func pick(keys []jose.JSONWebKey, kid string, alg jose.SignatureAlgorithm) (jose.JSONWebKey, bool) {
	var found []jose.JSONWebKey
	for _, k := range keys {
		if kid != "" && k.KeyID != kid {
			continue
		}
		if !k.IsPublic() || (k.Use != "" && k.Use != "sig") || (k.Algorithm != "" && k.Algorithm != string(alg)) || !keyFits(k.Key, alg) {
			continue
		}
		found = append(found, k)
	}
	if len(found) != 1 {
		return jose.JSONWebKey{}, false
	}
	return found[0], true
}

// keyFits reports whether key is of the type alg verifies with.
func keyFits(key any, alg jose.SignatureAlgorithm) bool {
	switch k := key.(type) {
	case *rsa.PublicKey:
		return strings.HasPrefix(string(alg), "RS") || strings.HasPrefix(string(alg), "PS")
	case *ecdsa.PublicKey:
		switch alg {
		case jose.ES256:
			return k.Curve == elliptic.P256()
		case jose.ES384:
			return k.Curve == elliptic.P384()
		case jose.ES512:
			return k.Curve == elliptic.P521()
		}
	case ed25519.PublicKey:
		return alg == jose.EdDSA
	}
	return false
}

// headerAlg reads the alg of a compact token's header without trusting
// it, to name a refused algorithm in the answer.
func headerAlg(token string) string {
	head, _, _ := strings.Cut(token, ".")
	data, err := base64.RawURLEncoding.DecodeString(head)
	if err != nil {
		return ""
	}
	var h struct {
		Alg string `json:"alg"`
	}
	if json.Unmarshal(data, &h) != nil {
		return ""
	}
	return h.Alg
}

// clip shortens a value from a token before it is quoted in an answer.
func clip(s string) string {
	if len(s) > 100 {
		return s[:100] + "…"
	}
	return s
}

func clipList(ss []string) string {
	if len(ss) == 0 {
		return "(none)"
	}
	out := make([]string, 0, min(len(ss), 5))
	for _, s := range ss[:min(len(ss), 5)] {
		out = append(out, fmt.Sprintf("%q", clip(s)))
	}
	return strings.Join(out, ", ")
}

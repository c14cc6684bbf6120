package oauth

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/ladderhq/ladder"
)

// introspect asks the issuer's RFC 7662 endpoint about an opaque token. An
// active answer must name this issuer (when it names one), this server's
// audience and an expiry; it is reused for at most
// DefaultIntrospectionCache, so a revoked token stops working soon.
func (is *issuer) introspect(ctx context.Context, token string, now time.Time) (ladder.Principal, time.Time, error) {
	in := is.cfg.Introspection
	form := url.Values{"token": {token}, "token_type_hint": {"access_token"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, in.URL, strings.NewReader(form.Encode()))
	if err != nil {
		return ladder.Principal{}, time.Time{}, fmt.Errorf("introspect: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if in.ClientID != "" {
		req.SetBasicAuth(url.QueryEscape(in.ClientID), url.QueryEscape(is.v.getenv(in.ClientSecretEnv)))
	}
	resp, err := is.v.client.Do(req)
	if err != nil {
		is.v.log.WarnContext(ctx, "introspection failed", "issuer", is.cfg.Name, "err", err)
		return ladder.Principal{}, time.Time{}, tokenInvalid("The introspection endpoint of issuer %q cannot be reached, so the access token cannot be checked.", is.cfg.URL)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil || resp.StatusCode != http.StatusOK {
		is.v.log.WarnContext(ctx, "introspection failed", "issuer", is.cfg.Name, "status", resp.StatusCode, "err", err)
		return ladder.Principal{}, time.Time{}, tokenInvalid("The introspection endpoint of issuer %q did not answer, so the access token cannot be checked.", is.cfg.URL)
	}
	var all map[string]any
	if err := json.Unmarshal(data, &all); err != nil {
		return ladder.Principal{}, time.Time{}, tokenInvalid("The introspection endpoint of issuer %q answered something other than JSON.", is.cfg.URL)
	}
	if active, _ := all["active"].(bool); !active {
		return ladder.Principal{}, time.Time{}, tokenInvalid("The issuer %q says the access token is not active (expired, revoked or unknown).", is.cfg.URL)
	}
	if iss, ok := all["iss"].(string); ok && iss != is.cfg.URL {
		return ladder.Principal{}, time.Time{}, tokenInvalid("The access token's issuer %q is not %q.", clip(iss), is.cfg.URL)
	}
	aud := stringList(all["aud"])
	if !slices.ContainsFunc(aud, func(a string) bool { return slices.Contains(is.cfg.Audiences, a) }) {
		return ladder.Principal{}, time.Time{}, tokenInvalid("The access token's audience %s does not name this server (%s).", clipList(aud), strings.Join(is.cfg.Audiences, " or "))
	}
	expf, ok := all["exp"].(float64)
	if !ok {
		return ladder.Principal{}, time.Time{}, tokenInvalid("The introspected access token has no expiry; this server accepts only tokens that expire.")
	}
	exp := time.Unix(int64(expf), 0)
	if !now.Before(exp.Add(is.v.skew)) {
		return ladder.Principal{}, time.Time{}, tokenInvalid("The access token expired at %s.", exp.UTC().Format(time.RFC3339))
	}
	if nbf, ok := all["nbf"].(float64); ok && now.Add(is.v.skew).Before(time.Unix(int64(nbf), 0)) {
		return ladder.Principal{}, time.Time{}, tokenInvalid("The access token is not valid before %s.", time.Unix(int64(nbf), 0).UTC().Format(time.RFC3339))
	}
	p, err := is.principal(is.tokenClaims(all), grantedScopes(all))
	if err != nil {
		return ladder.Principal{}, time.Time{}, err
	}
	until := now.Add(DefaultIntrospectionCache)
	if exp.Before(until) {
		until = exp
	}
	return p, until, nil
}

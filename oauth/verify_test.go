package oauth_test

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/google/go-cmp/cmp"

	"github.com/ladderhq/ladder/oauth"
)

// TestBadTokens sends tokens that must be refused to the REST API and to
// /mcp: each answers with the right status, the refusal name and a
// WWW-Authenticate challenge that points at the metadata and says what was
// wrong, and nothing is routed.
func TestBadTokens(t *testing.T) {
	f := newFakeIssuer(t)
	other := newFakeIssuer(t)
	l, base := listen(t)
	e := startLadder(t, l, base, fmtIdentity(f.URL, "      scopes: [ladder]\n"), oauth.Options{})
	aud := []string{base}
	ok := claims{"sub": "bills-bot", "client_id": "bills-bot", "aud": aud, "scope": "ladder"}
	with := func(k string, v any) claims {
		c := claims{}
		for n, x := range ok {
			c[n] = x
		}
		c[k] = v
		return c
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&f.key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	hs256 := func(secret []byte) string {
		s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: secret}, (&jose.SignerOptions{}).WithHeader("kid", f.kid))
		if err != nil {
			t.Fatal(err)
		}
		c := with("exp", time.Now().Add(time.Hour).Unix())
		c["iss"] = f.URL
		tok, err := jwt.Signed(s).Claims(map[string]any(c)).Serialize()
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	// alg none: a header and claims with an empty signature.
	none := func() string {
		enc := base64.RawURLEncoding.EncodeToString
		return enc([]byte(`{"alg":"none","kid":"k1"}`)) + "." + enc(fmt.Appendf(nil, `{"iss":%q,"sub":"bills-bot","client_id":"bills-bot","aud":[%q],"exp":%d,"scope":"ladder"}`, f.URL, base, time.Now().Add(time.Hour).Unix())) + "."
	}

	invalidToken := func(desc string) string {
		return `Bearer realm="ladder", resource_metadata="` + base + `/.well-known/oauth-protected-resource%s", error="invalid_token", error_description="` + desc + `"`
	}
	tests := []struct {
		name      string
		token     string
		status    int
		code      string
		challenge string // with %s for the path form
	}{
		{"expired", f.sign(t, f.kid, with("exp", time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).Unix())), 401, "KEY_INVALID",
			invalidToken("The access token expired at 2000-01-01T00:00:00Z.")},
		{"not yet valid", f.sign(t, f.kid, with("nbf", time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC).Unix())), 401, "KEY_INVALID",
			invalidToken("The access token is not valid before 2100-01-01T00:00:00Z.")},
		{"wrong audience", f.sign(t, f.kid, with("aud", []string{"https://other.example.com"})), 401, "KEY_INVALID",
			invalidToken(`The access token's audience 'https://other.example.com' does not name this server (` + base + ` or ` + base + `/mcp).`)},
		{"no audience", f.sign(t, f.kid, with("aud", omit)), 401, "KEY_INVALID",
			invalidToken(`The access token's audience (none) does not name this server (` + base + ` or ` + base + `/mcp).`)},
		{"wrong issuer", other.sign(t, other.kid, with("iss", other.URL)), 401, "KEY_INVALID",
			invalidToken(`The access token's issuer '` + other.URL + `' is not one this server trusts.`)},
		{"trusted iss, foreign key", other.sign(t, f.kid, with("iss", f.URL)), 401, "KEY_INVALID",
			invalidToken(`The access token's signature does not verify with the issuer's key 'k1'.`)},
		{"unknown kid", f.sign(t, "k9", ok), 401, "KEY_INVALID",
			invalidToken(`The access token's key id 'k9' is not among issuer '` + f.URL + `''s published keys for RS256.`)},
		{"alg none", none(), 401, "KEY_INVALID",
			invalidToken(`The access token is signed with algorithm 'none', which this server does not accept; tokens must be signed with an asymmetric key (RS256, PS256, ES256, EdDSA and their kin).`)},
		{"HS256 with the public key", hs256(pubPEM), 401, "KEY_INVALID",
			invalidToken(`The access token is signed with algorithm 'HS256', which this server does not accept; tokens must be signed with an asymmetric key (RS256, PS256, ES256, EdDSA and their kin).`)},
		{"no exp", f.sign(t, f.kid, with("exp", omit)), 401, "KEY_INVALID",
			invalidToken(`The access token has no exp claim; this server accepts only tokens that expire.`)},
		{"not a JWT", "opaque-token-value", 401, "KEY_INVALID",
			invalidToken(`The bearer token is neither a ladder key nor a JWT access token.`)},
		{"unmapped client", f.sign(t, f.kid, with("client_id", "stranger")), 403, "TOKEN_UNMAPPED", ""},
		{"missing scope", f.sign(t, f.kid, with("scope", "openid")), 403, "SCOPE_MISSING",
			`Bearer realm="ladder", resource_metadata="` + base + `/.well-known/oauth-protected-resource%s", error="insufficient_scope", error_description="The access token lacks the scope ladder that issuer 'test''s tokens need here.", scope="ladder"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.Do("POST", "/v1/route", tt.token, map[string]any{"step": "post_tms", "item": "bill-1"})
			if r.Status != tt.status || r.ErrorCode() != tt.code {
				t.Errorf("REST: %d %s, want %d %s: %s", r.Status, r.ErrorCode(), tt.status, tt.code, r.Raw)
			}
			want := ""
			if tt.challenge != "" {
				want = fmt.Sprintf(tt.challenge, "")
			}
			if diff := cmp.Diff(want, r.Header.Get("WWW-Authenticate")); diff != "" {
				t.Errorf("REST WWW-Authenticate (-want +got):\n%s", diff)
			}
			m := e.Do("POST", "/mcp", tt.token, map[string]any{"jsonrpc": "2.0", "id": 7, "method": "tools/list"})
			if m.Status != tt.status {
				t.Errorf("MCP: status %d, want %d: %s", m.Status, tt.status, m.Raw)
			}
			if tt.challenge != "" {
				want = fmt.Sprintf(tt.challenge, "/mcp")
			}
			if diff := cmp.Diff(want, m.Header.Get("WWW-Authenticate")); diff != "" {
				t.Errorf("MCP WWW-Authenticate (-want +got):\n%s", diff)
			}
			rpcErr, _ := m.Body["error"].(map[string]any)
			if rpcErr["message"] != tt.code {
				t.Errorf("MCP error %v, want message %s", rpcErr, tt.code)
			}
		})
	}
	t.Run("unmapped hint names the mapping", func(t *testing.T) {
		r := e.Do("POST", "/v1/route", f.sign(t, f.kid, with("client_id", "stranger")), map[string]any{"step": "post_tms", "item": "bill-1"})
		want := `ask an admin to add a rule under identity.issuers (test) mapping client_id "stranger" or subject "bills-bot" to a workspace and kind; nothing was done`
		if diff := cmp.Diff(want, r.ErrorHint()); diff != "" {
			t.Errorf("hint (-want +got):\n%s", diff)
		}
	})
	// Nothing was routed: the audit log holds no route.
	r := e.Do("GET", "/v1/audit?kind=route", e.Keys["vantrow-bills/admin"], nil)
	if recs, _ := r.Body["records"].([]any); r.Status != 200 || len(recs) != 0 {
		t.Errorf("audit routes after refusals: %d %s", r.Status, r.Raw)
	}
}

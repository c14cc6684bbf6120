package bench

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// BenchmarkRouteItemKeyVsJWT answers route_item through ladder's whole
// handler (as BenchmarkLadderRouteItem) in one run twice: the agent
// authenticated by a ladder key, and by a JWT access token from a trusted
// issuer. The issuer is a locally generated RSA key served as discovery
// and a JWKS by an httptest server, for this benchmark only (the tests of
// behaviour use Ory Hydra, oauth/hydra_test.go). Every request sends the
// same token, as an agent does until it expires: the first is verified
// (discovery, JWKS, signature), the rest come from the verified-token
// cache, so the hot path does no network and no signature check; the
// benchmark fails if the issuer is asked more than once.
func BenchmarkRouteItemKeyVsJWT(b *testing.B) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		b.Fatal(err)
	}
	var fetches atomic.Int64
	var issuer string
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": issuer, "jwks_uri": issuer + "/jwks", "authorization_endpoint": issuer + "/auth",
			"token_endpoint": issuer + "/token", "response_types_supported": []string{"code"}, "subject_types_supported": []string{"public"},
			"id_token_signing_alg_values_supported": []string{"RS256"}})
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}}})
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	issuer = srv.URL
	identity := fmt.Sprintf(`identity:
  issuers:
    - name: bench
      issuer: %s
      rules:
        - {client_id: bench-agent, workspace: vantrow-bills, kind: agent}
`, issuer)
	h, ladderKey := ladderHandlerWith(b, "vantrow-bills", nil, identity)
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key}, (&jose.SignerOptions{}).WithType("at+jwt").WithHeader("kid", "k1"))
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	token, err := jwt.Signed(signer).Claims(map[string]any{"iss": issuer, "sub": "bench-agent", "client_id": "bench-agent", "aud": "http://127.0.0.1/mcp",
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}).Serialize()
	if err != nil {
		b.Fatal(err)
	}
	for _, bb := range []struct{ name, auth string }{{"key", "Bearer " + ladderKey}, {"jwt", "Bearer " + token}} {
		b.Run(bb.name, func(b *testing.B) {
			// The first request outside the timer: the token's one
			// verification (and discovery and the JWKS for it).
			req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", strings.NewReader(callBody("route_item", 0)))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Authorization", bb.auth)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"result":`) {
				b.Fatalf("warm-up: %d %s", rec.Code, rec.Body.String())
			}
			benchHandler(b, h, "route_item", bb.auth)
		})
	}
	if n := fetches.Load(); n != 2 {
		b.Errorf("the issuer was asked %d times (discovery and JWKS once each make 2): the hot path went to the network", n)
	}
}

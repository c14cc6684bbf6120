package oauth_test

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/ladderhq/ladder/config"
	"github.com/ladderhq/ladder/internal/testenv"
	"github.com/ladderhq/ladder/oauth"
)

// fakeIssuer is an OpenID provider's discovery document and JWKS served
// on loopback, with the private key, so tests can sign tokens a real
// provider would never issue (expired, foreign audience, unknown key).
// The flows that must work use a real provider (hydra_test.go).
type fakeIssuer struct {
	URL       string
	key       *rsa.PrivateKey
	kid       string
	jwksFetch atomic.Int64
	srv       *httptest.Server
	// jwksGate, when set, holds JWKS answers until it is closed;
	// jwksAbandoned records a fetch whose client gave up first.
	jwksGate      atomic.Pointer[chan struct{}]
	jwksAbandoned atomic.Bool
}

// closeServer stops serving discovery and keys: the issuer is down.
func (f *fakeIssuer) closeServer() { f.srv.Close() }

func newFakeIssuer(t *testing.T) *fakeIssuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeIssuer{key: key, kid: "k1"}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer": f.URL, "jwks_uri": f.URL + "/jwks",
			"authorization_endpoint": f.URL + "/auth", "token_endpoint": f.URL + "/token",
			"response_types_supported": []string{"code"}, "subject_types_supported": []string{"public"},
			"id_token_signing_alg_values_supported": []string{"RS256"},
		})
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, r *http.Request) {
		f.jwksFetch.Add(1)
		if gate := f.jwksGate.Load(); gate != nil {
			select {
			case <-*gate:
			case <-r.Context().Done():
				f.jwksAbandoned.Store(true)
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &f.key.PublicKey, KeyID: f.kid, Algorithm: "RS256", Use: "sig"}}})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	f.URL, f.srv = srv.URL, srv
	return f
}

// claims are a token's claims; sign fills iss, exp and iat unless set.
type claims map[string]any

// omit, as a claim's value, leaves the claim out of the signed token.
type omitted struct{}

var omit = omitted{}

// sign signs c with the issuer's key as RS256 with key id kid.
func (f *fakeIssuer) sign(t *testing.T, kid string, c claims) string {
	t.Helper()
	now := time.Now()
	for n, def := range map[string]any{"iss": f.URL, "exp": now.Add(time.Hour).Unix(), "iat": now.Unix()} {
		if _, ok := c[n]; !ok {
			c[n] = def
		}
	}
	for n, v := range c {
		if v == omit {
			delete(c, n)
		}
	}
	opts := (&jose.SignerOptions{}).WithType("at+jwt").WithHeader("kid", kid)
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: f.key}, opts)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(map[string]any(c)).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// listen binds a loopback port for a ladder server, so its URL can be put
// in its config before it starts.
func listen(t *testing.T) (net.Listener, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return l, "http://" + l.Addr().String()
}

// demoWithIdentity is the demo config served at base, with an identity
// section appended.
func demoWithIdentity(base, identity string) string {
	demo := string(config.Demo())
	demo = strings.Replace(demo, "server:\n", "server:\n  public_url: "+base+"\n", 1)
	return demo + "\n" + identity
}

// startLadder starts ladder on the demo config at l with the identity
// section.
func startLadder(t *testing.T, l net.Listener, base, identity string, o oauth.Options) *testenv.Env {
	t.Helper()
	return testenv.StartWith(t, demoWithIdentity(base, identity), testenv.Options{Listener: l, OAuth: o})
}

func fmtIdentity(issuerURL string, extra string) string {
	return fmt.Sprintf(`identity:
  issuers:
    - name: test
      issuer: %s
%s      rules:
        - {client_id: bills-bot, workspace: vantrow-bills, kind: agent}
        - {subject: alice, workspace: vantrow-bills, kind: human}
        - {group: bill-admins, workspace: vantrow-bills, kind: admin}
`, issuerURL, extra)
}

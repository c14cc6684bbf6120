package oauth

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/ladderhq/ladder"
)

// staticKeys is a fixed key set: the fuzz target does no network.
type staticKeys []jose.JSONWebKey

func (s staticKeys) key(_ context.Context, kid string, alg jose.SignatureAlgorithm) (jose.JSONWebKey, error) {
	if k, ok := pick(s, kid, alg); ok {
		return k, nil
	}
	return jose.JSONWebKey{}, tokenInvalid("The access token's key id %q is not among the issuer's published keys for %s.", kid, alg)
}

// FuzzVerifyToken feeds token parsing and verification arbitrary bearer
// tokens: it must never panic, and whatever it accepts must be a token
// the issuer signed, mapped to a workspace and kind.
func FuzzVerifyToken(f *testing.F) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		f.Fatal(err)
	}
	const iss = "https://issuer.example"
	id := ladder.Identity{Resource: "https://ladder.example", Issuers: []ladder.Issuer{{
		Name: "fz", URL: iss, Audiences: []string{"https://ladder.example"},
		Rules: []ladder.IdentityRule{{ClientID: "bot", Workspace: "ws", Kind: ladder.KeyAgent}, {Group: "g", Workspace: "ws", Kind: ladder.KeyHuman}},
	}}}
	v := New(Options{Identity: id})
	v.issuers[0].src = staticKeys{{Key: &key.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key}, (&jose.SignerOptions{}).WithHeader("kid", "k1"))
	if err != nil {
		f.Fatal(err)
	}
	exp := time.Now().Add(24 * time.Hour).Unix()
	for _, c := range []map[string]any{
		{"iss": iss, "sub": "bot", "client_id": "bot", "aud": "https://ladder.example", "exp": exp},
		{"iss": iss, "sub": "x", "azp": "y", "aud": []string{"https://ladder.example"}, "exp": exp, "groups": []string{"g"}},
		{"iss": iss, "sub": "bot", "client_id": "bot", "aud": "https://ladder.example", "exp": 1},
		{"iss": iss, "sub": "bot", "client_id": "bot", "aud": "https://ladder.example", "exp": exp, "nbf": exp},
	} {
		tok, err := jwt.Signed(signer).Claims(c).Serialize()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(tok)
	}
	f.Add("eyJhbGciOiJub25lIn0.eyJpc3MiOiJodHRwczovL2lzc3Vlci5leGFtcGxlIn0.")
	f.Add("a.b.c")
	f.Add("..")
	f.Add("opaque")
	f.Fuzz(func(t *testing.T, token string) {
		p, err := v.VerifyToken(context.Background(), token)
		if err != nil {
			if ladder.AsError(err).Message == "" {
				t.Fatalf("refusal without a message: %v", err)
			}
			return
		}
		if p.Workspace != "ws" || !p.Kind.Valid() || p.Subject == "" || !ladder.IsTokenActor(p.KeyID) {
			t.Fatalf("accepted token gave principal %+v", p)
		}
		// Accepted means the signature verified: re-check it independently.
		tok, err := jwt.ParseSigned(token, signingAlgs)
		if err != nil {
			t.Fatalf("accepted a token go-jose cannot parse: %v", err)
		}
		var c jwt.Claims
		if err := tok.Claims(&key.PublicKey, &c); err != nil {
			t.Fatalf("accepted a token whose signature does not verify: %v", err)
		}
	})
}

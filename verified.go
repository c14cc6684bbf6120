package ladder

import "context"

// verifiedKeyCtx is the context key of a bearer token verified earlier in
// the same request.
type verifiedKeyCtx struct{}

type verifiedKey struct {
	token  string
	p      Principal
	hinted bool
}

// WithVerifiedKey returns ctx noting that this request's bearer token was
// verified, just now, as p: the front door authenticates every request
// before reading its body, and a handler behind it (the MCP surface) uses
// the answer instead of reading the key from the store a second time in
// the same request. hinted says the key came from a cache of verified
// keys, not the store (see KeyCheck): the handler must run its writes
// under RequireActiveKey and confirm the key before any other answer.
func WithVerifiedKey(ctx context.Context, token string, p Principal, hinted bool) context.Context {
	return context.WithValue(ctx, verifiedKeyCtx{}, verifiedKey{token: token, p: p, hinted: hinted})
}

// VerifiedKey returns the principal token was verified as earlier in this
// request, and whether from a cache (hinted), if it was: a different token
// (or none noted) reports false, and the caller authenticates it itself.
func VerifiedKey(ctx context.Context, token string) (p Principal, hinted, ok bool) {
	v, found := ctx.Value(verifiedKeyCtx{}).(verifiedKey)
	if !found || token == "" || v.token != token {
		return Principal{}, false, false
	}
	return v.p, v.hinted, true
}

package ladder

import "context"

// verifiedKeyCtx is the context key of a bearer token verified earlier in
// the same request.
type verifiedKeyCtx struct{}

type verifiedKey struct {
	token string
	p     Principal
}

// WithVerifiedKey returns ctx noting that this request's bearer token was
// verified, just now, as p: the front door authenticates every request
// before reading its body, and a handler behind it (the MCP surface) uses
// the answer instead of reading the key from the store a second time in
// the same request.
func WithVerifiedKey(ctx context.Context, token string, p Principal) context.Context {
	return context.WithValue(ctx, verifiedKeyCtx{}, verifiedKey{token: token, p: p})
}

// VerifiedKey returns the principal token was verified as earlier in this
// request, if it was: a different token (or none noted) reports false, and
// the caller authenticates it itself.
func VerifiedKey(ctx context.Context, token string) (Principal, bool) {
	v, ok := ctx.Value(verifiedKeyCtx{}).(verifiedKey)
	if !ok || token == "" || v.token != token {
		return Principal{}, false
	}
	return v.p, true
}

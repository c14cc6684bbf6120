package service

import (
	"context"
	"errors"

	"github.com/ladderhq/ladder"
)

// keyView holds the keys this process last read, so the hot MCP calls are
// authenticated without a read of the store. It is only a hint: a request
// authenticated from it (AuthenticateHint) runs its writes under
// ladder.RequireActiveKey, so the store commits nothing in the key's name
// unless the key is active at the commit, and a request that committed
// nothing confirms the key from the store before it answers (ConfirmKey).
// Entries are filled by reads of the store and dropped when this process
// revokes a key, when a confirmation finds it inactive (every commit that
// refuses a key is followed by one), and when the store says a key
// changed (KeyChanged), so a revocation by another replica or process is
// seen before long either way. Only keys
// that verified are kept, so the view holds at most the stored keys.
type keyView = hintView[string, ladder.Key]

func newKeyView() *keyView {
	return newHintView(func(k ladder.Key) string { return k.ID }, nil)
}

// KeyChanged tells the service that a key was created, revoked or changed
// in the store, by this replica or another (the store's change
// notifications): its view of the key is dropped. "" drops every key
// (changes may have been missed). Nothing depends on it for correctness —
// the store checks the key at every commit of a request authenticated
// from the view, and confirms it before any other answer — but without it
// a revoked key's requests are refused only at that check.
func (s *Service) KeyChanged(id string) { s.keys.drop(id) }

// AuthenticateHint is Authenticate for a request whose every write runs
// under ladder.RequireActiveKey and which calls ConfirmKey before it
// answers unless one of those writes committed: a ladder key is taken from
// the view of verified keys when it is there (hinted true), else read from
// the store as Authenticate does and kept. Secrets, kinds and workspaces
// never change; revocation and expiry are what the store re-checks.
func (s *Service) AuthenticateHint(ctx context.Context, token string) (p ladder.Principal, hinted bool, err error) {
	id, hash, perr := ladder.ParseKeyToken(token)
	if perr != nil {
		p, err = s.Authenticate(ctx, token)
		return p, false, err
	}
	k, ok, gen := s.keys.get(id)
	if !ok {
		p, err = s.authenticateKey(ctx, id, hash, func(k ladder.Key) { s.keys.fill(k, gen) })
		return p, false, err
	}
	if !k.SecretMatches(hash) || !k.Active(s.now()) {
		// Answered by the store, which logs why.
		p, err = s.Authenticate(ctx, token)
		return p, false, err
	}
	return principalOf(k), true, nil
}

// ConfirmKey reads p's key from the store and refuses with KEY_INVALID
// unless it is still active: the confirmation a request authenticated by
// AuthenticateHint needs before it answers when none of its writes
// committed under the key's check.
func (s *Service) ConfirmKey(ctx context.Context, p ladder.Principal) error {
	k, err := s.store.GetKey(ctx, p.KeyID)
	if errors.Is(err, ladder.ErrNotFound) || (err == nil && !k.Active(s.now())) {
		s.keys.drop(p.KeyID)
		s.log.InfoContext(ctx, "key refused", "reason", "revoked or expired since it was verified", "key_id", p.KeyID)
		return errKeyInvalid()
	}
	if err != nil {
		return storeErr("get key", err)
	}
	return nil
}

package service

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/ladderhq/ladder"
)

// Authenticate resolves a bearer token to its principal: a ladder key, or
// with Options.Tokens set any other token through it. A missing token is
// KEY_MISSING; a malformed, unknown, revoked or expired one is KEY_INVALID
// (the same answer for each, so a caller learns nothing), while the log says
// which — by key id, never the secret.
func (s *Service) Authenticate(ctx context.Context, token string) (ladder.Principal, error) {
	if token == "" {
		return ladder.Principal{}, &ladder.Error{Code: ladder.CodeKeyMissing, Message: "No key was sent.", Hint: "send the header Authorization: Bearer ldr_<id>_<secret> with a key of this workspace"}
	}
	if s.tokens != nil && !strings.HasPrefix(token, "ldr_") {
		// Not a key: an OAuth access token, verified against its issuer.
		p, err := s.tokens.VerifyToken(ctx, token)
		if err != nil {
			s.log.InfoContext(ctx, "token refused", "code", ladder.ErrorCode(err), "reason", ladder.AsError(err).Message)
		}
		return p, err
	}
	id, hash, err := ladder.ParseKeyToken(token)
	if err != nil {
		s.log.InfoContext(ctx, "key refused", "reason", "malformed")
		return ladder.Principal{}, errKeyInvalid()
	}
	return s.authenticateKey(ctx, id, hash, nil)
}

// errKeyInvalid is the one answer to a key that is malformed, unknown,
// revoked or expired.
func errKeyInvalid() *ladder.Error {
	return &ladder.Error{Code: ladder.CodeKeyInvalid, Message: "The key is not valid.", Hint: "check the key; it may be revoked or expired — ask an admin for a new one ({{keys_create}})"}
}

// authenticateKey reads key id from the store and checks the presented
// secret's hash, revocation and expiry; verified, when set, is given the
// stored key of a principal it returns.
func (s *Service) authenticateKey(ctx context.Context, id string, hash []byte, verified func(ladder.Key)) (ladder.Principal, error) {
	k, err := s.store.GetKey(ctx, id)
	if errors.Is(err, ladder.ErrNotFound) {
		s.log.InfoContext(ctx, "key refused", "reason", "unknown", "key_id", id)
		return ladder.Principal{}, errKeyInvalid()
	}
	if err != nil {
		return ladder.Principal{}, storeErr("get key", err)
	}
	if !k.SecretMatches(hash) {
		s.log.InfoContext(ctx, "key refused", "reason", "secret mismatch", "key_id", id)
		return ladder.Principal{}, errKeyInvalid()
	}
	if k.RevokedAt != nil {
		s.log.InfoContext(ctx, "key refused", "reason", "revoked", "key_id", id)
		return ladder.Principal{}, errKeyInvalid()
	}
	if !k.Active(s.now()) {
		s.log.InfoContext(ctx, "key refused", "reason", "expired", "key_id", id)
		return ladder.Principal{}, errKeyInvalid()
	}
	if verified != nil {
		verified(k)
	}
	return principalOf(k), nil
}

// principalOf is the principal of a verified key.
func principalOf(k ladder.Key) ladder.Principal {
	return ladder.Principal{KeyID: k.ID, Workspace: k.Workspace, Kind: k.Kind}
}

// CreateKey creates a key and returns it with its token, which is shown
// once and never stored. actor is the key id of whoever asked ("cli" for a
// local command).
func (s *Service) CreateKey(ctx context.Context, actor string, req ladder.KeyRequest) (ladder.Key, string, error) {
	if !req.Kind.Valid() {
		return ladder.Key{}, "", ladder.Errorf(ladder.CodeInvalidArgument, "use kind agent, human or admin", "The kind %q is not a key kind.", req.Kind)
	}
	if req.Workspace == AllWorkspaces {
		if req.Kind != ladder.KeyAdmin {
			return ladder.Key{}, "", ladder.Errorf(ladder.CodeInvalidArgument, "name one workspace for agent and human keys", "Only an admin key may span every workspace (%q).", AllWorkspaces)
		}
	} else if _, ok := s.workspaces[req.Workspace]; !ok {
		return ladder.Key{}, "", ladder.Errorf(ladder.CodeInvalidArgument, "use one of: "+strings.Join(s.order, ", "), "The workspace %q is not in the config.", req.Workspace)
	}
	if req.ExpiresIn < 0 {
		return ladder.Key{}, "", ladder.Errorf(ladder.CodeInvalidArgument, "give a positive duration such as 720h", "The expiry %s is in the past.", req.ExpiresIn)
	}
	id, token, hash := ladder.NewKeyToken()
	now := ladder.NormTime(s.now())
	k := ladder.Key{ID: id, Workspace: req.Workspace, Kind: req.Kind, Name: req.Name, SecretHash: hash, CreatedAt: now}
	if req.ExpiresIn > 0 {
		exp := now.Add(req.ExpiresIn)
		k.ExpiresAt = &exp
	}
	entry, err := ladder.NewAuditEntry(req.Workspace, actor, ladder.AuditKeyCreate, id, now, map[string]any{"key_id": id, "kind": req.Kind, "name": req.Name, "workspace": req.Workspace, "expires_at": k.ExpiresAt})
	if err != nil {
		return ladder.Key{}, "", err
	}
	if err := s.store.CreateKey(ctx, k, entry); err != nil {
		return ladder.Key{}, "", storeErr("create key", err)
	}
	return k, token, nil
}

// ListKeys lists the keys of a workspace; "" or "*" lists every key.
func (s *Service) ListKeys(ctx context.Context, workspace string) ([]ladder.Key, error) {
	if workspace == AllWorkspaces {
		workspace = ""
	}
	keys, err := s.store.ListKeys(ctx, workspace)
	return keys, storeErr("list keys", err)
}

// ListKeysPage lists the keys of a workspace ("" or "*" for every key),
// oldest first, a page at a time: limit 1–500 (0: 50), and cursor the
// previous page's next_cursor.
func (s *Service) ListKeysPage(ctx context.Context, workspace, cursor string, limit int) (ladder.KeyPage, error) {
	switch {
	case limit == 0:
		limit = ladder.DefaultPageLimit
	case limit < 0 || limit > 500:
		return ladder.KeyPage{}, argError("limit", fmt.Sprintf("%d is out of range", limit), "use 1 to 500 (default 50)")
	}
	start := 0
	if cursor != "" {
		n, err := keyCursor.decode(cursor)
		if err != nil {
			return ladder.KeyPage{}, err
		}
		start = int(n)
	}
	keys, err := s.ListKeys(ctx, workspace)
	if err != nil {
		return ladder.KeyPage{}, err
	}
	page := ladder.KeyPage{Keys: []ladder.Key{}}
	if start < len(keys) {
		end := min(start+limit, len(keys))
		page.Keys = keys[start:end]
		if end < len(keys) {
			page.NextCursor = keyCursor.encode(int64(end))
		}
	}
	return page, nil
}

// RevokeKey revokes a key. scope limits which workspace's keys the actor may
// revoke ("*" for any); a key outside it is reported as not found.
func (s *Service) RevokeKey(ctx context.Context, actor, scope, id string) (ladder.Key, error) {
	k, err := s.store.GetKey(ctx, id)
	if errors.Is(err, ladder.ErrNotFound) || (err == nil && scope != AllWorkspaces && k.Workspace != scope) {
		return ladder.Key{}, ladder.Errorf(ladder.CodeNotFound, "list keys with {{keys_list}} and use an id from it", "No key %q.", id)
	}
	if err != nil {
		return ladder.Key{}, storeErr("get key", err)
	}
	now := ladder.NormTime(s.now())
	entry, err := ladder.NewAuditEntry(k.Workspace, actor, ladder.AuditKeyRevoke, id, now, map[string]any{"key_id": id})
	if err != nil {
		return ladder.Key{}, err
	}
	err = s.store.RevokeKey(ctx, id, now, entry)
	// Dropped whatever the answer: a failed commit may have committed.
	s.keys.drop(id)
	if err != nil {
		return ladder.Key{}, storeErr("revoke key", err)
	}
	k.RevokedAt = &now
	return k, nil
}

// Bootstrap makes sure an admin key exists: on an empty key table it creates
// an all-workspaces admin key — from adminToken when given (LADDER_ADMIN_KEY),
// otherwise a fresh one — and returns its token so the caller can print it
// once. It returns "" when keys exist already.
func (s *Service) Bootstrap(ctx context.Context, adminToken string) (string, error) {
	n, err := s.store.CountKeys(ctx)
	if err != nil {
		return "", fmt.Errorf("count keys: %w", err)
	}
	if n > 0 {
		return "", nil
	}
	now := ladder.NormTime(s.now())
	var k ladder.Key
	token := adminToken
	if token != "" {
		id, hash, err := ladder.ParseKeyToken(token)
		if err != nil {
			return "", fmt.Errorf("LADDER_ADMIN_KEY: %w", err)
		}
		k = ladder.Key{ID: id, Workspace: AllWorkspaces, Kind: ladder.KeyAdmin, Name: "bootstrap admin", SecretHash: hash, CreatedAt: now}
	} else {
		id, tok, hash := ladder.NewKeyToken()
		token = tok
		k = ladder.Key{ID: id, Workspace: AllWorkspaces, Kind: ladder.KeyAdmin, Name: "bootstrap admin", SecretHash: hash, CreatedAt: now}
	}
	entry, err := ladder.NewAuditEntry(AllWorkspaces, "system", ladder.AuditKeyCreate, k.ID, now, map[string]any{"key_id": k.ID, "kind": k.Kind, "name": k.Name, "workspace": k.Workspace})
	if err != nil {
		return "", err
	}
	if err := s.store.CreateKey(ctx, k, entry); err != nil {
		if adminToken != "" && errors.Is(err, ladder.ErrConflict) {
			// Another replica starting at the same moment stored the same
			// bootstrap key first.
			return "", nil
		}
		return "", fmt.Errorf("create admin key: %w", err)
	}
	return token, nil
}

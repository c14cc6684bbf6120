package service

import (
	"context"
	"encoding/hex"
	"errors"
	"time"

	"github.com/ladderhq/ladder"
)

// Console sessions live in the store (ladder.SessionStore), not in the
// cookie: the cookie carries a random id, and every console request looks
// the id up, so signing out, revoking the key and expiry end a session on
// every replica at once.

// errSessionEnded is the answer for a session id that is unknown, revoked
// or expired, or whose key can no longer sign in: the same for each, so a
// caller learns nothing.
var errSessionEnded = &ladder.Error{Code: ladder.CodeKeyInvalid, Message: "The console session has ended.",
	Hint: "sign in again with your human key; a session ends at sign-out, when its key is revoked or expires, and after its time"}

// sessionIDLen is the length of a session id from ladder.NewSessionID.
const sessionIDLen = 43

// sessionTag names a session in the audit log without its id: a prefix of
// the id's hash, so a sign-in and its sign-out can be paired.
func sessionTag(idHash []byte) string { return hex.EncodeToString(idHash[:6]) }

// StartSession signs a person in to the console: p must be an active human
// key. It stores a new session with a fresh random id (never one the
// browser brought, so a planted id is never signed in) lasting ttl, capped
// by the key's expiry, with its audit record, and returns the id, which
// only the person's cookie holds.
func (s *Service) StartSession(ctx context.Context, p ladder.Principal, ttl time.Duration) (string, ladder.Session, error) {
	if ladder.CheckKeyKind(p, ladder.KeyHuman) != nil {
		// Sign-in refuses every other kind alike.
		return "", ladder.Session{}, &ladder.Error{Code: ladder.CodeKeyKindRefused, Message: "Only a human key can sign in to the console.", Hint: "use the human key of your workspace"}
	}
	if ttl <= 0 {
		return "", ladder.Session{}, errors.New("start session: the session length must be positive")
	}
	if ladder.IsTokenActor(p.KeyID) {
		return s.startTokenSession(ctx, p, ttl)
	}
	k, err := s.store.GetKey(ctx, p.KeyID)
	if errors.Is(err, ladder.ErrNotFound) {
		return "", ladder.Session{}, errSessionEnded
	}
	if err != nil {
		return "", ladder.Session{}, storeErr("get key", err)
	}
	now := ladder.NormTime(s.now())
	if k.Kind != ladder.KeyHuman || k.Workspace != p.Workspace || !k.Active(now) {
		return "", ladder.Session{}, errSessionEnded
	}
	id, hash := ladder.NewSessionID()
	se := ladder.Session{IDHash: hash, KeyID: k.ID, Workspace: k.Workspace, CreatedAt: now, ExpiresAt: now.Add(ttl)}
	if k.ExpiresAt != nil && k.ExpiresAt.Before(se.ExpiresAt) {
		se.ExpiresAt = ladder.NormTime(*k.ExpiresAt)
	}
	e, err := ladder.NewAuditEntry(k.Workspace, k.ID, ladder.AuditSessionStart, k.ID, now, map[string]any{"key_id": k.ID, "session": sessionTag(hash), "expires_at": se.ExpiresAt})
	if err != nil {
		return "", ladder.Session{}, err
	}
	if err := s.store.CreateSession(ctx, se, e); err != nil {
		return "", ladder.Session{}, storeErr("create session", err)
	}
	return id, se, nil
}

// startTokenSession signs in a person whose OpenID Connect sign-in the
// console checked and the identity rules mapped to a human of p.Workspace.
// The audit record names the issuer, client and subject (p.KeyID), never
// a token.
func (s *Service) startTokenSession(ctx context.Context, p ladder.Principal, ttl time.Duration) (string, ladder.Session, error) {
	if _, ok := s.workspaces[p.Workspace]; !ok {
		return "", ladder.Session{}, errSessionEnded
	}
	now := ladder.NormTime(s.now())
	id, hash := ladder.NewSessionID()
	se := ladder.Session{IDHash: hash, KeyID: p.KeyID, Workspace: p.Workspace, CreatedAt: now, ExpiresAt: now.Add(ttl)}
	e, err := ladder.NewAuditEntry(p.Workspace, p.KeyID, ladder.AuditSessionStart, p.KeyID, now, map[string]any{"subject": p.Subject, "client_id": p.ClientID, "session": sessionTag(hash), "expires_at": se.ExpiresAt})
	if err != nil {
		return "", ladder.Session{}, err
	}
	if err := s.store.CreateSession(ctx, se, e); err != nil {
		return "", ladder.Session{}, storeErr("create session", err)
	}
	return id, se, nil
}

// Session returns the session with that id while it may be used: not
// revoked, not expired, and its key still an active human key of the
// session's workspace. Anything else is KEY_INVALID ("the console session
// has ended"); a store that does not answer is AUDIT_UNAVAILABLE. It costs
// two reads by primary key.
func (s *Service) Session(ctx context.Context, id string) (ladder.Session, error) {
	if len(id) != sessionIDLen {
		return ladder.Session{}, errSessionEnded
	}
	se, err := s.store.GetSession(ctx, ladder.SessionIDHash(id))
	if errors.Is(err, ladder.ErrNotFound) {
		return ladder.Session{}, errSessionEnded
	}
	if err != nil {
		return ladder.Session{}, storeErr("get session", err)
	}
	now := s.now()
	if !se.Active(now) {
		return ladder.Session{}, errSessionEnded
	}
	if ladder.IsTokenActor(se.KeyID) {
		// A single sign-on session has no key: the provider vouched for the
		// person at sign-in, and the session lasts its ttl.
		return se, nil
	}
	// The key is checked too: a key that expired ends its sessions, and a
	// session outlives no change to its key.
	k, err := s.store.GetKey(ctx, se.KeyID)
	if errors.Is(err, ladder.ErrNotFound) {
		return ladder.Session{}, errSessionEnded
	}
	if err != nil {
		return ladder.Session{}, storeErr("get key", err)
	}
	if k.Kind != ladder.KeyHuman || k.Workspace != se.Workspace || !k.Active(now) {
		return ladder.Session{}, errSessionEnded
	}
	return se, nil
}

// EndSession signs out: it revokes the session with that id, with its
// audit record, so the id (and every form token bound to it) is refused
// from now on by every replica. A session that has ended already is left
// as it is.
func (s *Service) EndSession(ctx context.Context, id string) error {
	se, err := s.Session(ctx, id)
	if err != nil {
		if ladder.ErrorCode(err) == ladder.CodeKeyInvalid {
			return nil
		}
		return err
	}
	now := ladder.NormTime(s.now())
	e, err := ladder.NewAuditEntry(se.Workspace, se.KeyID, ladder.AuditSessionEnd, se.KeyID, now, map[string]any{"key_id": se.KeyID, "session": sessionTag(se.IDHash)})
	if err != nil {
		return err
	}
	if err := s.store.RevokeSession(ctx, se.IDHash, now, e); err != nil && !errors.Is(err, ladder.ErrNotFound) {
		return storeErr("revoke session", err)
	}
	return nil
}

// DeleteExpiredSessions deletes the sessions past their expiry (they are
// refused already) and returns how many. serve runs it periodically.
func (s *Service) DeleteExpiredSessions(ctx context.Context) (int, error) {
	n, err := s.store.DeleteExpiredSessions(ctx, s.now())
	if err != nil {
		return 0, storeErr("delete expired sessions", err)
	}
	return n, nil
}

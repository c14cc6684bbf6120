package ladder

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"time"
)

// Audit record kinds of console sessions.
const (
	AuditSessionStart = "console.signin"
	AuditSessionEnd   = "console.signout"
)

// Session is a person's sign-in to the console. Its id is a random bearer
// secret held only in the person's cookie; the store keeps its SHA-256, so
// a copy of the database signs no one in.
type Session struct {
	IDHash    []byte // SHA-256 of the session id
	KeyID     string // the human key that signed in, or for single sign-on the TokenActor name
	Workspace string
	CreatedAt time.Time
	ExpiresAt time.Time
	RevokedAt *time.Time
}

// Active reports whether the session may be used at now: not revoked and
// not expired.
func (s Session) Active(now time.Time) bool {
	return s.RevokedAt == nil && now.Before(s.ExpiresAt)
}

// NewSessionID returns a fresh session id (256 random bits, URL-safe) and
// its hash, which is all the store keeps.
func NewSessionID() (id string, hash []byte) {
	var b [32]byte
	_, _ = rand.Read(b[:])
	id = base64.RawURLEncoding.EncodeToString(b[:])
	return id, SessionIDHash(id)
}

// SessionIDHash returns the SHA-256 of a session id, the store's key for it.
func SessionIDHash(id string) []byte {
	sum := sha256.Sum256([]byte(id))
	return sum[:]
}

// SessionStore keeps console sessions in the database, so that signing
// out, revoking the key and expiry end a session on every replica at once.
// (KeyStore.RevokeKey revokes the key's sessions in its transaction.)
type SessionStore interface {
	// CreateSession stores s and appends audit. An id hash in use is
	// ErrConflict.
	CreateSession(ctx context.Context, s Session, audit AuditEntry) error
	// GetSession returns the session whose id hashes to idHash, revoked and
	// expired ones included, or ErrNotFound.
	GetSession(ctx context.Context, idHash []byte) (Session, error)
	// RevokeSession marks the session revoked at the given time and appends
	// audit. A session revoked already keeps its first revocation time; an
	// unknown one is ErrNotFound.
	RevokeSession(ctx context.Context, idHash []byte, at time.Time, audit AuditEntry) error
	// DeleteExpiredSessions deletes the sessions that expired before the
	// given time, revoked or not, and returns how many it deleted.
	DeleteExpiredSessions(ctx context.Context, before time.Time) (int, error)
}

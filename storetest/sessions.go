package storetest

import (
	"crypto/sha256"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ladderhq/ladder"
)

// sessionTests exercise the console's server-side sessions: what signing
// out, revoking a key and the expiry sweep do to them.
var sessionTests = []struct {
	name string
	fn   func(t *testing.T, s ladder.Store)
}{
	{"Sessions", testSessions},
	{"SessionsEndWithTheirKey", testSessionsEndWithKey},
	{"SessionsExpirySweep", testSessionsSweep},
}

// newSession returns a session of key, expiring ttl after t0.
func newSession(id, key string, ttl time.Duration) ladder.Session {
	return ladder.Session{IDHash: ladder.SessionIDHash(id), KeyID: key, Workspace: wsA, CreatedAt: t0, ExpiresAt: t0.Add(ttl)}
}

func mustSession(t *testing.T, s ladder.Store, se ladder.Session) {
	t.Helper()
	check(t, s.CreateSession(t.Context(), se, entry(t, se.Workspace, ladder.AuditSessionStart, se.KeyID, se.CreatedAt, nil)))
}

func testSessions(t *testing.T, s ladder.Store) {
	ctx := t.Context()
	se := newSession("sid-1", "k1", 12*time.Hour)
	mustSession(t, s, se)
	if diff := cmp.Diff(se, must(s.GetSession(ctx, se.IDHash))); diff != "" {
		t.Errorf("GetSession (-want +got):\n%s", diff)
	}
	wantErr(t, "CreateSession with an id in use", s.CreateSession(ctx, se, entry(t, wsA, ladder.AuditSessionStart, "k1", t0, nil)), ladder.ErrConflict)
	_, err := s.GetSession(ctx, ladder.SessionIDHash("sid-unknown"))
	wantErr(t, "GetSession unknown", err, ladder.ErrNotFound)
	// The store is keyed by the id's hash: the id itself finds nothing.
	_, err = s.GetSession(ctx, []byte("sid-1"))
	wantErr(t, "GetSession by the raw id", err, ladder.ErrNotFound)

	// Revoking keeps the first time; an unknown session is not found.
	at := t0.Add(time.Hour)
	check(t, s.RevokeSession(ctx, se.IDHash, at, entry(t, wsA, ladder.AuditSessionEnd, "k1", at, nil)))
	got := must(s.GetSession(ctx, se.IDHash))
	if got.RevokedAt == nil || !got.RevokedAt.Equal(at) || got.Active(at) {
		t.Errorf("after RevokeSession: revoked_at %v, active %v; want %v, false", got.RevokedAt, got.Active(at), at)
	}
	check(t, s.RevokeSession(ctx, se.IDHash, at.Add(time.Hour), entry(t, wsA, ladder.AuditSessionEnd, "k1", at, nil)))
	if got := must(s.GetSession(ctx, se.IDHash)); got.RevokedAt == nil || !got.RevokedAt.Equal(at) {
		t.Errorf("a second RevokeSession moved revoked_at to %v", got.RevokedAt)
	}
	wantErr(t, "RevokeSession unknown", s.RevokeSession(ctx, ladder.SessionIDHash("sid-unknown"), at, entry(t, wsA, ladder.AuditSessionEnd, "k1", at, nil)), ladder.ErrNotFound)

	// Another session of the same key is untouched.
	other := newSession("sid-2", "k1", 12*time.Hour)
	mustSession(t, s, other)
	if got := must(s.GetSession(ctx, other.IDHash)); !got.Active(at) {
		t.Errorf("another session of the key: revoked_at %v", got.RevokedAt)
	}
	wantAuditKinds(t, s, map[string]int{ladder.AuditSessionStart: 2, ladder.AuditSessionEnd: 2})
}

func testSessionsEndWithKey(t *testing.T, s ladder.Store) {
	ctx := t.Context()
	hash := sha256.Sum256([]byte("secret"))
	for _, id := range []string{"k1", "k2"} {
		k := ladder.Key{ID: id, Workspace: wsA, Kind: ladder.KeyHuman, SecretHash: hash[:], CreatedAt: t0}
		check(t, s.CreateKey(ctx, k, entry(t, wsA, ladder.AuditKeyCreate, id, t0, nil)))
	}
	a, b, c := newSession("sid-a", "k1", 12*time.Hour), newSession("sid-b", "k1", 12*time.Hour), newSession("sid-c", "k2", 12*time.Hour)
	for _, se := range []ladder.Session{a, b, c} {
		mustSession(t, s, se)
	}
	// b was signed out before the key was revoked: it keeps that time.
	out := t0.Add(time.Minute)
	check(t, s.RevokeSession(ctx, b.IDHash, out, entry(t, wsA, ladder.AuditSessionEnd, "k1", out, nil)))
	revoked := t0.Add(time.Hour)
	check(t, s.RevokeKey(ctx, "k1", revoked, entry(t, wsA, ladder.AuditKeyRevoke, "k1", revoked, nil)))
	for _, tc := range []struct {
		name string
		se   ladder.Session
		want *time.Time
	}{
		{"the key's session", a, &revoked},
		{"the key's session signed out before", b, &out},
		{"another key's session", c, nil},
	} {
		got := must(s.GetSession(ctx, tc.se.IDHash))
		if diff := cmp.Diff(tc.want, got.RevokedAt); diff != "" {
			t.Errorf("%s: revoked_at (-want +got):\n%s", tc.name, diff)
		}
	}
}

func testSessionsSweep(t *testing.T, s ladder.Store) {
	ctx := t.Context()
	short, long, gone := newSession("sid-short", "k1", time.Hour), newSession("sid-long", "k1", 12*time.Hour), newSession("sid-revoked", "k2", time.Hour)
	edge := newSession("sid-edge", "k1", 2*time.Hour)
	for _, se := range []ladder.Session{short, long, gone, edge} {
		mustSession(t, s, se)
	}
	check(t, s.RevokeSession(ctx, gone.IDHash, t0.Add(time.Minute), entry(t, wsA, ladder.AuditSessionEnd, "k2", t0, nil)))
	// Sessions that expired before the time go, revoked or not; one that
	// expires exactly then stays (it is refused, but not yet deleted).
	if n := must(s.DeleteExpiredSessions(ctx, t0.Add(2*time.Hour))); n != 2 {
		t.Errorf("DeleteExpiredSessions deleted %d, want 2", n)
	}
	for _, se := range []ladder.Session{short, gone} {
		_, err := s.GetSession(ctx, se.IDHash)
		wantErr(t, "an expired session after the sweep", err, ladder.ErrNotFound)
	}
	for _, se := range []ladder.Session{long, edge} {
		if _, err := s.GetSession(ctx, se.IDHash); err != nil {
			t.Errorf("a session not expired before the sweep: %v", err)
		}
	}
	if n := must(s.DeleteExpiredSessions(ctx, t0.Add(2*time.Hour))); n != 0 {
		t.Errorf("a second sweep deleted %d", n)
	}
	// The sweep writes no audit: a session's start and end are recorded.
	wantAuditKinds(t, s, map[string]int{ladder.AuditSessionStart: 4, ladder.AuditSessionEnd: 1})
}

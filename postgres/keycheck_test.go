package postgres

import (
	"context"
	"crypto/sha256"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/internal/groupcommit"
)

// storeKeys stores agent keys of ws-a with the ids given, active unless
// the id is in revoked.
func storeKeys(t *testing.T, s *Store, ids []string, revoked ...string) {
	t.Helper()
	created := time.Date(2026, 8, 24, 9, 0, 0, 0, time.UTC)
	for _, id := range ids {
		sum := sha256.Sum256([]byte("secret of " + id))
		k := ladder.Key{ID: id, Workspace: "ws-a", Kind: ladder.KeyAgent, SecretHash: sum[:], CreatedAt: created}
		if slices.Contains(revoked, id) {
			at := created.Add(time.Hour)
			k.RevokedAt = &at
		}
		if err := s.CreateKey(t.Context(), k, entry(t, ladder.AuditKeyCreate, id, nil)); err != nil {
			t.Fatal(err)
		}
	}
}

// keyChecked is a batch op checking key id at commit, as Store.write makes
// it, then running op.
func keyChecked(t *testing.T, id string, op func(w *wtx) error) groupcommit.Op[*wtx] {
	ctx, _ := ladder.RequireActiveKey(t.Context(), id)
	checked, _ := ladder.KeyCheckedOp(ctx, op, (*wtx).activeKey)
	return checked
}

// tryRevoke tries, from a connection of its own, to revoke key id while a
// batch runs, waiting at most 200 ms for its row lock, and rolls the try
// back: it returns nil if the revocation could have committed then.
func tryRevoke(ctx context.Context, t *testing.T, schema, id string) error {
	conn := adminConn(t, schema)
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "SET LOCAL lock_timeout = '200ms'"); err != nil {
		return err
	}
	_, err = tx.Exec(ctx, "UPDATE keys SET revoked_at = now() WHERE id = $1", id)
	return err
}

// lockTimedOut reports whether err is PostgreSQL's lock_not_available.
func lockTimedOut(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "55P03"
}

// TestKeyLockedAfterOpRolledBack: an op of a batch checks its key and
// fails, so the batch runs again with an op a savepoint and that op's
// savepoint is rolled back, which gives up the key's FOR SHARE lock. The
// next op checking the same key must lock it again, or a revocation could
// commit before the batch and the op's record after it.
func TestKeyLockedAfterOpRolledBack(t *testing.T) {
	schema := newSchema(t)
	s := openTest(t, schema)
	storeKeys(t, s, []string{"k-1"})
	failed := errors.New("the op fails after its key check")
	var revoke error
	ran := false
	errs := s.runBatch(t.Context(), []groupcommit.Op[*wtx]{
		keyChecked(t, "k-1", func(*wtx) error { return failed }),
		keyChecked(t, "k-1", func(w *wtx) error {
			ran = true
			revoke = tryRevoke(w.ctx, t, schema, "k-1")
			return nil
		}),
	})
	if !errors.Is(errs[0], failed) || errs[1] != nil {
		t.Fatalf("batch errors %v, want the first op's failure and nil", errs)
	}
	if !ran {
		t.Fatal("the second op did not run")
	}
	if !lockTimedOut(revoke) {
		t.Errorf("a revocation during the second op: %v, want it to wait for the batch (lock_not_available)", revoke)
	}
}

// TestKeysOfWaitingWritesReadAtOnce: the first key check of a batch reads
// the keys of the other writes being checked too, in the same statement
// and under the same lock, and each is judged as if read alone: an active
// key passes, a revoked one is refused, one not stored is read again (and
// refused) when its write checks it.
func TestKeysOfWaitingWritesReadAtOnce(t *testing.T) {
	schema := newSchema(t)
	s := openTest(t, schema)
	storeKeys(t, s, []string{"k-1", "k-2", "k-3", "k-gone"}, "k-gone")
	// Writes under these keys are waiting (Store.write announces them).
	for _, id := range []string{"k-1", "k-2", "k-3", "k-gone", "k-never"} {
		s.checking.add(id)
		defer s.checking.done(id)
	}
	var (
		known  ladder.KeyMemo
		revoke error
	)
	errs := s.runBatch(t.Context(), []groupcommit.Op[*wtx]{
		keyChecked(t, "k-1", func(w *wtx) error {
			known = maps.Clone(w.keys)
			// k-3 was read under FOR SHARE by k-1's check.
			revoke = tryRevoke(w.ctx, t, schema, "k-3")
			return nil
		}),
		keyChecked(t, "k-2", func(*wtx) error { return nil }),
		keyChecked(t, "k-gone", func(*wtx) error { return nil }),
		keyChecked(t, "k-never", func(*wtx) error { return nil }),
	})
	for id, want := range map[string]bool{"k-1": true, "k-2": true, "k-3": true, "k-gone": false} {
		err, ok := known[id]
		if !ok || (err == nil) != want {
			t.Errorf("after the first check, key %s known %v, answer %v; want known and active %v", id, ok, err, want)
		}
	}
	if _, ok := known["k-never"]; ok {
		t.Errorf("a key not stored was taken as read: %v", known["k-never"])
	}
	if !lockTimedOut(revoke) {
		t.Errorf("a revocation of a key read by another's check: %v, want it to wait for the batch (lock_not_available)", revoke)
	}
	for i, want := range []error{nil, nil, ladder.ErrKeyInactive, ladder.ErrKeyInactive} {
		if (want == nil) != (errs[i] == nil) || (want != nil && !errors.Is(errs[i], want)) {
			t.Errorf("op %d: %v, want %v", i, errs[i], want)
		}
	}
}

func TestKeysInWrite(t *testing.T) {
	var c keysInWrite
	c.add("a")
	c.add("b")
	c.add("b")
	c.add("c")
	c.done("b")
	got := c.ids("a", ladder.KeyMemo{"c": nil}, 10)
	slices.Sort(got[1:])
	if !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("ids = %v, want a first, then b (c is known)", got)
	}
	c.done("b")
	c.done("a")
	if got := c.ids("z", nil, 10); !slices.Equal(got, []string{"z", "c"}) {
		t.Errorf("after the writes of a and b ended, ids = %v, want [z c]", got)
	}
	for i := range 20 {
		c.add(string(rune('d' + i)))
	}
	if got := c.ids("z", nil, 5); len(got) != 5 || got[0] != "z" {
		t.Errorf("ids with limit 5 = %v, want z and four others", got)
	}
}

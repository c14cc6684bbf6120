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

// TestKeysOfBatchReadAtOnce: the first key check of a batch reads the
// keys the batch's other ops check too, in the same statement and under
// the same lock, and each is judged as if read alone: an active key
// passes, a revoked one is refused, one not stored is read again (and
// refused) when its op checks it.
func TestKeysOfBatchReadAtOnce(t *testing.T) {
	schema := newSchema(t)
	s := openTest(t, schema)
	storeKeys(t, s, []string{"k-1", "k-2", "k-3", "k-gone"}, "k-gone")
	var (
		known  ladder.KeyMemo
		revoke error
	)
	// k-3's op is in the batch as its last, checked after k-1's read.
	checks := []string{"k-1", "k-2", "k-3", "k-gone", "k-never"}
	errs := s.runChecking(t.Context(), []groupcommit.Op[*wtx]{
		keyChecked(t, "k-1", func(w *wtx) error {
			known = maps.Clone(w.keys)
			// k-3 was read under FOR SHARE by k-1's check.
			revoke = tryRevoke(w.ctx, t, schema, "k-3")
			return nil
		}),
		keyChecked(t, "k-2", func(*wtx) error { return nil }),
		keyChecked(t, "k-gone", func(*wtx) error { return nil }),
		keyChecked(t, "k-never", func(*wtx) error { return nil }),
		keyChecked(t, "k-3", func(*wtx) error { return nil }),
	}, checks)
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
		t.Errorf("a revocation of a key read by another op's check: %v, want it to wait for the batch (lock_not_available)", revoke)
	}
	for i, want := range []error{nil, nil, ladder.ErrKeyInactive, ladder.ErrKeyInactive, nil} {
		if (want == nil) != (errs[i] == nil) || (want != nil && !errors.Is(errs[i], want)) {
			t.Errorf("op %d: %v, want %v", i, errs[i], want)
		}
	}
}

// TestCheckedKeysOfBatch: a run function learns the keys its ops check
// from the contexts their callers passed, each once.
func TestCheckedKeysOfBatch(t *testing.T) {
	var got []string
	b := groupcommit.New(func(ctx context.Context, ops []groupcommit.Op[*wtx]) []error {
		got = checkedKeys(ctx)
		return make([]error, len(ops))
	}, groupcommit.Options{})
	defer b.Close()
	ctx, _ := ladder.RequireActiveKey(t.Context(), "k-1")
	if err := b.Do(ctx, func(*wtx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{"k-1"}) {
		t.Errorf("checked keys %v, want [k-1]", got)
	}
	if err := b.Do(ladder.WithoutKeyCheck(ctx), func(*wtx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Errorf("checked keys of a write without a check: %v, want none", got)
	}
}

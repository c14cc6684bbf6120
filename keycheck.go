package ladder

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// KeyCheck makes the store the judge of a key at commit. A request whose
// key was taken from a cache of verified keys (a hint: another replica or
// process may have revoked it since) runs its writes under
// RequireActiveKey; every write the store commits under it first reads
// the key inside the write's transaction and refuses the whole write with
// ErrKeyInactive unless the key is active then (Key.Active at the store's
// clock). So no record is committed in the name of a key after its
// revocation committed, whatever a cache remembers; the store marks the
// check confirmed when such a write commits, and a request that committed
// nothing must confirm its key by reading it before it answers.
type KeyCheck struct {
	id                 string
	confirmed, refused atomic.Bool
}

// KeyID is the id of the key the check is for.
func (c *KeyCheck) KeyID() string { return c.id }

// Confirm records that a write checked the key at its commit and
// committed. Stores call it.
func (c *KeyCheck) Confirm() { c.confirmed.Store(true) }

// Confirmed reports whether a write of this request checked the key at
// its commit and committed.
func (c *KeyCheck) Confirmed() bool { return c.confirmed.Load() }

// Refused reports whether a write of this request found the key inactive
// at its commit (after an earlier one may have committed).
func (c *KeyCheck) Refused() bool { return c.refused.Load() }

type keyCheckCtx struct{}

// RequireActiveKey returns ctx under which every store write checks that
// key id is active at its commit, and the check, which the store confirms.
func RequireActiveKey(ctx context.Context, id string) (context.Context, *KeyCheck) {
	c := &KeyCheck{id: id}
	return context.WithValue(ctx, keyCheckCtx{}, c), c
}

// ActiveKeyCheck returns the check ctx carries, or nil.
func ActiveKeyCheck(ctx context.Context) *KeyCheck {
	c, _ := ctx.Value(keyCheckCtx{}).(*KeyCheck)
	return c
}

// WithoutKeyCheck returns ctx without a key check: for a write that
// completes work its key's earlier checked write started (a call's
// result after the call ran), which must be stored even if the key was
// revoked meanwhile.
func WithoutKeyCheck(ctx context.Context) context.Context {
	if ActiveKeyCheck(ctx) == nil {
		return ctx
	}
	return context.WithValue(ctx, keyCheckCtx{}, (*KeyCheck)(nil))
}

// KeyCheckedOp returns op preceded by the check of ctx's KeyCheck, if
// any, run by active inside the write's transaction, and the function a
// store calls with the write's result, which confirms the check when the
// write committed. Without a check it returns op as it is.
func KeyCheckedOp[T any](ctx context.Context, op func(T) error, active func(T, string) error) (func(T) error, func(error)) {
	kc := ActiveKeyCheck(ctx)
	if kc == nil {
		return op, func(error) {}
	}
	return func(t T) error {
			if err := active(t, kc.KeyID()); err != nil {
				return err
			}
			return op(t)
		}, func(err error) {
			switch {
			case err == nil:
				kc.Confirm()
			case errors.Is(err, ErrKeyInactive):
				kc.refused.Store(true)
			}
		}
}

// KeyMemo holds a write transaction's answers to key checks, so each key
// is read once per transaction.
type KeyMemo map[string]error

// Check answers a key check at now: nil for an active key, else an error
// wrapping ErrKeyInactive; read returns the stored key, found false when
// there is none. A read's own failure is returned and not kept. read may
// Learn other keys it read on the way.
func (m *KeyMemo) Check(id string, now time.Time, read func(id string) (k Key, found bool, err error)) error {
	if err, ok := (*m)[id]; ok {
		return err
	}
	k, found, err := read(id)
	if err != nil {
		return fmt.Errorf("key %s: %w", id, err)
	}
	return m.Learn(id, k, found, now)
}

// Learn keeps and returns the answer for key id as read in the
// transaction (found false when it is not stored), judged at now.
func (m *KeyMemo) Learn(id string, k Key, found bool, now time.Time) error {
	var err error
	switch {
	case !found:
		err = fmt.Errorf("key %s is not stored: %w", id, ErrKeyInactive)
	case !k.Active(now):
		err = fmt.Errorf("key %s is revoked or expired: %w", id, ErrKeyInactive)
	}
	if *m == nil {
		*m = KeyMemo{}
	}
	(*m)[id] = err
	return err
}

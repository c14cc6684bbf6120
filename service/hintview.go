package service

import "sync"

// hintView is a process's memory of records the store decides on (step
// states, verified keys), kept so a request need not read them: only a
// hint, which the store re-checks at every commit that depends on it.
// Entries are filled by reads of the store, replaced by what this process
// writes, and dropped when the store says a record changed.
type hintView[K comparable, V any] struct {
	mu sync.RWMutex
	m  map[K]V
	// gen counts drops: a record read from the store before a drop may be
	// older than the change the drop was for, so it is not kept.
	gen   uint64
	keyOf func(V) K
	// older reports whether next is an earlier version than cur, which
	// the view then keeps; nil when records have no versions.
	older func(cur, next V) bool
}

func newHintView[K comparable, V any](keyOf func(V) K, older func(cur, next V) bool) *hintView[K, V] {
	return &hintView[K, V]{m: map[K]V{}, keyOf: keyOf, older: older}
}

// get returns the view's record of k, if any, and the generation to pass
// to fill with a record read from the store after this call.
func (v *hintView[K, V]) get(k K) (V, bool, uint64) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	x, ok := v.m[k]
	return x, ok, v.gen
}

// fill keeps x, read from the store after a get that returned gen, unless
// a drop came in between or the view holds a later version already.
func (v *hintView[K, V]) fill(x V, gen uint64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.gen == gen {
		v.keep(x)
	}
}

// wrote keeps x, a record this process has just committed.
func (v *hintView[K, V]) wrote(x V) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.keep(x)
}

func (v *hintView[K, V]) keep(x V) {
	k := v.keyOf(x)
	if cur, ok := v.m[k]; ok && v.older != nil && v.older(cur, x) {
		return
	}
	v.m[k] = x
}

// drop forgets k's record; the zero key forgets every record.
func (v *hintView[K, V]) drop(k K) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.gen++
	var zero K
	if k == zero {
		clear(v.m)
		return
	}
	delete(v.m, k)
}

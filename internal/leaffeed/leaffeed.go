// Package leaffeed keeps, for a store's TlogFed (ladder.TlogStore), the
// leaves the store's committed write batches appended to the workspaces'
// logs, until an integration passes them.
//
// A store publishes a batch's leaves only after its COMMIT returned, and
// never those of an op rolled back to its savepoint, so every leaf here is
// a record on disk at its position. A position the feed lacks (another
// process or replica appended it, or this one did before a restart) the
// integrator reads from the database (ladder.TlogStore.TlogPending).
package leaffeed

import (
	"sync"

	"github.com/ladderhq/ladder"
)

// Feed holds the leaves of each workspace in position order. The zero
// Feed is ready to use.
type Feed struct {
	mu    sync.Mutex
	ws    map[string][]ladder.FedLeaf
	total int // leaves held, across workspaces
}

// MaxLeaves bounds the leaves the feed holds across workspaces (a leaf is
// 48 bytes), for an integrator that does not run (a legacy chain it
// refuses to adopt) or fails while routes still commit: past it every
// leaf is let go, and integrations read the records back until they reach
// the newer ones. An integration every few seconds takes the leaves of
// thousands of calls a second well below it.
const MaxLeaves = 1 << 15

// Leaf is a leaf of workspace WS's log, as a batch's appends made it.
type Leaf struct {
	WS string
	ladder.FedLeaf
}

// Publish adds a committed batch's leaves.
func (f *Feed) Publish(leaves []Leaf) {
	if len(leaves) == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ws == nil || f.total+len(leaves) > MaxLeaves {
		f.ws, f.total = map[string][]ladder.FedLeaf{}, 0
	}
	for _, l := range leaves {
		f.ws[l.WS] = append(f.ws[l.WS], l.FedLeaf)
	}
	f.total += len(leaves)
}

// Take is ladder.TlogStore's TlogFed: up to limit of workspace's leaves
// from position from on, consecutive, none when from is not one of them.
// The leaves before from are integrated, and let go.
func (f *Feed) Take(workspace string, from int64, limit int) []ladder.FedLeaf {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.ws[workspace]
	i := 0
	for i < len(q) && q[i].Index < from {
		i++
	}
	f.total -= i
	if q = q[i:]; len(q) == 0 {
		delete(f.ws, workspace)
		return nil
	}
	f.ws[workspace] = q
	n := 0
	for n < len(q) && n < limit && q[n].Index == from+int64(n) {
		n++
	}
	// A copy: the queue's array is appended to once the lock is let go.
	return append([]ladder.FedLeaf(nil), q[:n]...)
}

// Held returns how many leaves the feed holds for workspace.
func (f *Feed) Held(workspace string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.ws[workspace])
}

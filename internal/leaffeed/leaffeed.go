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
	"sync/atomic"

	"github.com/ladderhq/ladder"
)

// Feed holds the leaves of each workspace in the order their batches
// committed (position order, a store's batches running one at a time),
// once an integration has asked for the workspace's leaves: until then it keeps
// none, so a process that writes without integrating (a command, the
// demo's seeding before its server starts) holds no leaves for nothing,
// and the first integration reads back what came before. The zero Feed is
// ready to use.
type Feed struct {
	mu sync.Mutex
	// ws holds the leaves of each workspace asked for (Take), an empty
	// queue included.
	ws    map[string][]ladder.FedLeaf
	total int // leaves held, across workspaces
	// asked is set by the first Take: until then no leaf is kept, and a
	// store need not compute any (Asked).
	asked atomic.Bool
}

// Asked reports whether an integration has asked for any workspace's
// leaves: a store that seals records before that need not take their leaf
// hashes for the feed, which would keep none of them.
func (f *Feed) Asked() bool { return f.asked.Load() }

// Seal seals rec over its workspace's previous hash prevHash, rec being
// the workspace's leaf at position index, and returns leaves with rec's
// leaf appended for Publish once an integration has asked for leaves
// (Asked); before that it takes no leaf hash and returns leaves as they
// are. Both stores seal each record they append through it.
func (f *Feed) Seal(rec *ladder.AuditRecord, prevHash string, index int64, leaves []Leaf) []Leaf {
	if !f.Asked() {
		rec.Seal(prevHash)
		return leaves
	}
	leaf := rec.SealLeaf(prevHash)
	return append(leaves, Leaf{WS: rec.Workspace, FedLeaf: ladder.FedLeaf{TlogLeaf: ladder.TlogLeaf{Index: index, Seq: rec.Seq}, Hash: leaf}})
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

// Publish adds a committed batch's leaves, of the workspaces asked for.
func (f *Feed) Publish(leaves []Leaf) {
	if len(leaves) == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.total+len(leaves) > MaxLeaves {
		for ws := range f.ws {
			f.ws[ws] = nil
		}
		f.total = 0
	}
	for _, l := range leaves {
		if q, asked := f.ws[l.WS]; asked {
			f.ws[l.WS] = append(q, l.FedLeaf)
			f.total++
		}
	}
}

// Take is ladder.TlogStore's TlogFed: up to limit of workspace's leaves
// from position from on, consecutive, none when from is not one of them.
// The leaves before from are integrated, and let go; from now on the
// workspace's leaves are kept. Only a run that starts at from and goes
// up one position at a time is returned, so leaves published out of order
// would cost reads back, never a wrong leaf.
func (f *Feed) Take(workspace string, from int64, limit int) []ladder.FedLeaf {
	f.asked.Store(true)
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.ws[workspace]
	i := 0
	for i < len(q) && q[i].Index < from {
		i++
	}
	f.total -= i
	if q = q[i:]; len(q) == 0 {
		q = nil // lets the array go
	}
	if f.ws == nil {
		f.ws = map[string][]ladder.FedLeaf{}
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

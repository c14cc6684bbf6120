// Package translog makes ladder's audit log a set of transparency logs:
// one RFC 6962 Merkle tree per workspace over that workspace's audit
// records, hashed with golang.org/x/mod/sumdb/tlog, and checkpoints (tree
// heads) signed as Ed25519 signed notes with golang.org/x/mod/sumdb/note,
// in the C2SP checkpoint form Go's checksum database uses.
//
// Leaf i of a workspace's tree is the workspace's i-th audit record in seq
// order, and the leaf's data is the record's canonical bytes
// (ladder.AuditRecord.Canonical: every field but the chain hashes, the
// seq and workspace included). The leaf hash is tlog.RecordHash of them,
// so a tree over a workspace's records does not depend on any other
// workspace's records, and anyone holding the records can recompute it.
//
// The trees are integrated behind the audit append (as Trillian does): the
// append path and its durability rules are unchanged, and Integrate adds a
// workspace's newly committed records to its tree: it takes their leaf
// hashes outside any write, then appends the tree's hashes in one
// transaction that holds the workspace's tree lock. A store that keeps the
// leaves its own commits sealed (ladder.TlogStore.TlogFed) hands those
// over; the records it was not fed (another replica's, or this process's
// from before a restart) are read back and hashed (ReadBack).
package translog

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/ladderhq/ladder"
)

// Store is what the integrator needs: the logs and the audit records they
// are built over.
type Store interface {
	ladder.TlogStore
	ladder.AuditStore
}

// IntegrateBatch is the most records one Integrate transaction adds
// (ladder.TlogBatch).
const IntegrateBatch = ladder.TlogBatch

// LeafData returns the bytes rec's leaf hashes: its canonical form.
func LeafData(rec ladder.AuditRecord) []byte { return rec.Canonical() }

// LeafHash returns rec's leaf hash, RFC 6962's SHA-256(0x00 ‖ data)
// (ladder.AuditRecord.LeafHash, which TestLeafHash holds to tlog's
// RecordHash).
func LeafHash(rec ladder.AuditRecord) tlog.Hash { return tlog.Hash(rec.LeafHash()) }

// Integrate adds up to IntegrateBatch of workspace's audit records that
// are not yet leaves to its tree, in one transaction, and returns how many
// it added and the tree's size after. Records become leaves in the order
// of the positions their append gave them (so in seq order too);
// a record of another workspace is refused, so a store bug cannot mix two
// logs.
//
// The leaves (fed, or the records read back and hashed) and the stored
// hashes the new ones rest on are taken, and the new hashes computed,
// before the transaction, from committed rows that never change; the
// transaction checks that the tree's head is still the one they grow and
// appends. When another integrator (a proof request, a
// second replica) moved the head in between, the work is done again from
// the new head, up to maxStale times in a row.
func Integrate(ctx context.Context, st ladder.TlogStore, workspace string) (added int, size int64, err error) {
	for range maxStale {
		g, err := prepare(ctx, st, workspace)
		if err != nil || len(g.leaves) == 0 {
			return 0, g.size, err
		}
		stale := false
		err = st.IntegrateTx(ctx, workspace, func(tx ladder.TlogTx) error {
			n, lastSeq, err := tx.Head()
			if err != nil {
				return err
			}
			if stale = n != g.size || lastSeq != g.lastSeq; stale {
				return nil
			}
			return tx.Append(g.newSize(), g.newLastSeq(), g.leaves, g.hashes)
		})
		if err != nil {
			return 0, 0, err
		}
		if !stale {
			return len(g.leaves), g.newSize(), nil
		}
	}
	return 0, 0, fmt.Errorf("integrate %s: the tree's head moved under %d integrations in a row", workspace, maxStale)
}

// maxStale bounds how many times in a row Integrate does its work again
// because another integrator moved the head first. Each time it does,
// the other one grew the tree, so a run out of them is a store that moves
// the head without growing it, or a stream of integrators no one process
// should outrun.
const maxStale = 64

// growth is what one integration adds to a tree whose head was size and
// lastSeq: the leaves after it and the stored hashes they add.
type growth struct {
	size, lastSeq int64
	leaves        []ladder.TlogLeaf
	hashes        []ladder.TlogHash
}

func (g growth) newSize() int64 { return g.size + int64(len(g.leaves)) }

func (g growth) newLastSeq() int64 { return g.leaves[len(g.leaves)-1].Seq }

// prepare reads workspace's head, takes up to IntegrateBatch leaves after
// it (pending), and computes the stored hashes they add. A leaf that is not
// the next position, or whose record is not after the last leaf's, is
// refused, so a store bug cannot make a tree skip, repeat or reorder one.
func prepare(ctx context.Context, st ladder.TlogStore, workspace string) (growth, error) {
	n, lastSeq, err := st.TlogHead(ctx, workspace)
	if err != nil {
		return growth{}, err
	}
	g := growth{size: n, lastSeq: lastSeq}
	leaves, err := pending(ctx, st, workspace, n)
	if err != nil || len(leaves) == 0 {
		return g, err
	}
	// Hashes this integration computed are read from memory; older ones
	// from the store.
	// A leaf adds two stored hashes on average (itself and, for each
	// trailing one in its index, a parent).
	fresh := make(map[int64]tlog.Hash, 2*len(leaves))
	g.hashes = make([]ladder.TlogHash, 0, 2*len(leaves))
	g.leaves = make([]ladder.TlogLeaf, 0, len(leaves))
	stored := Reader(ctx, st, workspace)
	reader := tlog.HashReaderFunc(func(indexes []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(indexes))
		var missing []int64
		for i, ix := range indexes {
			if h, ok := fresh[ix]; ok {
				out[i] = h
			} else {
				missing = append(missing, ix)
			}
		}
		if len(missing) == 0 {
			return out, nil
		}
		got, err := stored.ReadHashes(missing)
		if err != nil {
			return nil, err
		}
		j := 0
		for i, ix := range indexes {
			if _, ok := fresh[ix]; !ok {
				out[i] = got[j]
				j++
			}
		}
		return out, nil
	})
	for _, l := range leaves {
		if l.Index != n || l.Seq <= lastSeq {
			return growth{}, fmt.Errorf("integrate %s: leaf %d of record %d is no next leaf after leaf %d of record %d", workspace, l.Index, l.Seq, n-1, lastSeq)
		}
		hs, err := tlog.StoredHashesForRecordHash(n, tlog.Hash(l.Hash), reader)
		if err != nil {
			return growth{}, fmt.Errorf("integrate %s: stored hashes of leaf %d: %w", workspace, n, err)
		}
		base := tlog.StoredHashIndex(0, n)
		for i, h := range hs {
			fresh[base+int64(i)] = h
			g.hashes = append(g.hashes, ladder.TlogHash{Index: base + int64(i), Hash: h})
		}
		g.leaves = append(g.leaves, l.TlogLeaf)
		n++
		lastSeq = l.Seq
	}
	return g, nil
}

// pending returns up to IntegrateBatch of workspace's leaves from position
// from on: first those the store's own commits fed it (TlogFed), then the
// committed records after them read back and hashed. A fed run shorter
// than the batch may end where another process appended, so the read
// still follows it: what pending returns stops short of the batch only
// where the committed records do, which is how IntegrateAll knows a log
// is up to date.
func pending(ctx context.Context, st ladder.TlogStore, workspace string, from int64) ([]ladder.FedLeaf, error) {
	leaves := st.TlogFed(workspace, from, IntegrateBatch)
	if len(leaves) == IntegrateBatch {
		return leaves, nil
	}
	read, err := ReadBack(ctx, st, workspace, from+int64(len(leaves)), IntegrateBatch-len(leaves))
	return append(leaves, read...), err
}

// ReadBack returns up to limit of workspace's leaves from position from on
// as the committed records give them (TlogPending, each record's
// LeafHash): what an integration takes where the store fed it nothing, and
// what a store's fed leaves must agree with. A record of another
// workspace is refused, so a store bug cannot mix two logs.
func ReadBack(ctx context.Context, st ladder.TlogStore, workspace string, from int64, limit int) ([]ladder.FedLeaf, error) {
	recs, err := st.TlogPending(ctx, workspace, from, limit)
	if err != nil {
		return nil, err
	}
	leaves := make([]ladder.FedLeaf, len(recs))
	for i, rec := range recs {
		if rec.Workspace != workspace {
			return nil, fmt.Errorf("integrate %s: store returned record %d of workspace %q", workspace, rec.Seq, rec.Workspace)
		}
		leaves[i] = ladder.FedLeaf{TlogLeaf: ladder.TlogLeaf{Index: from + int64(i), Seq: rec.Seq}, Hash: rec.LeafHash()}
	}
	return leaves, nil
}

// IntegrateAll integrates workspace until every record committed when it
// started is a leaf, and returns the tree's size. A log that is up to date
// costs two reads and no write transaction, so asking for proofs often
// does not load the write path.
func IntegrateAll(ctx context.Context, st Store, workspace string) (int64, error) {
	size, lastSeq, err := st.TlogHead(ctx, workspace)
	if err != nil {
		return 0, err
	}
	newest, err := st.ListAudit(ctx, ladder.AuditQuery{Workspace: workspace, Desc: true, Limit: 1})
	if err != nil {
		return 0, err
	}
	if len(newest) == 0 || newest[0].Seq <= lastSeq {
		return size, nil
	}
	for {
		added, size, err := Integrate(ctx, st, workspace)
		if err != nil {
			return 0, err
		}
		if added < IntegrateBatch {
			return size, nil
		}
	}
}

// Reader returns a tlog.HashReader over workspace's stored hashes. Stored
// hashes never change once written, so it needs no snapshot.
func Reader(ctx context.Context, st ladder.TlogStore, workspace string) tlog.HashReader {
	return tlog.HashReaderFunc(func(indexes []int64) ([]tlog.Hash, error) {
		got, err := st.TlogHashes(ctx, workspace, indexes)
		if err != nil {
			return nil, err
		}
		out := make([]tlog.Hash, len(got))
		for i, h := range got {
			out[i] = h
		}
		return out, nil
	})
}

// MemoryReader keeps the stored hashes of a tree built in memory, as the
// offline verifier builds one from an export.
type MemoryReader struct{ hashes []tlog.Hash }

// Add appends the leaf with data as the tree's next leaf.
func (m *MemoryReader) Add(data []byte) error {
	return m.AddHash(tlog.RecordHash(data))
}

// AddHash appends a leaf whose hash is h.
func (m *MemoryReader) AddHash(h tlog.Hash) error {
	n := m.Size()
	hs, err := tlog.StoredHashesForRecordHash(n, h, m)
	if err != nil {
		return err
	}
	m.hashes = append(m.hashes, hs...)
	return nil
}

// Size returns how many leaves the tree has.
func (m *MemoryReader) Size() int64 {
	// StoredHashCount is increasing in n; walk up from a lower bound.
	var n int64
	for n = int64(len(m.hashes)) / 2; tlog.StoredHashCount(n) < int64(len(m.hashes)); n++ {
	}
	return n
}

// ReadHashes implements tlog.HashReader.
func (m *MemoryReader) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, ix := range indexes {
		if ix < 0 || ix >= int64(len(m.hashes)) {
			return nil, errors.New("hash index out of range")
		}
		out[i] = m.hashes[ix]
	}
	return out, nil
}

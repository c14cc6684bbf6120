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
// workspace's newly committed records to its tree in one transaction that
// holds the workspace's tree lock.
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

// IntegrateBatch is the most records one Integrate transaction adds, so a
// first integration of a long log does not hold the write lock for long.
const IntegrateBatch = 256

// LeafData returns the bytes rec's leaf hashes: its canonical form.
func LeafData(rec ladder.AuditRecord) []byte { return rec.Canonical() }

// LeafHash returns rec's leaf hash, RFC 6962's SHA-256(0x00 ‖ data).
func LeafHash(rec ladder.AuditRecord) tlog.Hash { return tlog.RecordHash(LeafData(rec)) }

// Integrate adds up to IntegrateBatch of workspace's audit records that
// are not yet leaves to its tree, in one transaction, and returns how many
// it added and the tree's size after. Records become leaves in the order
// of the positions their append gave them (so in seq order too);
// a record of another workspace is refused, so a store bug cannot mix two
// logs.
func Integrate(ctx context.Context, st ladder.TlogStore, workspace string) (added int, size int64, err error) {
	err = st.IntegrateTx(ctx, workspace, func(tx ladder.TlogTx) error {
		added = 0
		n, lastSeq, err := tx.Head()
		if err != nil {
			return err
		}
		size = n
		recs, err := tx.Pending(n, IntegrateBatch)
		if err != nil || len(recs) == 0 {
			return err
		}
		// Hashes this transaction computed are read from memory; older ones
		// from the store.
		fresh := map[int64]tlog.Hash{}
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
			got, err := tx.ReadHashes(missing)
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
		var (
			leaves []ladder.TlogLeaf
			hashes []ladder.TlogHash
		)
		for _, rec := range recs {
			if rec.Workspace != workspace || rec.Seq <= lastSeq {
				return fmt.Errorf("integrate %s: store returned record %d of workspace %q after seq %d", workspace, rec.Seq, rec.Workspace, lastSeq)
			}
			hs, err := tlog.StoredHashes(n, LeafData(rec), reader)
			if err != nil {
				return fmt.Errorf("integrate %s: stored hashes of leaf %d: %w", workspace, n, err)
			}
			base := tlog.StoredHashIndex(0, n)
			for i, h := range hs {
				fresh[base+int64(i)] = h
				hashes = append(hashes, ladder.TlogHash{Index: base + int64(i), Hash: h})
			}
			leaves = append(leaves, ladder.TlogLeaf{Index: n, Seq: rec.Seq})
			n++
			lastSeq = rec.Seq
		}
		if err := tx.Append(n, lastSeq, leaves, hashes); err != nil {
			return err
		}
		added, size = len(recs), n
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	return added, size, nil
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

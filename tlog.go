package ladder

import (
	"context"
	"fmt"
	"time"
)

// AuditTlogStart is the kind of the record a workspace's transparency log
// gets when a database whose audit chain predates the logs (migration
// 0012) or predates per-workspace chains (migration 0014) is adopted: the
// chain was verified first, and the record says up to which sequence
// number and hash, and where the global chain ended.
const AuditTlogStart = "audit.tlog.start"

// TlogHash is one stored hash of a workspace's Merkle tree, at its index
// in golang.org/x/mod/sumdb/tlog's stored-hash numbering.
type TlogHash struct {
	Index int64
	Hash  [32]byte
}

// TlogLeaf ties a leaf of a workspace's tree to the audit record it is.
// Stores do not keep them: a leaf's index is its record's position in the
// workspace's log, given at append time, and the tree's size says which
// positions are leaves.
type TlogLeaf struct {
	Index int64 // 0-based position in the workspace's tree
	Seq   int64 // the audit record's sequence number
}

// CheckLeaves refuses leaves a TlogTx.Append is given unless they are
// consecutive and the last is the one before the tree's new size: with the
// leaves not stored, the size is what says which positions are leaves, so
// a tree must not grow past or short of them.
func CheckLeaves(size int64, leaves []TlogLeaf) error {
	for i := 1; i < len(leaves); i++ {
		if leaves[i].Index != leaves[i-1].Index+1 {
			return fmt.Errorf("append leaves: leaf %d after leaf %d is not the next one", leaves[i].Index, leaves[i-1].Index)
		}
	}
	if n := len(leaves); n > 0 && leaves[n-1].Index != size-1 {
		return fmt.Errorf("append leaves: the last leaf is %d, not the one before the new size %d", leaves[n-1].Index, size)
	}
	return nil
}

// FedLeaf is a leaf a store's commit appended: its position and record,
// and the record's LeafHash as sealed (TlogStore.TlogFed).
type FedLeaf struct {
	TlogLeaf
	Hash [32]byte
}

// TlogCheckpoint is a signed tree head of one workspace's log: the tree's
// size and root hash and the signed note that states them.
type TlogCheckpoint struct {
	Workspace string
	Size      int64
	Root      [32]byte
	Note      string // the signed note, text and signature lines
	At        time.Time
}

// TlogTx is what the integrator asks of a store inside the one
// transaction that extends a workspace's tree. The store holds the
// workspace's tree lock for the transaction's whole life, so two
// integrators (two replicas) never extend one tree at once. The records
// and the older stored hashes are read before it (TlogPending,
// TlogHashes), and the hashes computed, outside the write: the
// transaction only checks that the head is still the one they grow and
// appends, so an integration holds the write lock (SQLite's one writer,
// which every route shares) only for its inserts.
type TlogTx interface {
	// Head returns the tree's size and the seq of its last leaf (0, 0 for
	// an empty tree).
	Head() (size, lastSeq int64, err error)
	// Append stores new stored hashes and moves the head to size and
	// lastSeq, the new leaves being the positions up to size (it refuses
	// leaves CheckLeaves refuses).
	Append(size, lastSeq int64, leaves []TlogLeaf, hashes []TlogHash) error
}

// TlogMeta is the database-wide state of the transparency logs.
type TlogMeta struct {
	// LegacySeq is the last audit seq written before the logs existed
	// (migration 0012); 0 on a database created with them.
	LegacySeq int64
	// Adopted says the legacy chain was verified and the logs started.
	Adopted bool
	// ChainSeq is the last seq of the one global hash chain all
	// workspaces shared before each got its own (migration 0014); 0 on a
	// database created with per-workspace chains. Records up to it chain
	// to the record before them in seq order, later ones to the previous
	// record of their workspace.
	ChainSeq int64
}

// TlogBatch is the most records one integration reads (TlogPending) and
// adds to a workspace's tree, so a first integration of a long log does
// not hold the write lock for long; a store makes room for that many at
// once.
const TlogBatch = 256

// TlogStore keeps the per-workspace transparency logs over the audit
// records: their leaves, stored hashes and signed checkpoints. The tree
// hashing itself lives outside the domain (package translog).
type TlogStore interface {
	// IntegrateTx runs fn in one write transaction that holds workspace's
	// tree lock.
	IntegrateTx(ctx context.Context, workspace string, fn func(TlogTx) error) error
	// TlogHead returns workspace's tree size and last leaf seq.
	TlogHead(ctx context.Context, workspace string) (size, lastSeq int64, err error)
	// TlogPending returns up to limit (an integration asks for TlogBatch)
	// of workspace's committed audit records from position from in its
	// log on, in position order: the
	// positions the append gave them under the workspace's head lock
	// (each record's leaf index), stopping before the first position not
	// committed. A record holds what its leaf covers (Canonical's
	// fields); its chain hashes may be left empty.
	TlogPending(ctx context.Context, workspace string, from int64, limit int) ([]AuditRecord, error)
	// TlogFed returns up to limit of the leaves this store's own
	// committed appends gave workspace's log from position from on,
	// consecutive, stopping before the first it did not give (none when
	// position from is not one of them); leaves before from are
	// integrated, and let go. It spares an integration reading back and
	// hashing again the records this process has just written: the
	// integrator still reads the head, checks it in IntegrateTx, and
	// reads from TlogPending every position the store was not fed
	// (another process or replica appended it, or this one before a
	// restart). A store that keeps no leaves returns none.
	TlogFed(workspace string, from int64, limit int) []FedLeaf
	// TlogHashes returns workspace's stored hashes at indexes; an index
	// not stored is ErrNotFound.
	TlogHashes(ctx context.Context, workspace string, indexes []int64) ([][32]byte, error)
	// TlogLeafOf returns the leaf index of workspace's record seq, or
	// ErrNotFound when it is no leaf of that workspace's tree.
	TlogLeafOf(ctx context.Context, workspace string, seq int64) (int64, error)
	// TlogWorkspaces returns the workspaces with audit records, or with
	// pending only those whose chain head is ahead of their tree (records
	// not yet leaves).
	TlogWorkspaces(ctx context.Context, pending bool) ([]string, error)
	// TlogMeta returns the database-wide log state.
	TlogMeta(ctx context.Context) (TlogMeta, error)
	// TlogAdopt marks the legacy chain adopted; it reports false when
	// another process did first.
	TlogAdopt(ctx context.Context) (bool, error)
	// TlogUnadopt undoes a TlogAdopt whose adoption record could not be
	// written.
	TlogUnadopt(ctx context.Context) error
	// SaveCheckpoint keeps c; a checkpoint of that workspace and size
	// already kept wins, and is what it returns.
	SaveCheckpoint(ctx context.Context, c TlogCheckpoint) (TlogCheckpoint, error)
	// LatestCheckpoint returns workspace's largest checkpoint, or
	// ErrNotFound.
	LatestCheckpoint(ctx context.Context, workspace string) (TlogCheckpoint, error)
}

// AuditCheckpoint is a workspace's latest signed checkpoint (GET
// /v1/audit/checkpoint). Root is base64, as in the note.
type AuditCheckpoint struct {
	Workspace string    `json:"workspace"`
	Size      int64     `json:"size"`
	Root      string    `json:"root"`
	At        time.Time `json:"at"`
	// Note is the signed note: check it with the server's checkpoint
	// public key (GET /.well-known/ladder-checkpoint-key).
	Note string `json:"note"`
}

// AuditProof proves one record is a leaf of a workspace's log at a signed
// checkpoint (GET /v1/audit/records/{seq}/proof): the hashes of
// golang.org/x/mod/sumdb/tlog's RecordProof, base64, from the leaf up.
type AuditProof struct {
	Record     AuditRecord     `json:"record"`
	Leaf       int64           `json:"leaf"`
	LeafHash   string          `json:"leaf_hash"`
	Checkpoint AuditCheckpoint `json:"checkpoint"`
	Proof      []string        `json:"proof"`
}

// AuditConsistency proves the workspace's log at size To extends the log
// at size From (GET /v1/audit/consistency): tlog's TreeProof, base64.
type AuditConsistency struct {
	Workspace string   `json:"workspace"`
	From      int64    `json:"from"`
	To        int64    `json:"to"`
	FromRoot  string   `json:"from_root"`
	ToRoot    string   `json:"to_root"`
	Proof     []string `json:"proof"`
}

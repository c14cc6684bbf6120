-- Per-workspace transparency logs (issue 21): an RFC 6962 Merkle tree per
-- workspace over its audit records in seq order, integrated behind the
-- audit append (package translog), with signed checkpoints. The audit
-- table and its append are unchanged.

-- tlog_head is one row per workspace: its tree's size and the seq of its
-- last leaf. The integrator extends a tree inside one write transaction
-- (BEGIN IMMEDIATE), so a tree never forks.
CREATE TABLE tlog_head (
	workspace TEXT PRIMARY KEY,
	size INTEGER NOT NULL,
	last_seq INTEGER NOT NULL
) WITHOUT ROWID;

-- tlog_leaf ties leaf idx of a workspace's tree to its audit record.
CREATE TABLE tlog_leaf (
	workspace TEXT NOT NULL,
	idx INTEGER NOT NULL,
	seq INTEGER NOT NULL UNIQUE,
	PRIMARY KEY (workspace, idx)
) WITHOUT ROWID;

-- tlog_hash holds a tree's stored hashes, numbered as
-- golang.org/x/mod/sumdb/tlog numbers them (StoredHashIndex).
CREATE TABLE tlog_hash (
	workspace TEXT NOT NULL,
	idx INTEGER NOT NULL,
	hash BLOB NOT NULL,
	PRIMARY KEY (workspace, idx)
) WITHOUT ROWID;

-- tlog_checkpoint keeps every signed checkpoint: the first one signed at
-- a size is kept, and none is deleted.
CREATE TABLE tlog_checkpoint (
	workspace TEXT NOT NULL,
	size INTEGER NOT NULL,
	root BLOB NOT NULL,
	note TEXT NOT NULL,
	at TEXT NOT NULL,
	PRIMARY KEY (workspace, size)
) WITHOUT ROWID;

-- tlog_meta is the database-wide state: legacy_seq is the last seq
-- written before this migration (its chain is verified before those
-- records become leaves, adopted says that was done) and watermark a seq
-- up to which every record is a leaf.
CREATE TABLE tlog_meta (
	id INTEGER PRIMARY KEY CHECK (id = 1),
	legacy_seq INTEGER NOT NULL,
	adopted INTEGER NOT NULL,
	watermark INTEGER NOT NULL
);
INSERT INTO tlog_meta (id, legacy_seq, adopted, watermark)
	SELECT 1, COALESCE(MAX(seq), 0), MAX(seq) IS NULL, 0 FROM audit;

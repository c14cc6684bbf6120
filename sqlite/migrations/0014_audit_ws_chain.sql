-- Per-workspace audit chains (issue 21); mirrors
-- postgres/migrations/0014_audit_ws_chain.sql. Each workspace's records
-- form their own chain from here: prev_hash is the hash of the
-- workspace's previous record, and ws_idx the record's position in its
-- workspace's log (its leaf index), given at append time. SQLite has one
-- writer, so the heads serialize nothing more than it does; they keep the
-- two stores' chains and logs the same.
ALTER TABLE audit ADD COLUMN ws_idx INTEGER;
DROP TRIGGER audit_no_update;
UPDATE audit SET ws_idx = (SELECT COUNT(*) FROM audit AS b WHERE b.workspace = audit.workspace AND b.seq < audit.seq);
CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
BEGIN SELECT RAISE(ABORT, 'audit log is append-only'); END;
-- The unique index makes a fork (two records at one position) impossible
-- in the database itself.
CREATE UNIQUE INDEX audit_by_workspace_idx ON audit (workspace, ws_idx);

-- audit_ws_head is each workspace's chain head: its log's size (the next
-- record's ws_idx) and its last record's hash. Records written before
-- this migration keep their hashes (they chain globally) and are each
-- workspace's first records.
CREATE TABLE audit_ws_head (
	workspace TEXT PRIMARY KEY,
	size INTEGER NOT NULL,
	hash TEXT NOT NULL
) WITHOUT ROWID;
INSERT INTO audit_ws_head (workspace, size, hash)
	SELECT a.workspace, a.ws_idx + 1, a.hash FROM audit AS a
	WHERE a.seq = (SELECT MAX(b.seq) FROM audit AS b WHERE b.workspace = a.workspace);

-- chain_seq is the last seq of the global chain: records up to it are
-- verified as one chain, those after it per workspace. The server verifies
-- the global part before it integrates again (adopted goes back to 0 when
-- there is one) and records in each workspace's log that it did. The
-- watermark is gone: the integrator compares each workspace's head with
-- its tree.
ALTER TABLE tlog_meta ADD COLUMN chain_seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tlog_meta DROP COLUMN watermark;
UPDATE tlog_meta SET chain_seq = (SELECT COALESCE(MAX(seq), 0) FROM audit),
	adopted = adopted AND (SELECT COUNT(*) FROM audit) = 0;

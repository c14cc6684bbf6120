-- Per-workspace audit chains (issue 21); mirrors
-- sqlite/migrations/0014_audit_ws_chain.sql. Until now every record of
-- every workspace was one chain whose head was the one audit_head row,
-- locked FOR UPDATE by every append of every replica. From here each
-- workspace has its own head row, locked only by appends to that
-- workspace, and the global seq comes from a sequence, which takes no row
-- lock (its numbers may have gaps and commit out of order across
-- workspaces; within one workspace they follow the chain).
--
-- ws_idx is a record's position in its workspace's log, given at append
-- time under the workspace's head lock: it is the record's leaf index, so
-- the integrator reads a workspace's records in that order and never
-- orders records across workspaces. The unique index makes a fork (two
-- records at one position) impossible in the database itself.
ALTER TABLE audit ADD COLUMN ws_idx bigint;
ALTER TABLE audit DISABLE TRIGGER audit_no_update;
UPDATE audit SET ws_idx = x.i
	FROM (SELECT seq AS s, row_number() OVER (PARTITION BY workspace ORDER BY seq) - 1 AS i FROM audit) AS x
	WHERE x.s = audit.seq;
ALTER TABLE audit ENABLE TRIGGER audit_no_update;
ALTER TABLE audit ALTER COLUMN ws_idx SET NOT NULL;
CREATE UNIQUE INDEX audit_by_workspace_idx ON audit (workspace, ws_idx);

-- audit_ws_head is each workspace's chain head: its log's size (the next
-- record's ws_idx) and its last record's hash, the next record's
-- prev_hash. The records written before this migration keep their hashes
-- (they chain globally) and are each workspace's first records; a
-- workspace's chain continues from its own last one.
CREATE TABLE audit_ws_head (
	workspace text PRIMARY KEY,
	size bigint NOT NULL,
	hash text NOT NULL
);
INSERT INTO audit_ws_head (workspace, size, hash)
	SELECT DISTINCT ON (workspace) workspace, ws_idx + 1, hash FROM audit ORDER BY workspace, seq DESC;

CREATE SEQUENCE audit_seq_gen AS bigint;
SELECT setval('audit_seq_gen', COALESCE(MAX(seq), 0) + 1, false) FROM audit;
DROP TABLE audit_head;

-- chain_seq is the last seq of the global chain: records up to it are
-- verified as one chain, those after it per workspace. The server verifies
-- the global part before it integrates again (adopted goes back to false
-- when there is one) and records in each workspace's log that it did.
-- The watermark is gone: records of different workspaces commit out of
-- order, so the integrator compares each workspace's head with its tree.
ALTER TABLE tlog_meta ADD COLUMN chain_seq bigint NOT NULL DEFAULT 0;
ALTER TABLE tlog_meta DROP COLUMN watermark;
UPDATE tlog_meta SET chain_seq = x.m, adopted = adopted AND x.m = 0
	FROM (SELECT COALESCE(MAX(seq), 0) AS m FROM audit) AS x;

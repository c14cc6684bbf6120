-- Per-workspace transparency logs (issue 21); mirrors
-- sqlite/migrations/0012_tlog.sql. The integrator locks a workspace's
-- tlog_head row (FOR UPDATE) for the transaction that extends its tree,
-- so two replicas integrating at once build one tree.
CREATE TABLE tlog_head (
	workspace text PRIMARY KEY,
	size bigint NOT NULL,
	last_seq bigint NOT NULL
);

CREATE TABLE tlog_leaf (
	workspace text NOT NULL,
	idx bigint NOT NULL,
	seq bigint NOT NULL UNIQUE,
	PRIMARY KEY (workspace, idx)
);

CREATE TABLE tlog_hash (
	workspace text NOT NULL,
	idx bigint NOT NULL,
	hash bytea NOT NULL,
	PRIMARY KEY (workspace, idx)
);

CREATE TABLE tlog_checkpoint (
	workspace text NOT NULL,
	size bigint NOT NULL,
	root bytea NOT NULL,
	note text NOT NULL,
	at timestamptz NOT NULL,
	PRIMARY KEY (workspace, size)
);

CREATE TABLE tlog_meta (
	id boolean PRIMARY KEY DEFAULT true CHECK (id),
	legacy_seq bigint NOT NULL,
	adopted boolean NOT NULL,
	watermark bigint NOT NULL
);
INSERT INTO tlog_meta (id, legacy_seq, adopted, watermark)
	SELECT true, COALESCE(MAX(seq), 0), MAX(seq) IS NULL, 0 FROM audit;

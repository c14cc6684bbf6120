-- Approval requests and capability calls. The row's columns are what
-- queries filter on; doc holds the whole record as JSON.
CREATE TABLE approvals (
	seq          INTEGER PRIMARY KEY AUTOINCREMENT,
	id           TEXT NOT NULL UNIQUE,
	workspace    TEXT NOT NULL,
	capability   TEXT NOT NULL,
	status       TEXT NOT NULL,
	requested_by TEXT NOT NULL,
	dedupe_key   TEXT,
	doc          BLOB NOT NULL
);
CREATE INDEX approvals_by_workspace ON approvals (workspace, seq);
CREATE INDEX approvals_by_status ON approvals (workspace, status, seq);
CREATE UNIQUE INDEX approvals_dedupe ON approvals (workspace, capability, dedupe_key) WHERE dedupe_key IS NOT NULL;

CREATE TABLE calls (
	seq        INTEGER PRIMARY KEY AUTOINCREMENT,
	id         TEXT NOT NULL UNIQUE,
	workspace  TEXT NOT NULL,
	capability TEXT NOT NULL,
	status     TEXT NOT NULL,
	dedupe_key TEXT,
	doc        BLOB NOT NULL
);
CREATE UNIQUE INDEX calls_dedupe ON calls (workspace, capability, dedupe_key) WHERE dedupe_key IS NOT NULL;

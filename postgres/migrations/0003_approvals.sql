-- 0003_approvals: approval requests and capability calls; mirrors
-- sqlite/migrations/0003_approvals.sql. The row's columns are what queries
-- filter on; doc holds the whole record as JSON bytes.
CREATE TABLE approvals (
	seq          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id           text NOT NULL UNIQUE,
	workspace    text NOT NULL,
	capability   text NOT NULL,
	status       text NOT NULL,
	requested_by text NOT NULL,
	dedupe_key   text,
	doc          bytea NOT NULL
);
CREATE INDEX approvals_by_workspace ON approvals (workspace, seq);
CREATE INDEX approvals_by_status ON approvals (workspace, status, seq);
CREATE UNIQUE INDEX approvals_dedupe ON approvals (workspace, capability, dedupe_key) WHERE dedupe_key IS NOT NULL;

CREATE TABLE calls (
	seq        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id         text NOT NULL UNIQUE,
	workspace  text NOT NULL,
	capability text NOT NULL,
	status     text NOT NULL,
	dedupe_key text,
	doc        bytea NOT NULL
);
CREATE UNIQUE INDEX calls_dedupe ON calls (workspace, capability, dedupe_key) WHERE dedupe_key IS NOT NULL;

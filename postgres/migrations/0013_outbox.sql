-- The outbox (issue 20, DESIGN.md §8a); mirrors
-- sqlite/migrations/0013_outbox.sql. An event is inserted in the same
-- transaction as the change it reports, and delivered after commit. Every
-- replica fans out and claims with FOR UPDATE SKIP LOCKED, and a claimed
-- delivery carries a lease by the database's clock, so each event is
-- fanned out once and each delivery tried by one replica at a time.
CREATE TABLE outbox (
	seq bigserial PRIMARY KEY,
	id text NOT NULL UNIQUE,
	workspace text NOT NULL,
	type text NOT NULL,
	at timestamptz NOT NULL,
	fanned boolean NOT NULL DEFAULT false,
	doc bytea NOT NULL
);
CREATE INDEX outbox_new ON outbox (seq) WHERE NOT fanned;
CREATE TABLE deliveries (
	seq bigserial PRIMARY KEY,
	id text NOT NULL UNIQUE,
	event_seq bigint NOT NULL REFERENCES outbox (seq),
	event_id text NOT NULL,
	event_type text NOT NULL,
	workspace text NOT NULL,
	endpoint text NOT NULL,
	status text NOT NULL,
	attempts integer NOT NULL DEFAULT 0,
	next_at timestamptz NOT NULL,
	lease_until timestamptz,
	last_error text,
	last_status integer,
	created_at timestamptz NOT NULL,
	delivered_at timestamptz,
	UNIQUE (event_id, endpoint)
);
CREATE INDEX deliveries_due ON deliveries (endpoint, next_at) WHERE status = 'pending';
CREATE INDEX deliveries_workspace ON deliveries (workspace, seq);

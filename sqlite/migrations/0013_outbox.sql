-- The outbox (issue 20, DESIGN.md §8a): an event is inserted in the same
-- transaction as the change it reports, and delivered after commit. An
-- event is fanned out once into one delivery per endpoint that wants it;
-- each delivery is claimed under a lease, tried with backoff, and ends
-- delivered or dead. Times are fixed-width text that sorts as time.
CREATE TABLE outbox (
	seq INTEGER PRIMARY KEY AUTOINCREMENT,
	id TEXT NOT NULL UNIQUE,
	workspace TEXT NOT NULL,
	type TEXT NOT NULL,
	at TEXT NOT NULL,
	fanned INTEGER NOT NULL DEFAULT 0,
	doc BLOB NOT NULL
);
CREATE INDEX outbox_new ON outbox (seq) WHERE fanned = 0;
CREATE TABLE deliveries (
	seq INTEGER PRIMARY KEY AUTOINCREMENT,
	id TEXT NOT NULL UNIQUE,
	event_seq INTEGER NOT NULL REFERENCES outbox (seq),
	event_id TEXT NOT NULL,
	event_type TEXT NOT NULL,
	workspace TEXT NOT NULL,
	endpoint TEXT NOT NULL,
	status TEXT NOT NULL,
	attempts INTEGER NOT NULL DEFAULT 0,
	next_at TEXT NOT NULL,
	lease_until TEXT,
	last_error TEXT,
	last_status INTEGER,
	created_at TEXT NOT NULL,
	delivered_at TEXT,
	UNIQUE (event_id, endpoint)
);
CREATE INDEX deliveries_due ON deliveries (endpoint, next_at) WHERE status = 'pending';
CREATE INDEX deliveries_workspace ON deliveries (workspace, seq);

-- The readiness probe's rows, one per running Store (its NOTIFY origin), so
-- replicas probing at once never wait on each other's row lock: Ping
-- upserts its row through the group-commit writer, so a database that is
-- read-only, full or refuses ladder's role fails Ping as it fails every
-- other write. They hold no data; rows of stores gone for a day are deleted.
CREATE TABLE write_probe (
	origin text PRIMARY KEY,
	at     timestamptz NOT NULL
);

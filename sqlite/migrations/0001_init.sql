-- 0001_init: the whole schema of ladder's first release.
--
-- Times are TEXT in a fixed-width RFC 3339 form at microsecond precision,
-- UTC ("2026-08-24T09:00:00.000000Z"), so they sort as text and re-hash
-- byte for byte. A zero time is stored as ''.

CREATE TABLE keys (
	id          TEXT PRIMARY KEY,
	workspace   TEXT NOT NULL,
	kind        TEXT NOT NULL,
	name        TEXT NOT NULL DEFAULT '',
	secret_hash BLOB NOT NULL,
	created_at  TEXT NOT NULL,
	expires_at  TEXT,
	revoked_at  TEXT
);
CREATE INDEX keys_by_workspace ON keys (workspace, created_at);

-- The append-only, hash-chained audit log. data holds the exact canonical
-- JSON bytes the hash covers.
CREATE TABLE audit (
	seq       INTEGER PRIMARY KEY,
	workspace TEXT NOT NULL,
	actor     TEXT NOT NULL,
	kind      TEXT NOT NULL,
	subject   TEXT NOT NULL,
	at        TEXT NOT NULL,
	data      BLOB NOT NULL,
	prev_hash TEXT NOT NULL,
	hash      TEXT NOT NULL
);
CREATE INDEX audit_by_workspace ON audit (workspace, seq);
CREATE INDEX audit_by_kind ON audit (kind, seq);
-- The program never changes a record; these keep a bug from doing it. (A
-- person with the file can drop them; the hash chain is what catches that.)
CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
BEGIN SELECT RAISE(ABORT, 'audit log is append-only'); END;
CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit
BEGIN SELECT RAISE(ABORT, 'audit log is append-only'); END;

CREATE TABLE step_states (
	workspace          TEXT NOT NULL,
	queue              TEXT NOT NULL,
	step               TEXT NOT NULL,
	lane               TEXT NOT NULL,
	lane_since         TEXT NOT NULL,
	epoch              INTEGER NOT NULL,
	pinned             INTEGER NOT NULL,
	pin_reason         TEXT NOT NULL,
	audit_rate         REAL NOT NULL,
	last_sev1_at       TEXT NOT NULL,
	last_audit_fail_at TEXT NOT NULL,
	audit_rate_since   TEXT NOT NULL DEFAULT '',
	version            INTEGER NOT NULL,
	PRIMARY KEY (workspace, queue, step)
);

-- One route per item and step: route_item is idempotent.
CREATE TABLE routes (
	id         TEXT PRIMARY KEY,
	workspace  TEXT NOT NULL,
	queue      TEXT NOT NULL,
	step       TEXT NOT NULL,
	item       TEXT NOT NULL,
	decision   TEXT NOT NULL,
	lane       TEXT NOT NULL,
	audit      INTEGER NOT NULL,
	audit_rate REAL NOT NULL,
	reason     TEXT NOT NULL,
	features   BLOB,
	key_id     TEXT NOT NULL,
	at         TEXT NOT NULL,
	UNIQUE (workspace, queue, step, item)
);

-- Reviews. iso_week and epoch say which aggregate row the review was added
-- to, and counted whether it still is (an adjudication replaces it), so an
-- adjudication can subtract exactly what was added. route_id has no foreign
-- key: imported history may carry reviews of routes older than the database.
CREATE TABLE reviews (
	id             TEXT PRIMARY KEY,
	route_id       TEXT NOT NULL,
	workspace      TEXT NOT NULL,
	queue          TEXT NOT NULL,
	step           TEXT NOT NULL,
	item           TEXT NOT NULL,
	kind           TEXT NOT NULL,
	verdict        TEXT NOT NULL,
	correction     BLOB,
	severity       INTEGER NOT NULL,
	operator_error INTEGER,
	note           TEXT NOT NULL,
	adjudication   INTEGER NOT NULL,
	reviewer       TEXT NOT NULL,
	at             TEXT NOT NULL,
	iso_week       TEXT NOT NULL,
	epoch          INTEGER NOT NULL,
	counted        INTEGER NOT NULL
);
-- At most one first review per route; adjudications may follow.
CREATE UNIQUE INDEX reviews_first_per_route ON reviews (route_id) WHERE adjudication = 0;
CREATE INDEX reviews_by_route ON reviews (route_id, counted);
CREATE INDEX reviews_by_step ON reviews (workspace, queue, step, at);
CREATE INDEX reviews_by_step_verdict ON reviews (workspace, queue, step, verdict, at);
CREATE INDEX reviews_by_step_kind ON reviews (workspace, queue, step, kind, at);

-- Weekly aggregates per step and epoch: an evidence pack costs O(weeks).
CREATE TABLE week_aggs (
	workspace        TEXT NOT NULL,
	queue            TEXT NOT NULL,
	step             TEXT NOT NULL,
	iso_week         TEXT NOT NULL,
	epoch            INTEGER NOT NULL,
	week_start       TEXT NOT NULL,
	n                INTEGER NOT NULL,
	agreements       INTEGER NOT NULL,
	audit_n          INTEGER NOT NULL,
	audit_agreements INTEGER NOT NULL,
	sev1             INTEGER NOT NULL,
	op_n             INTEGER NOT NULL,
	op_errors        INTEGER NOT NULL,
	PRIMARY KEY (workspace, queue, step, iso_week, epoch)
);

CREATE TABLE lane_changes (
	id        TEXT PRIMARY KEY,
	workspace TEXT NOT NULL,
	queue     TEXT NOT NULL,
	step      TEXT NOT NULL,
	at        TEXT NOT NULL,
	from_lane TEXT NOT NULL,
	to_lane   TEXT NOT NULL,
	rule      TEXT NOT NULL,
	numbers   TEXT NOT NULL,
	actor     TEXT NOT NULL,
	reason    TEXT NOT NULL
);
CREATE INDEX lane_changes_by_step ON lane_changes (workspace, queue, step, at);

CREATE TABLE outcomes (
	id         TEXT PRIMARY KEY,
	workspace  TEXT NOT NULL,
	queue      TEXT NOT NULL,
	step       TEXT NOT NULL,
	item       TEXT NOT NULL,
	handled_by TEXT NOT NULL,
	ok         INTEGER NOT NULL,
	at         TEXT NOT NULL
);
CREATE INDEX outcomes_by_step ON outcomes (workspace, queue, step);

-- Running outcome counts per step and handler, kept in the transaction that
-- stores each outcome, so the outcome test does not scan outcomes.
CREATE TABLE outcome_counts (
	workspace  TEXT NOT NULL,
	queue      TEXT NOT NULL,
	step       TEXT NOT NULL,
	handled_by TEXT NOT NULL,
	n          INTEGER NOT NULL,
	failures   INTEGER NOT NULL,
	PRIMARY KEY (workspace, queue, step, handled_by)
);

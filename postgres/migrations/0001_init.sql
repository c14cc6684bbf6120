-- 0001_init: the whole schema of ladder's first release, for PostgreSQL.
--
-- It mirrors sqlite/migrations/0001_init.sql table for table. The
-- differences are PostgreSQL's: times are timestamptz (the store writes
-- them in UTC at microsecond precision, which is timestamptz's own
-- precision), and a time that may be unset is NULL rather than ''; flags
-- are boolean; JSON the store must give back byte for byte (audit data,
-- route features, review corrections) is bytea, never jsonb, which would
-- reorder keys and change the bytes the audit hash covers; the rowid order
-- SQLite gives for free is an identity column "ord"; and audit_head holds
-- the chain's head in one row that every appending transaction locks, so
-- replicas on one database append one chain.

CREATE TABLE keys (
	ord         bigint GENERATED ALWAYS AS IDENTITY,
	id          text PRIMARY KEY,
	workspace   text NOT NULL,
	kind        text NOT NULL,
	name        text NOT NULL DEFAULT '',
	secret_hash bytea NOT NULL,
	created_at  timestamptz NOT NULL,
	expires_at  timestamptz,
	revoked_at  timestamptz
);
CREATE INDEX keys_by_workspace ON keys (workspace, created_at, ord);

-- The append-only, hash-chained audit log. data holds the exact canonical
-- JSON bytes the hash covers.
CREATE TABLE audit (
	seq       bigint PRIMARY KEY,
	workspace text NOT NULL,
	actor     text NOT NULL,
	kind      text NOT NULL,
	subject   text NOT NULL,
	at        timestamptz NOT NULL,
	data      bytea NOT NULL,
	prev_hash text NOT NULL,
	hash      text NOT NULL
);
CREATE INDEX audit_by_workspace ON audit (workspace, seq);
CREATE INDEX audit_by_kind ON audit (kind, seq);

-- The chain's head: the last record's seq and hash. A transaction that
-- appends locks this row (SELECT ... FOR UPDATE) just before it inserts its
-- records and holds it to its commit, so appends from every replica are
-- serialized in the database and the chain never forks.
CREATE TABLE audit_head (
	id   boolean PRIMARY KEY DEFAULT true CHECK (id),
	seq  bigint NOT NULL,
	hash text NOT NULL
);
INSERT INTO audit_head (id, seq, hash) VALUES (true, 0, '');

-- The program never changes a record; these keep a bug from doing it. (A
-- superuser can disable them; the hash chain is what catches that.)
CREATE FUNCTION audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'audit log is append-only' USING ERRCODE = 'integrity_constraint_violation';
END;
$$;
CREATE TRIGGER audit_no_update BEFORE UPDATE OR DELETE ON audit
	FOR EACH ROW EXECUTE FUNCTION audit_append_only();
CREATE TRIGGER audit_no_truncate BEFORE TRUNCATE ON audit
	FOR EACH STATEMENT EXECUTE FUNCTION audit_append_only();

CREATE TABLE step_states (
	ord                bigint GENERATED ALWAYS AS IDENTITY,
	workspace          text NOT NULL,
	queue              text NOT NULL,
	step               text NOT NULL,
	lane               text NOT NULL,
	lane_since         timestamptz,
	epoch              integer NOT NULL,
	pinned             boolean NOT NULL,
	pin_reason         text NOT NULL,
	audit_rate         double precision NOT NULL,
	last_sev1_at       timestamptz,
	last_audit_fail_at timestamptz,
	audit_rate_since   timestamptz,
	version            bigint NOT NULL,
	PRIMARY KEY (workspace, queue, step)
);

-- One route per item and step: route_item is idempotent.
CREATE TABLE routes (
	id         text PRIMARY KEY,
	workspace  text NOT NULL,
	queue      text NOT NULL,
	step       text NOT NULL,
	item       text NOT NULL,
	decision   text NOT NULL,
	lane       text NOT NULL,
	audit      boolean NOT NULL,
	audit_rate double precision NOT NULL,
	reason     text NOT NULL,
	features   bytea,
	key_id     text NOT NULL,
	at         timestamptz NOT NULL,
	UNIQUE (workspace, queue, step, item)
);

-- Reviews. iso_week and epoch say which aggregate row the review was added
-- to, and counted whether it still is (an adjudication replaces it), so an
-- adjudication can subtract exactly what was added. route_id has no foreign
-- key: imported history may carry reviews of routes older than the database.
CREATE TABLE reviews (
	ord            bigint GENERATED ALWAYS AS IDENTITY,
	id             text PRIMARY KEY,
	route_id       text NOT NULL,
	workspace      text NOT NULL,
	queue          text NOT NULL,
	step           text NOT NULL,
	item           text NOT NULL,
	kind           text NOT NULL,
	verdict        text NOT NULL,
	correction     bytea,
	severity       integer NOT NULL,
	operator_error boolean,
	note           text NOT NULL,
	adjudication   boolean NOT NULL,
	reviewer       text NOT NULL,
	at             timestamptz NOT NULL,
	iso_week       text COLLATE "C" NOT NULL,
	epoch          integer NOT NULL,
	counted        boolean NOT NULL
);
-- At most one first review per route; adjudications may follow.
CREATE UNIQUE INDEX reviews_first_per_route ON reviews (route_id) WHERE NOT adjudication;
CREATE INDEX reviews_by_route ON reviews (route_id) WHERE counted;
CREATE INDEX reviews_by_step ON reviews (workspace, queue, step, at, ord);
CREATE INDEX reviews_by_step_verdict ON reviews (workspace, queue, step, verdict, at, ord);
CREATE INDEX reviews_by_step_kind ON reviews (workspace, queue, step, kind, at, ord);

-- Weekly aggregates per step and epoch: an evidence pack costs O(weeks).
CREATE TABLE week_aggs (
	workspace        text NOT NULL,
	queue            text NOT NULL,
	step             text NOT NULL,
	iso_week         text COLLATE "C" NOT NULL,
	epoch            integer NOT NULL,
	week_start       timestamptz NOT NULL,
	n                integer NOT NULL,
	agreements       integer NOT NULL,
	audit_n          integer NOT NULL,
	audit_agreements integer NOT NULL,
	sev1             integer NOT NULL,
	op_n             integer NOT NULL,
	op_errors        integer NOT NULL,
	PRIMARY KEY (workspace, queue, step, iso_week, epoch)
);

CREATE TABLE lane_changes (
	ord       bigint GENERATED ALWAYS AS IDENTITY,
	id        text PRIMARY KEY,
	workspace text NOT NULL,
	queue     text NOT NULL,
	step      text NOT NULL,
	at        timestamptz NOT NULL,
	from_lane text NOT NULL,
	to_lane   text NOT NULL,
	rule      text NOT NULL,
	numbers   text NOT NULL,
	actor     text NOT NULL,
	reason    text NOT NULL
);
CREATE INDEX lane_changes_by_step ON lane_changes (workspace, queue, step, at, ord);

CREATE TABLE outcomes (
	id         text PRIMARY KEY,
	workspace  text NOT NULL,
	queue      text NOT NULL,
	step       text NOT NULL,
	item       text NOT NULL,
	handled_by text NOT NULL,
	ok         boolean NOT NULL,
	at         timestamptz NOT NULL
);
CREATE INDEX outcomes_by_step ON outcomes (workspace, queue, step);

-- Running outcome counts per step and handler, kept in the transaction that
-- stores each outcome, so the outcome test does not scan outcomes.
CREATE TABLE outcome_counts (
	workspace  text NOT NULL,
	queue      text NOT NULL,
	step       text NOT NULL,
	handled_by text NOT NULL,
	n          integer NOT NULL,
	failures   integer NOT NULL,
	PRIMARY KEY (workspace, queue, step, handled_by)
);

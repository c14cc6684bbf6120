-- 0002_gate: the evidence gate's decisions (authorize calls), kept for
-- gate_history_get. It mirrors sqlite/migrations/0002_gate.sql. seq orders
-- the decisions and is what history pages by; a row is written in the same
-- transaction as its gate.decision audit record. evidence holds canonical
-- JSON with secrets already redacted (bytea, so the bytes are kept).

CREATE TABLE gate_decisions (
	seq             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id              text NOT NULL UNIQUE,
	workspace       text NOT NULL,
	key_id          text NOT NULL,
	case_id         text NOT NULL,
	precondition_fn text NOT NULL,
	action_id       text NOT NULL,
	gate_state      text NOT NULL,
	reason_code     text NOT NULL,
	r               double precision NOT NULL,
	c               double precision NOT NULL,
	o               double precision NOT NULL,
	ro              double precision NOT NULL,
	q               double precision NOT NULL,
	repair_attempts integer NOT NULL,
	verifiable_ext  boolean NOT NULL,
	human_readable  text NOT NULL,
	notes           text NOT NULL,
	evidence        bytea,
	at              timestamptz NOT NULL
);
CREATE INDEX gate_decisions_by_workspace ON gate_decisions (workspace, seq);
CREATE INDEX gate_decisions_by_case ON gate_decisions (workspace, case_id, seq);
CREATE INDEX gate_decisions_by_action ON gate_decisions (workspace, action_id, seq);

CREATE FUNCTION gate_decisions_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'gate decisions are append-only' USING ERRCODE = 'integrity_constraint_violation';
END;
$$;
CREATE TRIGGER gate_decisions_no_update BEFORE UPDATE OR DELETE ON gate_decisions
	FOR EACH ROW EXECUTE FUNCTION gate_decisions_append_only();

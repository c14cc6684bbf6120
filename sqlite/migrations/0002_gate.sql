-- 0002_gate: the evidence gate's decisions (authorize calls), kept for
-- gate_history_get. seq orders them and is what history pages by; a row is
-- written in the same transaction as its gate.decision audit record.
-- evidence holds canonical JSON with secrets already redacted.

CREATE TABLE gate_decisions (
	seq             INTEGER PRIMARY KEY AUTOINCREMENT,
	id              TEXT NOT NULL UNIQUE,
	workspace       TEXT NOT NULL,
	key_id          TEXT NOT NULL,
	case_id         TEXT NOT NULL,
	precondition_fn TEXT NOT NULL,
	action_id       TEXT NOT NULL,
	gate_state      TEXT NOT NULL,
	reason_code     TEXT NOT NULL,
	r               REAL NOT NULL,
	c               REAL NOT NULL,
	o               REAL NOT NULL,
	ro              REAL NOT NULL,
	q               REAL NOT NULL,
	repair_attempts INTEGER NOT NULL,
	verifiable_ext  INTEGER NOT NULL,
	human_readable  TEXT NOT NULL,
	notes           TEXT NOT NULL,
	evidence        BLOB,
	at              TEXT NOT NULL
);
CREATE INDEX gate_decisions_by_workspace ON gate_decisions (workspace, seq);
CREATE INDEX gate_decisions_by_case ON gate_decisions (workspace, case_id, seq);
CREATE INDEX gate_decisions_by_action ON gate_decisions (workspace, action_id, seq);
CREATE TRIGGER gate_decisions_no_update BEFORE UPDATE ON gate_decisions
BEGIN SELECT RAISE(ABORT, 'gate decisions are append-only'); END;
CREATE TRIGGER gate_decisions_no_delete BEFORE DELETE ON gate_decisions
BEGIN SELECT RAISE(ABORT, 'gate decisions are append-only'); END;

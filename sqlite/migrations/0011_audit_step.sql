-- The audit trail as people query it (issue 17): by actor, step and time
-- within a workspace, newest first. queue and step are the top-level
-- "queue" and "step" string fields of the record's data
-- (ladder.AuditStepOf), written beside the record on append so the step
-- filter is an index lookup, not a scan parsing every record's JSON. They
-- are derived from the hashed data, so the hash needs not cover them.
ALTER TABLE audit ADD COLUMN queue TEXT NOT NULL DEFAULT '';
ALTER TABLE audit ADD COLUMN step TEXT NOT NULL DEFAULT '';

-- Backfill the records written before this migration. The append-only
-- trigger is lifted for this one statement, inside the migration's
-- transaction, and put back as it was.
DROP TRIGGER audit_no_update;
UPDATE audit SET
	queue = CASE WHEN json_type(CAST(data AS TEXT), '$.queue') = 'text' THEN json_extract(CAST(data AS TEXT), '$.queue') ELSE '' END,
	step  = CASE WHEN json_type(CAST(data AS TEXT), '$.step') = 'text' THEN json_extract(CAST(data AS TEXT), '$.step') ELSE '' END
	WHERE json_valid(CAST(data AS TEXT)) AND json_type(CAST(data AS TEXT)) = 'object';
CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
BEGIN SELECT RAISE(ABORT, 'audit log is append-only'); END;

-- An index for each filter people narrow by most, kind and step, each
-- ending in seq so a page newest first (seq < cursor ORDER BY seq DESC)
-- reads only its rows. Actor and time filters walk the workspace's own
-- index (workspace, seq) instead: every index here is paid on every append
-- (each governed call appends), and two more cost about 15% of a route's
-- time (BENCHMARKS.md, issue 16's before and after).
CREATE INDEX audit_by_workspace_kind ON audit (workspace, kind, seq);
CREATE INDEX audit_by_workspace_step ON audit (workspace, step, queue, seq);

-- The audit trail as people query it (issue 17); mirrors
-- sqlite/migrations/0011_audit_step.sql. queue and step are the top-level
-- "queue" and "step" string fields of the record's data
-- (ladder.AuditStepOf), written beside the record on append so the step
-- filter is an index lookup. They are derived from the hashed data, so the
-- hash needs not cover them.
ALTER TABLE audit ADD COLUMN queue text NOT NULL DEFAULT '';
ALTER TABLE audit ADD COLUMN step text NOT NULL DEFAULT '';

-- Backfill the records written before this migration, with the
-- append-only trigger lifted inside the migration's transaction only.
ALTER TABLE audit DISABLE TRIGGER audit_no_update;
UPDATE audit SET
	queue = CASE WHEN jsonb_typeof(j -> 'queue') = 'string' THEN j ->> 'queue' ELSE '' END,
	step  = CASE WHEN jsonb_typeof(j -> 'step') = 'string' THEN j ->> 'step' ELSE '' END
	FROM (SELECT seq AS s, convert_from(data, 'UTF8')::jsonb AS j FROM audit) AS x
	WHERE x.s = audit.seq AND jsonb_typeof(x.j) = 'object';
ALTER TABLE audit ENABLE TRIGGER audit_no_update;

-- An index for each filter people narrow by most, kind and step, each
-- ending in seq so a page newest first (seq < cursor ORDER BY seq DESC)
-- reads only its rows. Actor and time filters walk the workspace's own
-- index (workspace, seq) instead: every index here is paid on every append
-- (each governed call appends), and two more cost about 15% of a route's
-- time (BENCHMARKS.md, issue 16's before and after).
CREATE INDEX audit_by_workspace_kind ON audit (workspace, kind, seq);
CREATE INDEX audit_by_workspace_step ON audit (workspace, step, queue, seq);

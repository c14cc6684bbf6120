-- The step index holds only the records that name a step; mirrors
-- postgres/migrations/0016_audit_step_partial.sql. Only ListAudit's step
-- filter reads audit_by_workspace_step, and it never looks for step '',
-- yet every record paid an entry: most records name no step (capability
-- calls not tied to one, results, keys, tool definitions, approvals), and
-- each index costs every group commit at least one leaf page, more when a
-- leaf splits (BENCHMARKS.md, "The step index holds only records that name
-- a step"). A queue filter without a step never used this index (queue is
-- its third column), so it reads as it did.
--
-- SQLite uses a partial index only when the query's WHERE contains the
-- index's WHERE term, so ListAudit adds the literal step <> '' to every
-- step filter. The name stays: it is the same index over fewer rows.
DROP INDEX audit_by_workspace_step;
CREATE INDEX audit_by_workspace_step ON audit (workspace, step, queue, seq) WHERE step <> '';

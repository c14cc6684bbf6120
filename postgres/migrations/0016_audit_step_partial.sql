-- The step index holds only the records that name a step; mirrors
-- sqlite/migrations/0016_audit_step_partial.sql. Only ListAudit's step
-- filter reads audit_by_workspace_step, and it never looks for step '',
-- yet every record paid an entry: most records name no step (capability
-- calls not tied to one, results, keys, tool definitions, approvals), and
-- each index entry is written, and WAL-logged, on every append. A queue
-- filter without a step never used this index (queue is its third
-- column), so it reads as it did.
--
-- The planner uses a partial index only when it can prove the query's
-- WHERE implies the index's; with step = $1 in a generic plan it cannot,
-- so ListAudit adds the literal step <> '' to every step filter. The name
-- stays: it is the same index over fewer rows. The build runs in the
-- migration's transaction (CREATE INDEX CONCURRENTLY cannot), so appends
-- wait for one read of the audit table at the upgrade.
DROP INDEX audit_by_workspace_step;
CREATE INDEX audit_by_workspace_step ON audit (workspace, step, queue, seq) WHERE step <> '';

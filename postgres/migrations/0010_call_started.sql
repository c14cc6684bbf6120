-- A call's start by the database's clock (issue 15); mirrors
-- sqlite/migrations/0010_call_started.sql. A call left running by a replica
-- that stopped between its start and its result is found once it has run
-- longer than its executor's timeout plus a margin, by the one clock every
-- replica shares, and marked unknown. The default stamps calls begun by a
-- replica that predates this column too, during a rolling upgrade. Calls
-- running at the upgrade take their start from their doc.
ALTER TABLE calls ADD COLUMN started_at timestamptz;
ALTER TABLE calls ALTER COLUMN started_at SET DEFAULT clock_timestamp();
UPDATE calls SET started_at = coalesce(NULLIF((convert_from(doc, 'UTF8')::jsonb ->> 'started_at')::timestamptz, '0001-01-01T00:00:00Z'), clock_timestamp())
	WHERE status = 'running';
-- The sweep walks running calls only, in seq order.
CREATE INDEX calls_running ON calls (seq) WHERE status = 'running';

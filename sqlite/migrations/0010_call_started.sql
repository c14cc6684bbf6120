-- A call's start by the store's clock (issue 15), so a call left running by
-- a process that stopped between its start and its result can be found
-- once it has run longer than its executor's timeout plus a margin, and
-- marked unknown. The fixed-width text sorts as time (timeLayout). Calls
-- running at the upgrade take their start from their doc (the upgrade's
-- time when it has none).
ALTER TABLE calls ADD COLUMN started_at TEXT;
UPDATE calls SET started_at = CASE
		WHEN x.j IS NULL OR x.j LIKE '0001-01-01T%' THEN strftime('%Y-%m-%dT%H:%M:%S', 'now') || '.000000Z'
		ELSE substr(x.j, 1, 19) || '.' ||
			substr(CASE WHEN substr(x.j, 20, 1) = '.' THEN substr(x.j, 21, length(x.j) - 21) ELSE '' END || '000000', 1, 6) || 'Z'
	END
	FROM (SELECT seq, json_extract(CAST(doc AS TEXT), '$.started_at') AS j FROM calls WHERE status = 'running') AS x
	WHERE x.seq = calls.seq;
-- The sweep walks running calls only, in seq order.
CREATE INDEX calls_running ON calls (seq) WHERE status = 'running';

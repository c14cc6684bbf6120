-- tlog_leaf goes; mirrors sqlite/migrations/0018_tlog_leaf.sql. Since
-- migration 0014 a leaf's index is its record's position in its
-- workspace's log (audit.ws_idx, unique per workspace), and the tree's
-- size (tlog_head) says which positions are leaves, so the table held each
-- record's position a second time, in two more indexes written for every
-- record the integrator adds (BENCHMARKS.md, "Issue 22 (session 9)").
--
-- The table is dropped only if it agrees with the positions: a database
-- where it does not was changed outside ladder, and the migration stops
-- with the first record that disagrees (restore the database from a
-- backup, or run `ladder audit verify` to find the first record that does
-- not chain).
DO $$
DECLARE
	bad record;
BEGIN
	SELECT l.workspace, l.idx, l.seq, a.workspace AS record_workspace, a.ws_idx INTO bad
	FROM tlog_leaf AS l LEFT JOIN audit AS a ON a.seq = l.seq
	WHERE a.seq IS NULL OR a.workspace <> l.workspace OR a.ws_idx IS DISTINCT FROM l.idx
	ORDER BY l.seq LIMIT 1;
	IF FOUND THEN
		RAISE EXCEPTION 'tlog_leaf disagrees with the audit records: leaf % of workspace % is record %, which is at position % of workspace %; the database was changed outside ladder: restore it from a backup, or run ladder audit verify to find the first record that does not chain',
			bad.idx, bad.workspace, bad.seq, bad.ws_idx, bad.record_workspace;
	END IF;
END
$$;
DROP TABLE tlog_leaf;

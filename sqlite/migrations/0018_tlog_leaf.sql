-- tlog_leaf goes; mirrors postgres/migrations/0018_tlog_leaf.sql. Since
-- migration 0014 a leaf's index is its record's position in its
-- workspace's log (audit.ws_idx, unique per workspace), and the tree's
-- size (tlog_head) says which positions are leaves, so the table held each
-- record's position a second time, in two more b-trees written for every
-- record the integrator adds (BENCHMARKS.md, "Issue 22 (session 9)").
--
-- The table is dropped only if it agrees with the positions: a database
-- where it does not was changed outside ladder, and the migration stops
-- and says so (a temporary trigger is how SQLite's SQL can refuse with a
-- message of its own).
CREATE TEMP TABLE tlog_leaf_check (disagreeing INTEGER NOT NULL);
CREATE TEMP TRIGGER tlog_leaf_check_refuses BEFORE INSERT ON tlog_leaf_check WHEN NEW.disagreeing > 0
BEGIN
	SELECT RAISE(ABORT, 'tlog_leaf disagrees with the audit records'' positions: the database was changed outside ladder; restore it from a backup, or run ladder audit verify to find the first record that does not chain');
END;
INSERT INTO tlog_leaf_check
	SELECT COUNT(*) FROM tlog_leaf AS l LEFT JOIN audit AS a ON a.seq = l.seq
	WHERE a.seq IS NULL OR a.workspace <> l.workspace OR a.ws_idx IS NOT l.idx;
DROP TABLE tlog_leaf_check;
DROP TABLE tlog_leaf;

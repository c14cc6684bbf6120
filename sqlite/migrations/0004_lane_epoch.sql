-- Lane epochs (DESIGN.md §4): every lane change starts one, and a route is
-- permission only inside the epoch it was made in. A step's lane epoch is
-- the number of lane changes recorded for it, and so is, for a route made
-- before this migration, the number recorded at or before its time.
ALTER TABLE step_states ADD COLUMN lane_epoch INTEGER NOT NULL DEFAULT 0;
UPDATE step_states SET lane_epoch = (SELECT COUNT(*) FROM lane_changes c
	WHERE c.workspace = step_states.workspace AND c.queue = step_states.queue AND c.step = step_states.step);

-- SQLite cannot change a UNIQUE constraint in place: the table is rebuilt
-- with one route per item, step and lane epoch.
CREATE TABLE routes_by_epoch (
	id         TEXT PRIMARY KEY,
	workspace  TEXT NOT NULL,
	queue      TEXT NOT NULL,
	step       TEXT NOT NULL,
	item       TEXT NOT NULL,
	decision   TEXT NOT NULL,
	lane       TEXT NOT NULL,
	audit      INTEGER NOT NULL,
	audit_rate REAL NOT NULL,
	reason     TEXT NOT NULL,
	features   BLOB,
	key_id     TEXT NOT NULL,
	at         TEXT NOT NULL,
	lane_epoch INTEGER NOT NULL,
	UNIQUE (workspace, queue, step, item, lane_epoch)
);
INSERT INTO routes_by_epoch (id, workspace, queue, step, item, decision, lane, audit, audit_rate, reason, features, key_id, at, lane_epoch)
	SELECT r.id, r.workspace, r.queue, r.step, r.item, r.decision, r.lane, r.audit, r.audit_rate, r.reason, r.features, r.key_id, r.at,
		(SELECT COUNT(*) FROM lane_changes c WHERE c.workspace = r.workspace AND c.queue = r.queue AND c.step = r.step AND c.at <= r.at)
	FROM routes r;
DROP TABLE routes;
ALTER TABLE routes_by_epoch RENAME TO routes;

-- Lane epochs (DESIGN.md §4): every lane change starts one, and a route is
-- permission only inside the epoch it was made in. A step's lane epoch is
-- the number of lane changes recorded for it, and so is, for a route made
-- before this migration, the number recorded at or before its time.
ALTER TABLE step_states ADD COLUMN lane_epoch integer NOT NULL DEFAULT 0;
UPDATE step_states s SET lane_epoch = (SELECT count(*) FROM lane_changes c
	WHERE c.workspace = s.workspace AND c.queue = s.queue AND c.step = s.step);

ALTER TABLE routes ADD COLUMN lane_epoch integer NOT NULL DEFAULT 0;
UPDATE routes r SET lane_epoch = (SELECT count(*) FROM lane_changes c
	WHERE c.workspace = r.workspace AND c.queue = r.queue AND c.step = r.step AND c.at <= r.at);
ALTER TABLE routes DROP CONSTRAINT routes_workspace_queue_step_item_key;
ALTER TABLE routes ADD CONSTRAINT routes_item_epoch UNIQUE (workspace, queue, step, item, lane_epoch);

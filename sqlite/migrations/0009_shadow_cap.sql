-- The cap on shadow proposals (issue 15): a key keeps at most
-- server.max_shadow_proposals shadow proposals of one step whose route no
-- review names yet. open_shadow is "queue/step" while a shadow proposal's
-- route is unreviewed and NULL otherwise (every other approval too), so the
-- cap counts only open rows through a small partial index, however many
-- reviewed ones pile up behind them; a review clears the rows of its route
-- by route_id. Both are filled from each record's doc.
ALTER TABLE approvals ADD COLUMN route_id TEXT;
ALTER TABLE approvals ADD COLUMN open_shadow TEXT;
UPDATE approvals SET route_id = NULLIF(json_extract(CAST(doc AS TEXT), '$.route_id'), '');
UPDATE approvals SET open_shadow = coalesce(json_extract(CAST(doc AS TEXT), '$.queue'), '') || '/' || json_extract(CAST(doc AS TEXT), '$.step')
	WHERE status = 'shadow' AND route_id IS NOT NULL
		AND NOT EXISTS (SELECT 1 FROM reviews r WHERE r.route_id = approvals.route_id);
CREATE INDEX approvals_open_shadow ON approvals (workspace, requested_by, open_shadow) WHERE open_shadow IS NOT NULL;
CREATE INDEX approvals_open_shadow_by_route ON approvals (route_id) WHERE open_shadow IS NOT NULL;

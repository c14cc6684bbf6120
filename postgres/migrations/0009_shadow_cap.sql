-- The cap on shadow proposals (issue 15); mirrors
-- sqlite/migrations/0009_shadow_cap.sql. open_shadow is "queue/step" while
-- a shadow proposal's route is unreviewed and NULL otherwise, so the cap
-- counts only open rows through a small partial index; a review clears
-- the rows of its route by route_id. Both are filled from each record's
-- doc.
ALTER TABLE approvals ADD COLUMN route_id text;
ALTER TABLE approvals ADD COLUMN open_shadow text;
UPDATE approvals SET route_id = NULLIF(convert_from(doc, 'UTF8')::jsonb ->> 'route_id', '');
UPDATE approvals SET open_shadow = coalesce(convert_from(doc, 'UTF8')::jsonb ->> 'queue', '') || '/' || (convert_from(doc, 'UTF8')::jsonb ->> 'step')
	WHERE status = 'shadow' AND route_id IS NOT NULL
		AND NOT EXISTS (SELECT 1 FROM reviews r WHERE r.route_id = approvals.route_id);
CREATE INDEX approvals_open_shadow ON approvals (workspace, requested_by, open_shadow) WHERE open_shadow IS NOT NULL;
CREATE INDEX approvals_open_shadow_by_route ON approvals (route_id) WHERE open_shadow IS NOT NULL;

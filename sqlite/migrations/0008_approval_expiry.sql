-- Approval deadlines (issue 15): the deadline is a column, so the store's
-- clock decides expiry inside the one writer's transaction: a decision
-- commits only before it, and a read past it stores the expiry first. The
-- fixed-width text sorts as time (timeLayout); NULL never expires (a
-- shadow record). The column is filled from each record's doc.
ALTER TABLE approvals ADD COLUMN expires_at TEXT;
UPDATE approvals SET expires_at = CASE
		WHEN x.j IS NULL OR x.j LIKE '0001-01-01T%' THEN NULL
		ELSE substr(x.j, 1, 19) || '.' ||
			substr(CASE WHEN substr(x.j, 20, 1) = '.' THEN substr(x.j, 21, length(x.j) - 21) ELSE '' END || '000000', 1, 6) || 'Z'
	END
	FROM (SELECT seq, json_extract(CAST(doc AS TEXT), '$.expires_at') AS j FROM approvals) AS x
	WHERE x.seq = approvals.seq;
-- The per-key cap on pending approvals counts through this.
CREATE INDEX approvals_pending_by_key ON approvals (workspace, requested_by) WHERE status = 'pending';

-- Approval deadlines (issue 15); mirrors
-- sqlite/migrations/0009_approval_expiry.sql. The deadline is a column, so
-- the database's clock decides expiry for every replica: a decision
-- commits only before it, and a read past it stores the expiry first. NULL
-- never expires (a shadow record). The column is filled from each record's
-- doc.
ALTER TABLE approvals ADD COLUMN expires_at timestamptz;
UPDATE approvals SET expires_at = NULLIF((convert_from(doc, 'UTF8')::jsonb ->> 'expires_at')::timestamptz, '0001-01-01T00:00:00Z');
-- The per-key cap on pending approvals counts through this.
CREATE INDEX approvals_pending_by_key ON approvals (workspace, requested_by) WHERE status = 'pending';

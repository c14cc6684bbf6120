-- audit_by_kind goes; mirrors postgres/migrations/0017_audit_kind_index.sql.
-- Its one reader was a kind filter across every workspace (an admin's
-- listing or export), yet every record paid an entry in it, and each index
-- costs every group commit at least one WAL page (BENCHMARKS.md, "What two
-- audit indexes cost a record"). ListAudit now answers that filter from
-- audit_by_workspace_kind, one workspace at a time, the workspaces being
-- audit_ws_head's rows, in one statement.
DROP INDEX audit_by_kind;

-- audit_by_kind goes; mirrors sqlite/migrations/0017_audit_kind_index.sql.
-- Its one reader was a kind filter across every workspace (an admin's
-- listing or export), yet every record paid an entry in it, written and
-- WAL-logged on every append (BENCHMARKS.md, "What two audit indexes cost
-- a record"). ListAudit now answers that filter from
-- audit_by_workspace_kind, one workspace at a time through a LATERAL join
-- over audit_ws_head's rows, in one statement.
DROP INDEX audit_by_kind;

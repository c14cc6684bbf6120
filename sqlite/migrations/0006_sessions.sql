-- Console sessions, kept in the database so that signing out, revoking the
-- key and expiry end a session on every process at once. id_hash is the
-- SHA-256 of the session id; the id itself lives only in the person's
-- cookie, so a copy of the database signs no one in.
CREATE TABLE sessions (
	id_hash    BLOB PRIMARY KEY,
	key_id     TEXT NOT NULL,
	workspace  TEXT NOT NULL,
	created_at TEXT NOT NULL,
	expires_at TEXT NOT NULL,
	revoked_at TEXT
);
-- Revoking a key ends its sessions; the sweep deletes expired ones.
CREATE INDEX sessions_by_key ON sessions (key_id);
CREATE INDEX sessions_by_expiry ON sessions (expires_at);

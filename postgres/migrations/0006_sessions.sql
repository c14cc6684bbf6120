-- Console sessions, kept in the database so that signing out, revoking the
-- key and expiry end a session on every replica at once (it mirrors
-- sqlite/migrations/0006_sessions.sql). id_hash is the SHA-256 of the
-- session id; the id itself lives only in the person's cookie, so a copy
-- of the database signs no one in.
CREATE TABLE sessions (
	id_hash    bytea PRIMARY KEY,
	key_id     text NOT NULL,
	workspace  text NOT NULL,
	created_at timestamptz NOT NULL,
	expires_at timestamptz NOT NULL,
	revoked_at timestamptz
);
-- Revoking a key ends its sessions; the sweep deletes expired ones.
CREATE INDEX sessions_by_key ON sessions (key_id);
CREATE INDEX sessions_by_expiry ON sessions (expires_at);

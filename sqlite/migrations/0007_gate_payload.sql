-- The gate decision a capability call commits on names the payload it
-- authorized (SHA-256 of its canonical JSON; empty for a bare authorize).
ALTER TABLE gate_decisions ADD COLUMN payload_sha256 TEXT NOT NULL DEFAULT '';

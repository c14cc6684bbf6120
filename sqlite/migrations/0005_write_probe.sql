-- The readiness probe's row: Ping upserts it through the group-commit
-- writer, so a disk that is full, a file that turned read-only or a writer
-- that is stuck fails Ping as it fails every other write. It holds no data.
CREATE TABLE write_probe (
	id INTEGER PRIMARY KEY CHECK (id = 1),
	at TEXT NOT NULL
);

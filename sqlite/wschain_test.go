package sqlite

import (
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/ladderhq/ladder/storetest"
)

// TestMigration0014 opens a database whose records form the one global
// chain every workspace shared before migration 0014 (storetest.GlobalChain):
// they keep their hashes and become each workspace's first records and
// leaves (storetest.CheckChainMigration).
func TestMigration0014(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ladder.db")
	openPath(t, path).Close()
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	legacy := storetest.GlobalChain(t, 9)
	stmts := []string{
		`DROP INDEX audit_by_workspace_idx`, `ALTER TABLE audit DROP COLUMN ws_idx`, `DROP TABLE audit_ws_head`,
		`ALTER TABLE tlog_meta DROP COLUMN chain_seq`, `ALTER TABLE tlog_meta ADD COLUMN watermark INTEGER NOT NULL DEFAULT 0`,
		`DELETE FROM schema_migrations WHERE version >= 14`,
	}
	for _, stmt := range stmts {
		if _, err := raw.Exec(stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	for _, r := range legacy {
		if _, err := raw.Exec(`INSERT INTO audit (`+auditColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			r.Seq, r.Workspace, r.Actor, r.Kind, r.Subject, fmtTime(r.At), []byte(r.Data), r.PrevHash, r.Hash); err != nil {
			t.Fatal(err)
		}
	}
	s := openPath(t, path)
	defer s.Close()
	storetest.CheckChainMigration(t, s, legacy)
}

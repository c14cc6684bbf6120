package sqlite

import (
	"database/sql"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	mig "github.com/ladderhq/ladder/internal/migrate"
)

// TestFailedUpgradeAppliesNothing: the migrations a start finds pending go
// in one transaction, so one that fails leaves the file at the version it
// had (the binary before still opens it), and the error names it.
func TestFailedUpgradeAppliesNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.db")
	db, err := sql.Open("sqlite", path+"?_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	first := []mig.Migration{{Version: 1, Name: "0001_a.sql", SQL: "CREATE TABLE a (x INTEGER)"}}
	if got, err := applyMigrations(t.Context(), db, first); err != nil || len(got) != 1 {
		t.Fatalf("first start: %v, %v", got, err)
	}
	upgrade := append(slices.Clone(first),
		mig.Migration{Version: 2, Name: "0002_b.sql", SQL: "CREATE TABLE b (x INTEGER); INSERT INTO a VALUES (1)"},
		mig.Migration{Version: 3, Name: "0003_bad.sql", SQL: "CREATE TABLE c (x INTEGER); ALTER TABLE nowhere ADD COLUMN y TEXT"})
	_, err = applyMigrations(t.Context(), db, upgrade)
	if err == nil || !strings.HasPrefix(err.Error(), "0003_bad.sql: ") {
		t.Fatalf("a failing upgrade: err = %v, want it to name 0003_bad.sql", err)
	}
	var versions, tables, rows int
	if err := db.QueryRow(`SELECT COUNT(*) FROM schema_migrations`).Scan(&versions); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`SELECT COUNT(*) FROM sqlite_master WHERE name IN ('b', 'c')`).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`SELECT COUNT(*) FROM a`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if versions != 1 || tables != 0 || rows != 0 {
		t.Errorf("after the failed upgrade: %d versions, tables b and c %d, rows of a %d; want 1, 0, 0", versions, tables, rows)
	}

	upgrade[2].SQL = "CREATE TABLE c (x INTEGER)"
	got, err := applyMigrations(t.Context(), db, upgrade)
	if err != nil || len(got) != 2 || got[0].Version != 2 || got[1].Version != 3 {
		t.Fatalf("the mended upgrade: %v, %v; want 0002 and 0003", got, err)
	}
	if got, err := applyMigrations(t.Context(), db, upgrade); err != nil || len(got) != 0 {
		t.Errorf("a start on an up-to-date file: %v, %v; want nothing applied", got, err)
	}
	if _, err := applyMigrations(t.Context(), db, first); err == nil || !strings.Contains(err.Error(), "schema version 3 is newer than this binary knows (1)") {
		t.Errorf("an older binary: err = %v", err)
	}
}

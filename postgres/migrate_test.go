package postgres

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	mig "github.com/ladderhq/ladder/internal/migrate"
)

// TestFailedUpgradeAppliesNothing: what a start creates — the schema,
// schema_migrations and every pending migration — goes in one transaction,
// so a migration that fails leaves the database as it was (here: no schema
// at all, then the version before), and the error names it.
func TestFailedUpgradeAppliesNothing(t *testing.T) {
	var b [6]byte
	_, _ = crand.Read(b[:])
	schema := "ladder_test_" + hex.EncodeToString(b[:])
	admin := adminConn(t, "")
	t.Cleanup(func() {
		if _, err := admin.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	conn := adminConn(t, schema) // search_path names a schema not yet there, as a first start's does
	first := []mig.Migration{{Version: 1, Name: "0001_a.sql", SQL: "CREATE TABLE a (x integer)"}}
	bad := append(slices.Clone(first), mig.Migration{Version: 2, Name: "0002_bad.sql", SQL: "CREATE TABLE b (x integer); ALTER TABLE nowhere ADD COLUMN y text"})
	exists := func(name string) bool {
		t.Helper()
		var ok bool
		if err := admin.QueryRow(t.Context(), `SELECT to_regclass($1) IS NOT NULL`, schema+"."+name).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		return ok
	}
	schemaExists := func() bool {
		t.Helper()
		var ok bool
		if err := admin.QueryRow(t.Context(), `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, schema).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		return ok
	}

	if _, err := applyMigrations(t.Context(), conn, schema, bad); err == nil || !strings.HasPrefix(err.Error(), "0002_bad.sql: ") {
		t.Fatalf("a failing first start: err = %v, want it to name 0002_bad.sql", err)
	}
	if schemaExists() {
		t.Errorf("the schema exists after a first start that failed")
	}
	if got, err := applyMigrations(t.Context(), conn, schema, first); err != nil || len(got) != 1 || !exists("a") {
		t.Fatalf("a first start: %v, %v, table a there: %v", got, err, exists("a"))
	}
	upgrade := append(slices.Clone(first),
		mig.Migration{Version: 2, Name: "0002_b.sql", SQL: "CREATE TABLE b (x integer); INSERT INTO a VALUES (1)"},
		mig.Migration{Version: 3, Name: "0003_bad.sql", SQL: "CREATE TABLE c (x integer); ALTER TABLE nowhere ADD COLUMN y text"})
	if _, err := applyMigrations(t.Context(), conn, schema, upgrade); err == nil || !strings.HasPrefix(err.Error(), "0003_bad.sql: ") {
		t.Fatalf("a failing upgrade: err = %v, want it to name 0003_bad.sql", err)
	}
	var versions, rows int
	if err := conn.QueryRow(t.Context(), `SELECT (SELECT COUNT(*) FROM schema_migrations), (SELECT COUNT(*) FROM a)`).Scan(&versions, &rows); err != nil {
		t.Fatal(err)
	}
	if versions != 1 || rows != 0 || exists("b") || exists("c") {
		t.Errorf("after the failed upgrade: %d versions, %d rows of a, b there %v, c there %v; want 1, 0, false, false", versions, rows, exists("b"), exists("c"))
	}
	upgrade[2].SQL = "CREATE TABLE c (x integer)"
	got, err := applyMigrations(t.Context(), conn, schema, upgrade)
	if err != nil || len(got) != 2 || got[0].Version != 2 || got[1].Version != 3 || !exists("c") {
		t.Fatalf("the mended upgrade: %v, %v; want 0002 and 0003", got, err)
	}
	if got, err := applyMigrations(t.Context(), conn, schema, upgrade); err != nil || len(got) != 0 {
		t.Errorf("a start on an up-to-date schema: %v, %v; want nothing applied", got, err)
	}
	if _, err := applyMigrations(t.Context(), conn, schema, first); err == nil || !strings.Contains(err.Error(), "schema version 3 is newer than this binary knows (1)") {
		t.Errorf("an older binary: err = %v", err)
	}
}

package postgres

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/ladderhq/ladder"
)

// TestWritesResumeAfterReadOnly is a database that takes no writes for a
// while (a standby before its promotion, default_transaction_read_only set
// for ladder's role) and then takes them again. A connection opened in
// between keeps the read-only setting for its life, so the pool must not
// keep it: the first write after the database takes writes again succeeds,
// without anyone cutting connections.
func TestWritesResumeAfterReadOnly(t *testing.T) {
	ctx := t.Context()
	admin := adminConn(t, "")
	var b [5]byte
	_, _ = crand.Read(b[:])
	name := "ladder_ro_" + hex.EncodeToString(b[:])
	role, schema := pgx.Identifier{name}.Sanitize(), pgx.Identifier{name}.Sanitize()
	for _, q := range []string{"CREATE ROLE " + role + " LOGIN", "CREATE SCHEMA " + schema + " AUTHORIZATION " + role} {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, q := range []string{"DROP SCHEMA IF EXISTS " + schema + " CASCADE", "DROP OWNED BY " + role, "DROP ROLE IF EXISTS " + role} {
			if _, err := admin.Exec(context.Background(), q); err != nil {
				t.Errorf("%s: %v", q, err)
			}
		}
	})
	u, err := url.Parse(testDSN(t))
	if err != nil {
		t.Fatalf("LADDER_TEST_POSTGRES is not a URL: %v", err)
	}
	u.User = url.User(name)
	s, err := Open(ctx, u.String(), Options{Schema: name})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	route := func(id string) error {
		r := testRoute(id, "bill-"+id)
		_, _, err := s.RecordRoute(ctx, r, routeEntry(t, r))
		return err
	}
	if err := route("rt_before"); err != nil {
		t.Fatalf("route before: %v", err)
	}

	set := func(q string) {
		t.Helper()
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	set("ALTER ROLE " + role + " SET default_transaction_read_only = on")
	set("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '" + name + "'")
	for i := range 3 {
		if err := route("rt_ro"); !errors.Is(err, ladder.ErrUnavailable) {
			t.Fatalf("route %d while the role is read-only: %v, want ErrUnavailable", i, err)
		}
		// Reads still answer, on connections opened read-only.
		if _, err := s.CountKeys(ctx); err != nil && i > 0 {
			t.Fatalf("read while the role is read-only: %v", err)
		}
	}

	set("ALTER ROLE " + role + " RESET default_transaction_read_only")
	if err := route("rt_after"); err != nil {
		t.Fatalf("the first route after the database takes writes again: %v, want it recorded", err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Errorf("Ping after the database takes writes again: %v", err)
	}
}

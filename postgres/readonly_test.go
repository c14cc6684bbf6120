package postgres

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

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
	set, s, name := storeOfOwnRole(t, "ladder_ro_")
	role := pgx.Identifier{name}.Sanitize()
	route := func(id string) error {
		r := testRoute(id, "bill-"+id)
		_, _, err := s.RecordRoute(ctx, r, routeEntry(t, r))
		return err
	}
	if err := route("rt_before"); err != nil {
		t.Fatalf("route before: %v", err)
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

// TestRefusedConnectionIsUnavailable is a database that refuses new
// connections (here ladder's role may no longer log in; a database with
// ALLOW_CONNECTIONS false answers alike) after its connections were cut.
// pgx reports the server's refusal as a ConnectError around a PgError
// whose code is no connection class, and a store that read only the
// code answered GetKey with an error the service did not take for the
// store being down, so /readyz stayed ready. Every call must fail
// ErrUnavailable, and reads answer again once connections are let in.
func TestRefusedConnectionIsUnavailable(t *testing.T) {
	ctx := t.Context()
	set, s, name := storeOfOwnRole(t, "ladder_nologin_")
	role := pgx.Identifier{name}.Sanitize()
	set("ALTER ROLE " + role + " NOLOGIN")
	set("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '" + name + "'")
	refused := false
	for i := range 3 {
		_, err := s.GetKey(ctx, "k_missing")
		if !errors.Is(err, ladder.ErrUnavailable) {
			t.Fatalf("GetKey %d while connections are refused: %v, want ErrUnavailable", i, err)
		}
		var ce *pgconn.ConnectError
		refused = refused || errors.As(err, &ce)
	}
	if !refused {
		t.Fatal("no GetKey tried a new connection: the test did not reach the refusal")
	}
	set("ALTER ROLE " + role + " LOGIN")
	if _, err := s.GetKey(ctx, "k_missing"); !errors.Is(err, ladder.ErrNotFound) {
		t.Fatalf("GetKey once connections are let in: %v, want ErrNotFound", err)
	}
}

// storeOfOwnRole opens a store as a login role of its own (name prefix
// and random hex) in a schema that role owns, so a test can change what
// the role may do without touching other tests; both go at cleanup. set
// runs a statement as the administrator.
func storeOfOwnRole(t *testing.T, prefix string) (set func(q string), s *Store, name string) {
	t.Helper()
	ctx := t.Context()
	admin := adminConn(t, "")
	var b [5]byte
	_, _ = crand.Read(b[:])
	name = prefix + hex.EncodeToString(b[:])
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
	s, err = Open(ctx, u.String(), Options{Schema: name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	set = func(q string) {
		t.Helper()
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	return set, s, name
}

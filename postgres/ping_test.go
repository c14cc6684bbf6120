package postgres

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/service"
)

// TestPingSeesWritesRefused takes away the write privileges of the role a
// Store runs as, which makes the database read-only for ladder while reads
// still answer: Ping (and so the service's readiness) must say not ready,
// with ErrUnavailable, and ready again once the privileges are back. A
// probe that only reads, or checks transaction_read_only, passes.
func TestPingSeesWritesRefused(t *testing.T) {
	ctx := t.Context()
	schema := newSchema(t)
	openTest(t, schema).Close() // migrated by the owner

	var b [5]byte
	_, _ = crand.Read(b[:])
	role := "ladder_rw_" + hex.EncodeToString(b[:])
	admin := adminConn(t, schema)
	exec := func(sql string) {
		t.Helper()
		if _, err := admin.Exec(context.Background(), sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	rl, sc := pgx.Identifier{role}.Sanitize(), pgx.Identifier{schema}.Sanitize()
	exec("CREATE ROLE " + rl + " NOLOGIN")
	t.Cleanup(func() {
		exec("DROP OWNED BY " + rl)
		exec("DROP ROLE " + rl)
	})
	exec("GRANT USAGE ON SCHEMA " + sc + " TO " + rl)
	grant := "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA " + sc + " TO " + rl
	exec(grant)
	exec("GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA " + sc + " TO " + rl)

	// The test's superuser connects and becomes the role (SET ROLE at
	// startup), so no login or password is needed.
	dsn := testDSN(t)
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	s, err := Open(ctx, dsn+sep+"role="+role, Options{Schema: schema})
	if err != nil {
		t.Fatalf("open as %s: %v", role, err)
	}
	t.Cleanup(func() { s.Close() })
	svc, err := service.New(service.Options{Store: s})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping with write privileges: %v", err)
	}
	if _, err := s.AppendAudit(ctx, entry(t, ladder.AuditCall, "before", nil)); err != nil {
		t.Fatalf("write with write privileges: %v", err)
	}

	exec("REVOKE INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA " + sc + " FROM " + rl)
	if _, err := s.AppendAudit(ctx, entry(t, ladder.AuditCall, "during", nil)); !errors.Is(err, ladder.ErrUnavailable) {
		t.Errorf("write without write privileges: %v, want ErrUnavailable", err)
	}
	if _, err := s.CountKeys(ctx); err != nil {
		t.Errorf("read without write privileges: %v", err)
	}
	if err := s.Ping(ctx); !errors.Is(err, ladder.ErrUnavailable) {
		t.Errorf("Ping without write privileges: %v, want ErrUnavailable", err)
	}
	err = svc.Ready(ctx)
	if le := (*ladder.Error)(nil); !errors.As(err, &le) || !strings.Contains(le.Message, "permission denied") {
		t.Errorf("Ready without write privileges: %v, want not ready naming permission denied", err)
	} else if strings.Contains(le.Message+le.Hint, role) || strings.Contains(le.Message+le.Hint, schema) {
		t.Errorf("Ready's public reason names the role or schema: %q", le.Message)
	}

	exec(grant)
	if err := s.Ping(ctx); err != nil {
		t.Errorf("Ping after the privileges came back: %v", err)
	}
	if err := svc.Ready(ctx); err != nil {
		t.Errorf("Ready after the privileges came back: %v", err)
	}
	if _, err := s.AppendAudit(ctx, entry(t, ladder.AuditCall, "after", nil)); err != nil {
		t.Errorf("write after the privileges came back: %v", err)
	}
	if n, err := ladder.VerifyAudit(ctx, s); err != nil || n != 2 {
		t.Errorf("VerifyAudit = %d, %v; want the 2 writes that were made", n, err)
	}
}

// TestReadyInTimeBehindAStuckWrite holds a lock every audited write needs,
// as a hung database or a forgotten session would: a write batch waits on
// it, and the readiness probe queued behind that batch could wait as long
// (up to the 30 s batch timeout). Ready must still answer not ready within
// its 2 s, keep answering in time, and be ready again soon after the lock
// goes.
func TestReadyInTimeBehindAStuckWrite(t *testing.T) {
	ctx := t.Context()
	schema := newSchema(t)
	s := openTest(t, schema)
	svc, err := service.New(service.Options{Store: s})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AppendAudit(ctx, entry(t, ladder.AuditCall, "before", nil)); err != nil {
		t.Fatal(err)
	}
	admin := adminConn(t, schema)
	tx, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, "LOCK TABLE audit_ws_head IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	stuck := make(chan error, 1)
	go func() {
		_, err := s.AppendAudit(context.Background(), entry(t, ladder.AuditCall, "stuck", nil))
		stuck <- err
	}()
	time.Sleep(200 * time.Millisecond) // the write's batch is waiting on the lock

	for i := range 2 {
		start := time.Now()
		err := svc.Ready(ctx)
		took := time.Since(start)
		if le := (*ladder.Error)(nil); !errors.As(err, &le) || !strings.Contains(le.Message, "writes do not finish in time") {
			t.Errorf("Ready %d behind a stuck write: %v, want not ready, writes do not finish in time", i, err)
		}
		if took > 3*time.Second {
			t.Errorf("Ready %d behind a stuck write took %s", i, took.Round(time.Millisecond))
		}
	}

	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-stuck; err != nil {
		t.Errorf("the stuck write, once the lock went: %v", err)
	}
	start := time.Now()
	for {
		err := svc.Ready(ctx)
		if err == nil {
			break
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("Ready 5s after the lock went: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("ready %s after the lock went", time.Since(start).Round(time.Millisecond))
}

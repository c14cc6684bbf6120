package console_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/config"
	"github.com/ladderhq/ladder/console"
	"github.com/ladderhq/ladder/internal/testenv"
	"github.com/ladderhq/ladder/postgres"
	"github.com/ladderhq/ladder/service"
)

// pgReplica is one console replica on a PostgreSQL schema: its own store
// (pool, group commit) and service, as `ladder serve` has.
type pgReplica struct {
	url string
	svc *service.Service
}

func startPGReplica(t *testing.T, dsn, schema string) pgReplica {
	t.Helper()
	ctx := context.Background()
	st, err := postgres.Open(ctx, dsn, postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cfg, err := config.Parse("demo.yaml", config.Demo())
	if err != nil {
		t.Fatal(err)
	}
	parts := cfg.Parts()
	pool, _ := testenv.DemoPool(t)
	svc, err := service.New(service.Options{Store: st, Workspaces: parts.Workspaces, Rules: parts.Rules, Gates: parts.Gates, AuditSecret: []byte("replicas"), Runner: pool})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.EnsureSteps(ctx, svc.InitialStates()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(console.New(console.Options{Service: svc, Secret: []byte("one secret for every replica")}))
	t.Cleanup(srv.Close)
	return pgReplica{url: srv.URL, svc: svc}
}

// TestReplicasSessions runs two console replicas on one PostgreSQL
// database: a session signed in on one works on the other; signed out on
// one, or its key revoked on the other, it is refused by both at once.
func TestReplicasSessions(t *testing.T) {
	dsn := os.Getenv("LADDER_TEST_POSTGRES")
	if dsn == "" {
		t.Skip("LADDER_TEST_POSTGRES is unset: this test runs two console replicas on PostgreSQL")
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "ladder_console_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), dsn)
		if err != nil {
			t.Errorf("drop schema: %v", err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema: %v", err)
		}
	})
	a, bb := startPGReplica(t, dsn, schema), startPGReplica(t, dsn, schema)
	ctx := context.Background()
	k, human, err := a.svc.CreateKey(ctx, "test", ladder.KeyRequest{Workspace: ws, Kind: ladder.KeyHuman})
	if err != nil {
		t.Fatal(err)
	}
	_, agent, err := a.svc.CreateKey(ctx, "test", ladder.KeyRequest{Workspace: ws, Kind: ladder.KeyAgent})
	if err != nil {
		t.Fatal(err)
	}
	ap, err := a.svc.CallCapability(ctx, ladder.Principal{KeyID: ladder.KeyID(agent), Workspace: ws, Kind: ladder.KeyAgent}, "rates:approveRate",
		[]byte(`{"bill_id":"B-R1","linehaul_usd":1850,"fuel_surcharge_usd":212.5}`))
	if err != nil || ap.ApprovalID == "" {
		t.Fatalf("approval: %+v %v", ap, err)
	}

	signin := func(base string) *client {
		t.Helper()
		c := clientAt(t, base)
		if r := c.signin(human); r.Location != "/console/inbox" {
			t.Fatalf("sign in on %s: %d %s", base, r.Status, r.Location)
		}
		return c
	}
	c := signin(a.url)
	tok := c.csrf("/console/inbox")
	onB := withCookie(t, bb.url, c.sessionCookie())
	if r := onB.get("/console/inbox"); r.Status != http.StatusOK {
		t.Fatalf("the session on replica B: %d", r.Status)
	}
	if r := c.post("/console/signout", url.Values{"csrf": {tok}}); r.Status != http.StatusSeeOther {
		t.Fatalf("sign out on A: %d", r.Status)
	}
	signedOut(t, onB, "replica B after sign-out on A", tok, ap.ApprovalID)

	c = signin(bb.url)
	tok = c.csrf("/console/inbox")
	onA := withCookie(t, a.url, c.sessionCookie())
	if _, err := a.svc.RevokeKey(ctx, "test", ws, k.ID); err != nil {
		t.Fatal(err)
	}
	signedOut(t, c, "replica B after the key was revoked on A", tok, ap.ApprovalID)
	signedOut(t, onA, "replica A after the key was revoked on A", tok, ap.ApprovalID)
	if v, err := bb.svc.ApprovalStatus(ctx, ladder.Principal{KeyID: k.ID, Workspace: ws, Kind: ladder.KeyHuman}, ap.ApprovalID); err != nil || v.Status != ladder.ApprovalPending {
		t.Errorf("approval after the replays: %v %v", v.Status, err)
	}
}

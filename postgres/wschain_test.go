package postgres

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/service"
	"github.com/ladderhq/ladder/storetest"
	"github.com/ladderhq/ladder/translog"
)

func wsEntry(tb testing.TB, ws, subject string, data any) ladder.AuditEntry {
	tb.Helper()
	return must(ladder.NewAuditEntry(ws, "system", ladder.AuditCall, subject, time.Date(2026, 8, 24, 9, 0, 0, 0, time.UTC), data))(tb)
}

// TestReplicasTwoWorkspaceLogs appends to two workspaces from two replicas
// at once, some batches holding records of both (their heads are locked in
// workspace order, whichever the entries' order), while both replicas
// integrate the logs: each workspace's chain verifies, each record is the
// leaf its position says, and each tree's root is the one recomputed from
// the workspace's records alone.
func TestReplicasTwoWorkspaceLogs(t *testing.T) {
	schema := newSchema(t)
	replicas := []*Store{openTest(t, schema), openTest(t, schema)}
	const goroutines, calls = 8, 10
	var (
		wg   sync.WaitGroup
		done = make(chan struct{})
	)
	for r, s := range replicas {
		for g := range goroutines {
			wg.Go(func() {
				for c := range calls {
					subject := fmt.Sprintf("r%d-g%d-c%d", r, g, c)
					a, b := "ws-a", "ws-b"
					if (g+c)%2 == 1 {
						a, b = b, a
					}
					entries := []ladder.AuditEntry{wsEntry(t, a, subject, map[string]int{"c": c})}
					if c%3 == 0 {
						entries = append(entries, wsEntry(t, b, subject, map[string]int{"c": c}), wsEntry(t, a, subject+"-2", nil))
					}
					if _, err := s.AppendAudit(t.Context(), entries...); err != nil {
						t.Errorf("%s: %v", subject, err)
					}
				}
			})
		}
	}
	var integrators sync.WaitGroup
	for _, s := range replicas {
		svc, err := service.New(service.Options{Store: s})
		if err != nil {
			t.Fatal(err)
		}
		integrators.Go(func() {
			for {
				if err := svc.IntegrateLogs(t.Context()); err != nil {
					t.Errorf("integrate: %v", err)
					return
				}
				select {
				case <-done:
					return
				case <-time.After(5 * time.Millisecond):
				}
			}
		})
	}
	wg.Wait()
	close(done)
	integrators.Wait()

	s := replicas[1]
	if _, err := ladder.VerifyAudit(t.Context(), s); err != nil {
		t.Fatalf("VerifyAudit: %v", err)
	}
	total := 0
	for _, ws := range []string{"ws-a", "ws-b"} {
		size, err := translog.IntegrateAll(t.Context(), s, ws)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := s.ListAudit(t.Context(), ladder.AuditQuery{Workspace: ws, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		total += len(recs)
		if size != int64(len(recs)) {
			t.Fatalf("%s: tree of %d leaves, %d records", ws, size, len(recs))
		}
		var mem translog.MemoryReader
		prev := ""
		for i, r := range recs {
			if r.PrevHash != prev {
				t.Errorf("%s record %d (position %d) chains to %.12s, want its workspace's previous record %.12s", ws, r.Seq, i, r.PrevHash, prev)
			}
			prev = r.Hash
			if leaf, err := s.TlogLeafOf(t.Context(), ws, r.Seq); err != nil || leaf != int64(i) {
				t.Errorf("%s record %d is leaf %d (%v), want %d", ws, r.Seq, leaf, err, i)
			}
			if err := mem.Add(translog.LeafData(r)); err != nil {
				t.Fatal(err)
			}
		}
		want, err := tlog.TreeHash(size, &mem)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := tlog.TreeHash(size, translog.Reader(t.Context(), s, ws)); err != nil || got != want {
			t.Errorf("%s: stored root %s (%v), recomputed from its records %s", ws, got, err, want)
		}
		var head struct {
			size int64
			hash string
		}
		if err := adminConn(t, schema).QueryRow(t.Context(), `SELECT size, hash FROM audit_ws_head WHERE workspace = $1`, ws).Scan(&head.size, &head.hash); err != nil {
			t.Fatal(err)
		}
		if head.size != size || head.hash != prev {
			t.Errorf("%s head = (%d, %.12s), want (%d, %.12s)", ws, head.size, head.hash, size, prev)
		}
	}
	if want := 2 * goroutines * (calls + 2*((calls+2)/3)); total != want {
		t.Errorf("%d records in the two logs, want %d", total, want)
	}
}

// TestAppendNotBlockedByOtherWorkspace holds ws-b's chain head locked in a
// raw transaction, as another replica's append to ws-b holds it until its
// commit: a route of ws-a records (with its audit record) while it is
// held, and an append to ws-b from another replica waits until it is
// released.
func TestAppendNotBlockedByOtherWorkspace(t *testing.T) {
	ctx := t.Context()
	schema := newSchema(t)
	s, other := openTest(t, schema), openTest(t, schema)
	for _, ws := range []string{"ws-a", "ws-b"} {
		if _, err := s.AppendAudit(ctx, wsEntry(t, ws, "first", nil)); err != nil {
			t.Fatal(err)
		}
	}
	admin := adminConn(t, schema)
	tx, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, `SELECT 1 FROM audit_ws_head WHERE workspace = 'ws-b' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	bDone := make(chan error, 1)
	go func() {
		_, err := other.AppendAudit(context.Background(), wsEntry(t, "ws-b", "waits", nil))
		bDone <- err
	}()

	actx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := s.recordRoute(actx, testRoute("rt_a", "item-a")); err != nil {
		t.Fatalf("route of ws-a while ws-b's head is locked: %v", err)
	}
	recs, err := s.ListAudit(ctx, ladder.AuditQuery{Workspace: "ws-a", Kind: ladder.AuditRoute})
	if err != nil || len(recs) != 1 || recs[0].Subject != "rt_a" {
		t.Fatalf("ws-a's route record: %v, %v", recs, err)
	}
	select {
	case err := <-bDone:
		t.Fatalf("an append to ws-b finished (%v) while its head was locked", err)
	default:
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-bDone; err != nil {
		t.Errorf("ws-b append once its head was released: %v", err)
	}
	if _, err := ladder.VerifyAudit(ctx, s); err != nil {
		t.Errorf("VerifyAudit: %v", err)
	}
}

// TestMigration0014 opens a schema whose records form the one global
// chain every workspace shared before migration 0014
// (storetest.GlobalChain), with the single audit_head row: they keep their
// hashes and become each workspace's first records and leaves, and the
// next seq follows the last (storetest.CheckChainMigration).
func TestMigration0014(t *testing.T) {
	schema := newSchema(t)
	openTest(t, schema).Close()
	conn := adminConn(t, schema)
	legacy := storetest.GlobalChain(t, 9)
	for _, stmt := range slices.Concat(undo0018, []string{
		`DROP INDEX audit_by_workspace_idx`, `ALTER TABLE audit DROP COLUMN ws_idx`, `DROP TABLE audit_ws_head`, `DROP SEQUENCE audit_seq_gen`,
		`CREATE TABLE audit_head (id boolean PRIMARY KEY DEFAULT true CHECK (id), seq bigint NOT NULL, hash text NOT NULL)`,
		`ALTER TABLE tlog_meta DROP COLUMN chain_seq, ADD COLUMN watermark bigint NOT NULL DEFAULT 0`,
		// 0015's indexes too, as every later migration runs again.
		`DROP INDEX deliveries_delivered`, `DROP INDEX deliveries_dead`, `DROP INDEX deliveries_event`, `DROP INDEX outbox_fanned_at`,
		// 0016's partial step index is 0011's again, which held every record.
		`DROP INDEX audit_by_workspace_step`, `CREATE INDEX audit_by_workspace_step ON audit (workspace, step, queue, seq)`,
		// 0017 dropped audit_by_kind.
		`CREATE INDEX audit_by_kind ON audit (kind, seq)`,
		`DELETE FROM schema_migrations WHERE version >= 14`,
	}) {
		if _, err := conn.Exec(t.Context(), stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	for _, r := range legacy {
		if _, err := conn.Exec(t.Context(), `INSERT INTO audit (`+auditColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
			r.Seq, r.Workspace, r.Actor, r.Kind, r.Subject, r.At, []byte(r.Data), r.PrevHash, r.Hash); err != nil {
			t.Fatal(err)
		}
	}
	last := legacy[len(legacy)-1]
	if _, err := conn.Exec(t.Context(), `INSERT INTO audit_head (id, seq, hash) VALUES (true, $1, $2)`, last.Seq, last.Hash); err != nil {
		t.Fatal(err)
	}
	s := openTest(t, schema)
	storetest.CheckChainMigration(t, s, legacy)
	recs, err := s.ListAudit(t.Context(), ladder.AuditQuery{AfterSeq: last.Seq, Limit: 1})
	if err != nil || len(recs) != 1 || recs[0].Seq != last.Seq+1 {
		t.Errorf("first record after 0014: %v, %v; want seq %d", recs, err, last.Seq+1)
	}
}

// BenchmarkAppendAudit appends one record per op from parallel callers
// over two workspaces, each append its own durable transaction (group
// commit shares them): the cost of a record on PostgreSQL.
func BenchmarkAppendAudit(b *testing.B) {
	s := openTest(b, newSchema(b))
	var n atomic.Int64
	b.ResetTimer() // not the store's opening and migrations
	b.ReportAllocs()
	// Many callers at once, as a server's requests are, so the group
	// commit shares a transaction and a sync among them.
	b.SetParallelism(32)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			e, err := ladder.NewAuditEntry([]string{"ws-a", "ws-b"}[i%2], "system", ladder.AuditRoute, fmt.Sprintf("rt_%d", i), time.Now(), map[string]any{"i": i})
			if err == nil {
				_, err = s.AppendAudit(context.Background(), e)
			}
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
}

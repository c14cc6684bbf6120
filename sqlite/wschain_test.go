package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/service"
	"github.com/ladderhq/ladder/storetest"
	"github.com/ladderhq/ladder/translog"
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
	stmts := slices.Concat(undo0018, []string{
		`DROP INDEX audit_by_workspace_idx`, `ALTER TABLE audit DROP COLUMN ws_idx`, `DROP TABLE audit_ws_head`,
		`ALTER TABLE tlog_meta DROP COLUMN chain_seq`, `ALTER TABLE tlog_meta ADD COLUMN watermark INTEGER NOT NULL DEFAULT 0`,
		// 0015's indexes too, as every later migration runs again.
		`DROP INDEX deliveries_delivered`, `DROP INDEX deliveries_dead`, `DROP INDEX deliveries_event`, `DROP INDEX outbox_fanned_at`,
		// 0016's partial step index is 0011's again, which held every record.
		`DROP INDEX audit_by_workspace_step`, `CREATE INDEX audit_by_workspace_step ON audit (workspace, step, queue, seq)`,
		// 0017 dropped audit_by_kind.
		`CREATE INDEX audit_by_kind ON audit (kind, seq)`,
		`DELETE FROM schema_migrations WHERE version >= 14`,
	})
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

// BenchmarkAppendAudit appends one record per op from parallel callers
// over two workspaces, each append its own durable transaction (group
// commit shares them): the cost of a record on SQLite.
func BenchmarkAppendAudit(b *testing.B) {
	s := openPath(b, filepath.Join(b.TempDir(), "ladder.db"))
	defer s.Close()
	benchAppend(b, s)
}

func benchAppend(b *testing.B, s ladder.AuditStore) {
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

// BenchmarkAuditProof proves one record of a 10,000-record log per op,
// the way GET /v1/audit/records/{seq}/proof does (the log up to date, its
// checkpoint signed), and checks the proof as a client would.
func BenchmarkAuditProof(b *testing.B) {
	ctx := context.Background()
	s := openPath(b, filepath.Join(b.TempDir(), "ladder.db"))
	defer s.Close()
	const records = 10000
	entries := make([]ladder.AuditEntry, 0, 500)
	for i := range records {
		e, err := ladder.NewAuditEntry("ws-a", "system", ladder.AuditRoute, fmt.Sprintf("rt_%d", i), time.Now(), map[string]any{"i": i})
		if err != nil {
			b.Fatal(err)
		}
		if entries = append(entries, e); len(entries) == cap(entries) {
			if _, err := s.AppendAudit(ctx, entries...); err != nil {
				b.Fatal(err)
			}
			entries = entries[:0]
		}
	}
	skey, vkey, err := translog.GenerateKey("bench")
	if err != nil {
		b.Fatal(err)
	}
	signer, err := translog.NewSigner(skey)
	if err != nil {
		b.Fatal(err)
	}
	svc, err := service.New(service.Options{Store: s, Checkpoints: signer})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if err := svc.IntegrateLogs(ctx); err != nil {
		b.Fatal(err)
	}
	integrate := float64(time.Since(start).Microseconds()) / records
	p := ladder.Principal{KeyID: "k", Workspace: "ws-a", Kind: ladder.KeyHuman}
	b.ResetTimer()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		pr, err := svc.AuditProof(ctx, p, int64(1+i%records))
		if err != nil {
			b.Fatal(err)
		}
		cp, err := translog.Open(pr.Checkpoint.Note, vkey)
		if err != nil {
			b.Fatal(err)
		}
		proof := make(tlog.RecordProof, len(pr.Proof))
		for j, h := range pr.Proof {
			if proof[j], err = tlog.ParseHash(h); err != nil {
				b.Fatal(err)
			}
		}
		if err := tlog.CheckRecord(proof, cp.Tree.N, cp.Tree.Hash, pr.Leaf, translog.LeafHash(pr.Record)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(integrate, "µs-integrate/record")
}

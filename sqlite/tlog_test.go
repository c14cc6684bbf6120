package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/storetest"
	"github.com/ladderhq/ladder/translog"
)

// BenchmarkIntegrate measures one Integrate transaction of
// translog.IntegrateBatch records of one workspace (what the server's
// integration loop runs behind the routes), per leaf added:
//
//	go test ./sqlite -run '^$' -bench BenchmarkIntegrate -benchmem
func BenchmarkIntegrate(b *testing.B) {
	ctx := context.Background()
	s := openTest(b)
	defer s.Close()
	entries := make([]ladder.AuditEntry, translog.IntegrateBatch)
	for i := range entries {
		e, err := ladder.NewAuditEntry("ws-bench", "k_agent", ladder.AuditRoute, "rt_x", t0, map[string]any{"item": i, "reason": "a route's audit data of a realistic size, with a reason sentence and a few fields", "lane": "act_alone"})
		if err != nil {
			b.Fatal(err)
		}
		entries[i] = e
	}
	leaves := 0
	for b.Loop() {
		b.StopTimer()
		if _, err := s.AppendAudit(ctx, entries...); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		added, _, err := translog.Integrate(ctx, s, "ws-bench")
		if err != nil || added != len(entries) {
			b.Fatalf("Integrate added %d of %d: %v", added, len(entries), err)
		}
		leaves += added
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(leaves), "ns/leaf")
}

// TestTlogAppendStoresRowsAndRefusesGaps: Append stores each stored hash at
// its index with its bytes and grows the tree over the records' positions
// (a record is a leaf once its position is below the size, not before),
// and refuses leaves or hashes that are not consecutive, or leaves that do
// not end at the new size (integration never makes them; a store bug must
// not write a tree with a hole), writing nothing.
func TestTlogAppendStoresRowsAndRefusesGaps(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	defer s.Close()
	var entries []ladder.AuditEntry
	for i := range 3 {
		e, err := ladder.NewAuditEntry("ws-a", "k1", ladder.AuditRoute, fmt.Sprint("rt_", i), t0, nil)
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, e)
	}
	recs, err := s.AppendAudit(ctx, entries...)
	if err != nil {
		t.Fatal(err)
	}
	h := func(b byte) [32]byte { var x [32]byte; x[0], x[31] = b, 0xff-b; return x }
	for _, bad := range []struct {
		name   string
		leaves []ladder.TlogLeaf
		hashes []ladder.TlogHash
		want   string
	}{
		{"a leaf skipped", []ladder.TlogLeaf{{Index: 0, Seq: 1}, {Index: 2, Seq: 2}}, nil, "is not the next one"},
		{"a hash skipped", []ladder.TlogLeaf{{Index: 0, Seq: 1}, {Index: 1, Seq: 2}}, []ladder.TlogHash{{Index: 0, Hash: h(1)}, {Index: 2, Hash: h(2)}}, "is not the next one"},
		{"leaves short of the size", []ladder.TlogLeaf{{Index: 0, Seq: 1}}, nil, "not the one before the new size 2"},
	} {
		err := s.IntegrateTx(ctx, "ws-a", func(tx ladder.TlogTx) error { return tx.Append(2, 2, bad.leaves, bad.hashes) })
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: Append error %v, want a refusal saying %q", bad.name, err, bad.want)
		}
	}
	if size, _, err := s.TlogHead(ctx, "ws-a"); err != nil || size != 0 {
		t.Fatalf("after refusals the head is %d (%v), want nothing written", size, err)
	}
	if _, err := s.TlogLeafOf(ctx, "ws-a", recs[0].Seq); !errors.Is(err, ladder.ErrNotFound) {
		t.Errorf("leaf of seq %d before any Append: %v, want ErrNotFound", recs[0].Seq, err)
	}
	leaves := []ladder.TlogLeaf{{Index: 0, Seq: recs[0].Seq}, {Index: 1, Seq: recs[1].Seq}}
	hashes := []ladder.TlogHash{{Index: 0, Hash: h(1)}, {Index: 1, Hash: h(2)}, {Index: 2, Hash: h(3)}}
	if err := s.IntegrateTx(ctx, "ws-a", func(tx ladder.TlogTx) error { return tx.Append(2, recs[1].Seq, leaves, hashes) }); err != nil {
		t.Fatal(err)
	}
	for _, l := range leaves {
		if idx, err := s.TlogLeafOf(ctx, "ws-a", l.Seq); err != nil || idx != l.Index {
			t.Errorf("leaf of seq %d = %d, %v; want %d", l.Seq, idx, err, l.Index)
		}
	}
	if _, err := s.TlogLeafOf(ctx, "ws-a", recs[2].Seq); !errors.Is(err, ladder.ErrNotFound) {
		t.Errorf("leaf of seq %d, past the tree's size: %v, want ErrNotFound", recs[2].Seq, err)
	}
	if _, err := s.TlogLeafOf(ctx, "ws-b", recs[0].Seq); !errors.Is(err, ladder.ErrNotFound) {
		t.Errorf("leaf of seq %d asked of another workspace: %v, want ErrNotFound", recs[0].Seq, err)
	}
	hashes = append(hashes, ladder.TlogHash{Index: 3, Hash: h(4)})
	if err := s.IntegrateTx(ctx, "ws-a", func(tx ladder.TlogTx) error {
		return tx.Append(3, recs[2].Seq, []ladder.TlogLeaf{{Index: 2, Seq: recs[2].Seq}}, hashes[3:])
	}); err != nil {
		t.Fatal(err)
	}
	if idx, err := s.TlogLeafOf(ctx, "ws-a", recs[2].Seq); err != nil || idx != 2 {
		t.Errorf("leaf of seq %d = %d, %v; want 2", recs[2].Seq, idx, err)
	}
	got, err := s.TlogHashes(ctx, "ws-a", []int64{0, 1, 2, 3})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range hashes {
		if got[i] != want.Hash {
			t.Errorf("stored hash %d = %x, want %x", i, got[i], want.Hash)
		}
	}
	if size, last, err := s.TlogHead(ctx, "ws-a"); err != nil || size != 3 || last != recs[2].Seq {
		t.Errorf("head = %d, %d, %v; want 3, %d", size, last, err, recs[2].Seq)
	}
}

// undo0018 puts back migration 0012's tlog_leaf as the integrator kept it
// before migration 0018: a row per leaf, its index the record's position.
var undo0018 = []string{
	`CREATE TABLE tlog_leaf (workspace TEXT NOT NULL, idx INTEGER NOT NULL, seq INTEGER NOT NULL UNIQUE, PRIMARY KEY (workspace, idx)) WITHOUT ROWID`,
	`INSERT INTO tlog_leaf (workspace, idx, seq) SELECT a.workspace, a.ws_idx, a.seq FROM audit AS a JOIN tlog_head AS h ON h.workspace = a.workspace WHERE a.ws_idx < h.size`,
}

// TestMigration0018 opens databases whose logs were integrated while
// tlog_leaf kept the leaves. Where the table agrees with the records'
// positions the migration drops it, every leaf keeps its index and the
// logs grow on from where they were; where it does not (the database was
// changed outside ladder), the migration stops, says so and what to do,
// and leaves the database as it was.
func TestMigration0018(t *testing.T) {
	ctx := context.Background()
	for _, tampered := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "ladder.db")
		s := openPath(t, path)
		before := storetest.LeafMigrationRecords(t, s)
		s.Close()

		raw, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		stmts := append(slices.Clone(undo0018), `DELETE FROM schema_migrations WHERE version >= 18`)
		if tampered {
			stmts = append(stmts, `UPDATE tlog_leaf SET idx = idx + 100 WHERE seq = (SELECT MAX(seq) FROM tlog_leaf WHERE workspace = 'ws-b')`)
		}
		for _, stmt := range stmts {
			if _, err := raw.Exec(stmt); err != nil {
				t.Fatalf("%s: %v", stmt, err)
			}
		}
		var rows int
		if err := raw.QueryRow(`SELECT COUNT(*) FROM tlog_leaf`).Scan(&rows); err != nil || rows != len(before.Records) {
			t.Fatalf("tlog_leaf put back with %d rows (%v), want %d", rows, err, len(before.Records))
		}

		s, err = Open(ctx, path, Options{})
		if tampered {
			if err == nil || !strings.Contains(err.Error(), "tlog_leaf disagrees with the audit records' positions") || !strings.Contains(err.Error(), "restore it from a backup") {
				t.Errorf("tampered tlog_leaf: open error %v, want the migration stopped, saying why and what to do", err)
			}
			if err == nil {
				s.Close()
			}
			var version int
			if err := raw.QueryRow(`SELECT COUNT(*), MAX(version) FROM tlog_leaf, schema_migrations`).Scan(&rows, &version); err != nil || version != 17 {
				t.Errorf("after the refused migration: tlog_leaf %v, schema version %d; want the table and version 17 left as they were", err, version)
			}
			raw.Close()
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := raw.QueryRow(`SELECT COUNT(*) FROM sqlite_schema WHERE name = 'tlog_leaf'`).Scan(&rows); err != nil || rows != 0 {
			t.Errorf("tlog_leaf after migration 0018: %d (%v), want it dropped", rows, err)
		}
		raw.Close()
		before.CheckLeavesKept(t, s)
		s.Close()
	}
}

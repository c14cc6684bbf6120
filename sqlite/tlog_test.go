package sqlite

import (
	"context"
	"strings"
	"testing"

	"github.com/ladderhq/ladder"
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

// TestTlogAppendStoresRowsAndRefusesGaps: Append stores each leaf and
// stored hash at its index with its seq and bytes, and refuses leaves or
// hashes that are not consecutive (integration never makes them; a store
// bug must not write a tree with a hole), writing nothing.
func TestTlogAppendStoresRowsAndRefusesGaps(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	defer s.Close()
	h := func(b byte) [32]byte { var x [32]byte; x[0], x[31] = b, 0xff-b; return x }
	for _, bad := range []struct {
		name   string
		leaves []ladder.TlogLeaf
		hashes []ladder.TlogHash
	}{
		{"a leaf skipped", []ladder.TlogLeaf{{Index: 0, Seq: 1}, {Index: 2, Seq: 2}}, nil},
		{"a hash skipped", []ladder.TlogLeaf{{Index: 0, Seq: 1}}, []ladder.TlogHash{{Index: 0, Hash: h(1)}, {Index: 2, Hash: h(2)}}},
	} {
		err := s.IntegrateTx(ctx, "ws-a", func(tx ladder.TlogTx) error { return tx.Append(2, 2, bad.leaves, bad.hashes) })
		if err == nil || !strings.Contains(err.Error(), "is not the next one") {
			t.Errorf("%s: Append error %v, want a refusal", bad.name, err)
		}
	}
	if size, _, err := s.TlogHead(ctx, "ws-a"); err != nil || size != 0 {
		t.Fatalf("after refusals the head is %d (%v), want nothing written", size, err)
	}
	leaves := []ladder.TlogLeaf{{Index: 0, Seq: 7}, {Index: 1, Seq: 9}, {Index: 2, Seq: 12}}
	hashes := []ladder.TlogHash{{Index: 0, Hash: h(1)}, {Index: 1, Hash: h(2)}, {Index: 2, Hash: h(3)}, {Index: 3, Hash: h(4)}}
	if err := s.IntegrateTx(ctx, "ws-a", func(tx ladder.TlogTx) error { return tx.Append(3, 12, leaves, hashes) }); err != nil {
		t.Fatal(err)
	}
	for _, l := range leaves {
		if idx, err := s.TlogLeafOf(ctx, "ws-a", l.Seq); err != nil || idx != l.Index {
			t.Errorf("leaf of seq %d = %d, %v; want %d", l.Seq, idx, err, l.Index)
		}
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
	if size, last, err := s.TlogHead(ctx, "ws-a"); err != nil || size != 3 || last != 12 {
		t.Errorf("head = %d, %d, %v; want 3, 12", size, last, err)
	}
}

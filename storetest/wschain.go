package storetest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/service"
	"github.com/ladderhq/ladder/translog"
)

// GlobalChain returns n records of ws-a and ws-b, interleaved, chained as
// every workspace's records were before per-workspace chains (migration
// 0014): each to the record before it in seq order. A store's migration
// test writes them into a database taken back to before 0014.
func GlobalChain(t testing.TB, n int) []ladder.AuditRecord {
	t.Helper()
	recs := make([]ladder.AuditRecord, n)
	prev := ""
	for i := range recs {
		ws := []string{wsA, wsB}[i%3%2]
		e, err := ladder.NewAuditEntry(ws, "system", ladder.AuditRoute, fmt.Sprintf("rt_%d", i+1), t0.Add(time.Duration(i)*time.Second), map[string]any{"i": i})
		if err != nil {
			t.Fatal(err)
		}
		recs[i] = ladder.AuditRecord{Seq: int64(i + 1), AuditEntry: e}
		recs[i].Seal(prev)
		prev = recs[i].Hash
	}
	return recs
}

// CheckChainMigration checks a store opened on a database whose records
// legacy (GlobalChain) were written before migration 0014: they verify as
// one chain and keep their hashes; the next record of each workspace
// chains to that workspace's last legacy record; the server verifies the
// old chain before the logs go on, records that it did in each
// workspace's log, and each log holds the legacy records as its first
// leaves, its root recomputed from the records alone.
func CheckChainMigration(t *testing.T, s ladder.Store, legacy []ladder.AuditRecord) {
	t.Helper()
	ctx := context.Background()
	m := must(s.TlogMeta(ctx))
	if m.ChainSeq != int64(len(legacy)) || m.Adopted {
		t.Errorf("meta after 0014 = %+v, want chain_seq %d, not adopted (the old chain is verified first)", m, len(legacy))
	}
	if n, err := ladder.VerifyAudit(ctx, s); err != nil || n != int64(len(legacy)) {
		t.Fatalf("VerifyAudit after 0014 = %d, %v; want %d", n, err, len(legacy))
	}
	last := map[string]string{}
	for _, r := range legacy {
		last[r.Workspace] = r.Hash
	}
	for _, ws := range []string{wsB, wsA} {
		recs := must(s.AppendAudit(ctx, entry(t, ws, ladder.AuditReview, "after", t0.Add(time.Hour), nil)))
		if recs[0].PrevHash != last[ws] {
			t.Errorf("%s's first record after 0014 chains to %.12s, want its last record's hash %.12s", ws, recs[0].PrevHash, last[ws])
		}
	}
	svc, err := service.New(service.Options{Store: s})
	if err != nil {
		t.Fatal(err)
	}
	check(t, svc.IntegrateLogs(ctx))
	if m := must(s.TlogMeta(ctx)); !m.Adopted {
		t.Error("not adopted after the server verified the old chain")
	}
	if n, err := ladder.VerifyAudit(ctx, s); err != nil || n != int64(len(legacy))+4 {
		t.Errorf("VerifyAudit after new records = %d, %v; want %d", n, err, len(legacy)+4)
	}
	got := must(s.ListAudit(ctx, ladder.AuditQuery{Limit: len(legacy)}))
	for i, r := range got {
		if r.Hash != legacy[i].Hash || r.PrevHash != legacy[i].PrevHash {
			t.Errorf("record %d changed hashes in the migration", r.Seq)
		}
	}
	for _, ws := range []string{wsA, wsB} {
		recs := must(s.ListAudit(ctx, ladder.AuditQuery{Workspace: ws, Limit: 1000}))
		size := must(translog.IntegrateAll(ctx, s, ws))
		if size != int64(len(recs)) {
			t.Fatalf("%s: %d leaves, %d records", ws, size, len(recs))
		}
		start := recs[len(recs)-1]
		if start.Kind != ladder.AuditTlogStart || !strings.Contains(string(start.Data), fmt.Sprintf(`"global_chain_through_seq":%d`, len(legacy))) {
			t.Errorf("%s's last record is %s %s, want the record that the old chain verified", ws, start.Kind, start.Data)
		}
		var mem translog.MemoryReader
		for i, r := range recs {
			check(t, mem.Add(translog.LeafData(r)))
			if leaf := must(s.TlogLeafOf(ctx, ws, r.Seq)); leaf != int64(i) {
				t.Errorf("%s record %d is leaf %d, want %d", ws, r.Seq, leaf, i)
			}
		}
		if got, want := must(tlog.TreeHash(size, translog.Reader(ctx, s, ws))), must(tlog.TreeHash(size, &mem)); got != want {
			t.Errorf("%s: stored root %s, recomputed %s", ws, got, want)
		}
	}
}

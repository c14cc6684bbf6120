package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/translog"
)

// tlogTests are the transparency log cases (issue 21).
var tlogTests = []struct {
	name string
	fn   func(t *testing.T, s ladder.Store)
}{
	{"TlogIntegrateConcurrent", testTlogIntegrate},
	{"TlogIntegrateStaleHead", testTlogIntegrateStale},
	{"TlogCheckpointsAndMeta", testTlogCheckpoints},
	{"TlogPending", testTlogPending},
}

// testTlogPending: TlogPending hands the integrator a workspace's records
// from a position on, in position order and no further than the limit,
// each with what its leaf covers: the same canonical bytes as the record
// ListAudit returns, whatever the other workspace appended in between.
func testTlogPending(t *testing.T, s ladder.Store) {
	ctx := context.Background()
	for i := range 10 {
		ws := wsA
		if i%3 == 1 {
			ws = wsB
		}
		data := map[string]any{"i": i, "memo": fmt.Sprintf("line %d\n\"quoted\" <b>é</b>", i)}
		if _, err := s.AppendAudit(ctx, entry(t, ws, ladder.AuditRoute, fmt.Sprintf("q/s/item-%d", i), t0.Add(time.Duration(i)*time.Millisecond+123456), data)); err != nil {
			t.Fatal(err)
		}
	}
	recs := must(s.ListAudit(ctx, ladder.AuditQuery{Workspace: wsA, Limit: 100}))
	if len(recs) != 7 {
		t.Fatalf("%d records of %s, want 7", len(recs), wsA)
	}
	for _, c := range []struct {
		from        int64
		limit, want int
	}{{0, 100, 7}, {2, 3, 3}, {5, 10, 2}, {7, 10, 0}} {
		got := must(s.TlogPending(ctx, wsA, c.from, c.limit))
		if len(got) != c.want {
			t.Fatalf("TlogPending(from %d, limit %d): %d records, want %d", c.from, c.limit, len(got), c.want)
		}
		for i, r := range got {
			want := recs[c.from+int64(i)]
			if r.Seq != want.Seq || r.Workspace != wsA || string(r.Canonical()) != string(want.Canonical()) {
				t.Errorf("TlogPending(from %d) record %d:\n%s\nwant\n%s", c.from, i, r.Canonical(), want.Canonical())
			}
		}
	}
}

// testTlogIntegrate appends records of two workspaces while four
// integrators extend ws-a's tree at once: the tree holds each ws-a record
// once, in seq order, and its root is the one recomputed from the records
// alone; ws-b's records are no leaves of it.
func testTlogIntegrate(t *testing.T, s ladder.Store) {
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 30 {
				ws := []string{wsA, wsB}[(i+w)%2]
				if _, err := s.AppendAudit(ctx, entry(t, ws, ladder.AuditRoute, fmt.Sprintf("r-%d-%d", w, i), t0.Add(time.Duration(i)*time.Second), map[string]any{"i": i})); err != nil {
					t.Errorf("append: %v", err)
					return
				}
			}
		}()
	}
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				if _, err := translog.IntegrateAll(ctx, s, wsA); err != nil {
					t.Errorf("integrate: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	size := must(translog.IntegrateAll(ctx, s, wsA))
	recs := must(s.ListAudit(ctx, ladder.AuditQuery{Workspace: wsA, Limit: 1000}))
	if size != int64(len(recs)) || size != 30 {
		t.Fatalf("tree size %d, want the %d records of %s", size, len(recs), wsA)
	}
	head, last := must2(s.TlogHead(ctx, wsA))
	if head != size || last != recs[len(recs)-1].Seq {
		t.Errorf("head = (%d, %d), want (%d, %d)", head, last, size, recs[len(recs)-1].Seq)
	}
	var mem translog.MemoryReader
	for i, r := range recs {
		check(t, mem.Add(translog.LeafData(r)))
		if leaf := must(s.TlogLeafOf(ctx, wsA, r.Seq)); leaf != int64(i) {
			t.Errorf("record %d is leaf %d, want %d", r.Seq, leaf, i)
		}
	}
	want := must(tlog.TreeHash(size, &mem))
	if got := must(tlog.TreeHash(size, translog.Reader(ctx, s, wsA))); got != want {
		t.Errorf("stored root %s, recomputed from the records %s", got, want)
	}
	bRecs := must(s.ListAudit(ctx, ladder.AuditQuery{Workspace: wsB, Limit: 1}))
	if _, err := s.TlogLeafOf(ctx, wsA, bRecs[0].Seq); !errors.Is(err, ladder.ErrNotFound) {
		t.Errorf("a ws-b record as a leaf of ws-a: err = %v, want ErrNotFound", err)
	}
	if _, err := s.TlogHashes(ctx, wsA, []int64{tlog.StoredHashCount(size) + 10}); !errors.Is(err, ladder.ErrNotFound) {
		t.Errorf("a stored hash beyond the tree: err = %v, want ErrNotFound", err)
	}
	if n, _ := must2(s.TlogHead(ctx, wsB)); n != 0 {
		t.Errorf("ws-b's tree has %d leaves before it was integrated", n)
	}
	if wss := must(s.TlogWorkspaces(ctx, false)); !slices.Equal(wss, []string{wsA, wsB}) {
		t.Errorf("workspaces = %v, want [ws-a ws-b]", wss)
	}
	if wss := must(s.TlogWorkspaces(ctx, true)); !slices.Equal(wss, []string{wsB}) {
		t.Errorf("pending = %v, want [ws-b] (ws-a's tree is up to date)", wss)
	}
	must(translog.IntegrateAll(ctx, s, wsB))
	if wss := must(s.TlogWorkspaces(ctx, true)); len(wss) != 0 {
		t.Errorf("pending once both are integrated = %v, want none", wss)
	}
}

// testTlogIntegrateStale: an integration takes its leaves (fed by the
// store, or its records read back and hashed) before its transaction;
// when another integrator moves the head in between (here, inside its
// taking of the leaves), it does the work again from the new head instead
// of appending leaves the tree already has, and the tree holds each record
// once.
func testTlogIntegrateStale(t *testing.T, s ladder.Store) {
	ctx := context.Background()
	add := func(n int) {
		for i := range n {
			must(s.AppendAudit(ctx, entry(t, wsA, ladder.AuditRoute, fmt.Sprintf("r-%d", i), t0, map[string]any{"i": i})))
		}
	}
	add(5)
	r := &racingTlog{Store: s, race: func() {
		// Another integrator takes the five, and two more records come.
		if added, size := must2(translog.Integrate(ctx, s, wsA)); added != 5 || size != 5 {
			t.Errorf("the other integrator added %d to size %d, want 5 to 5", added, size)
		}
		add(2)
	}}
	added, size := must2(translog.Integrate(ctx, r, wsA))
	if r.reads != 2 {
		t.Fatalf("the integration took pending leaves %d times, want 2 (once stale, once from the new head)", r.reads)
	}
	if added != 2 || size != 7 {
		t.Errorf("integrate after the head moved: added %d to size %d, want 2 to 7", added, size)
	}
	recs := must(s.ListAudit(ctx, ladder.AuditQuery{Workspace: wsA, Limit: 100}))
	var mem translog.MemoryReader
	for i, rec := range recs {
		check(t, mem.Add(translog.LeafData(rec)))
		if leaf := must(s.TlogLeafOf(ctx, wsA, rec.Seq)); leaf != int64(i) {
			t.Errorf("record %d is leaf %d, want %d", rec.Seq, leaf, i)
		}
	}
	want := must(tlog.TreeHash(7, &mem))
	if got := must(tlog.TreeHash(7, translog.Reader(ctx, s, wsA))); got != want {
		t.Errorf("stored root %s, recomputed from the records %s", got, want)
	}
	if head, last := must2(s.TlogHead(ctx, wsA)); head != 7 || last != recs[6].Seq {
		t.Errorf("head = (%d, %d), want (7, %d)", head, last, recs[6].Seq)
	}
}

// racingTlog is a store whose integration's first taking of pending
// leaves runs race after the store's feed answered, as if another
// integrator ran in between. An integration takes its leaves once a try,
// asking the feed first (translog's pending), so reads counts the tries.
type racingTlog struct {
	ladder.Store
	race  func()
	reads int
}

func (r *racingTlog) TlogFed(ws string, from int64, limit int) []ladder.FedLeaf {
	fed := r.Store.TlogFed(ws, from, limit)
	if r.reads++; r.reads == 1 {
		r.race()
	}
	return fed
}

// testTlogCheckpoints: the first checkpoint kept at a size wins, the
// latest is the largest, and the meta state of a database created with the
// logs is adopted, with no global chain.
func testTlogCheckpoints(t *testing.T, s ladder.Store) {
	ctx := context.Background()
	if _, err := s.LatestCheckpoint(ctx, wsA); !errors.Is(err, ladder.ErrNotFound) {
		t.Fatalf("latest checkpoint of an empty log: err = %v, want ErrNotFound", err)
	}
	cp := func(size int64, note string) ladder.TlogCheckpoint {
		return ladder.TlogCheckpoint{Workspace: wsA, Size: size, Root: [32]byte{byte(size)}, Note: note, At: t0.Add(time.Duration(size) * time.Minute)}
	}
	first := must(s.SaveCheckpoint(ctx, cp(3, "first")))
	again := must(s.SaveCheckpoint(ctx, cp(3, "second")))
	if again.Note != "first" || first.Note != "first" || !again.At.Equal(t0.Add(3*time.Minute)) {
		t.Errorf("a second checkpoint at one size: kept %q at %v, want the first", again.Note, again.At)
	}
	must(s.SaveCheckpoint(ctx, cp(7, "seven")))
	must(s.SaveCheckpoint(ctx, cp(5, "five")))
	if l := must(s.LatestCheckpoint(ctx, wsA)); l.Size != 7 || l.Note != "seven" || l.Root != [32]byte{7} {
		t.Errorf("latest = %+v, want size 7", l)
	}
	if _, err := s.LatestCheckpoint(ctx, wsB); !errors.Is(err, ladder.ErrNotFound) {
		t.Errorf("ws-b sees ws-a's checkpoints: err = %v", err)
	}
	m := must(s.TlogMeta(ctx))
	if !m.Adopted || m.LegacySeq != 0 || m.ChainSeq != 0 {
		t.Errorf("meta of a new database = %+v, want adopted, no legacy records, no global chain", m)
	}
	if won := must(s.TlogAdopt(ctx)); won {
		t.Error("TlogAdopt won on an adopted database")
	}
	check(t, s.TlogUnadopt(ctx))
	if won := must(s.TlogAdopt(ctx)); !won {
		t.Error("TlogAdopt lost after TlogUnadopt")
	}
}

// LeafMigration is a store's logs as its test of migration 0018 (which
// dropped tlog_leaf) finds them before the migration: twelve records over
// two workspaces, both logs integrated, and each record's leaf index.
type LeafMigration struct {
	Records []ladder.AuditRecord
	Leaves  map[int64]int64 // leaf index by seq
}

// LeafMigrationRecords appends and integrates LeafMigration's records.
func LeafMigrationRecords(t *testing.T, s ladder.Store) LeafMigration {
	t.Helper()
	ctx := t.Context()
	var entries []ladder.AuditEntry
	for i := range 12 {
		entries = append(entries, entry(t, []string{wsA, wsB, wsA}[i%3], ladder.AuditRoute, fmt.Sprint("rt_", i), t0, map[string]any{"i": i}))
	}
	recs, err := s.AppendAudit(ctx, entries...)
	if err != nil {
		t.Fatal(err)
	}
	m := LeafMigration{Records: recs, Leaves: map[int64]int64{}}
	for _, ws := range []string{wsA, wsB} {
		if _, err := translog.IntegrateAll(ctx, s, ws); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range m.Records {
		if m.Leaves[r.Seq], err = s.TlogLeafOf(ctx, r.Workspace, r.Seq); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

// CheckLeavesKept checks a store after migration 0018 against m: every
// record keeps its leaf index, the logs grow on from where they were, and
// a record not yet integrated is no leaf.
func (m LeafMigration) CheckLeavesKept(t *testing.T, s ladder.Store) {
	t.Helper()
	ctx := t.Context()
	for _, r := range m.Records {
		if idx, err := s.TlogLeafOf(ctx, r.Workspace, r.Seq); err != nil || idx != m.Leaves[r.Seq] {
			t.Errorf("leaf of seq %d after migration 0018 = %d, %v; want %d", r.Seq, idx, err, m.Leaves[r.Seq])
		}
	}
	more, err := s.AppendAudit(ctx, entry(t, wsA, ladder.AuditRoute, "rt_a", t0, nil), entry(t, wsB, ladder.AuditRoute, "rt_b", t0, nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := translog.IntegrateAll(ctx, s, wsA); err != nil {
		t.Fatal(err)
	}
	if idx, err := s.TlogLeafOf(ctx, wsA, more[0].Seq); err != nil || idx != 8 {
		t.Errorf("leaf of the first record after migration 0018 = %d, %v; want 8 (%s had 8)", idx, err, wsA)
	}
	if _, err := s.TlogLeafOf(ctx, wsB, more[1].Seq); !errors.Is(err, ladder.ErrNotFound) {
		t.Errorf("leaf of a %s record not yet integrated: %v, want ErrNotFound", wsB, err)
	}
}

// ReadBack is translog.ReadBack of every leaf from position from on,
// failing t on an error.
func ReadBack(t testing.TB, s ladder.TlogStore, workspace string, from int64) []ladder.FedLeaf {
	t.Helper()
	leaves, err := translog.ReadBack(context.Background(), s, workspace, from, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	return leaves
}

// CheckFed checks that s's feed holds, for each workspace and from
// position 0 on, the leaves of the workspace's records on disk, position
// by position, and no other, for a store that wrote all of them: nothing
// of an op rolled back or a batch that failed, nothing missing, nothing
// at a position another record took.
func CheckFed(t testing.TB, s ladder.TlogStore) {
	t.Helper()
	wss, err := s.TlogWorkspaces(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	for _, ws := range wss {
		if diff := cmp.Diff(ReadBack(t, s, ws, 0), s.TlogFed(ws, 0, 1<<20)); diff != "" {
			t.Errorf("workspace %s: fed leaves differ from the records read back (-read +fed):\n%s", ws, diff)
		}
	}
}

// AskFed asks s for each workspace's fed leaves, as an integration does
// when it starts on a workspace: a store's feed keeps a workspace's leaves
// only from then on.
func AskFed(s ladder.TlogStore, workspaces ...string) {
	for _, ws := range workspaces {
		s.TlogFed(ws, 0, 0)
	}
}

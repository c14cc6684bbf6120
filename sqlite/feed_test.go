package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/storetest"
	"github.com/ladderhq/ladder/translog"
)

// TestFeedAcrossProcesses: two stores on one file (two processes) append
// in turn to one workspace. Each one's feed holds only its own leaves, so
// an integration through either meets a position it was not fed, reads
// that record back, and takes its fed leaves again after it; the tree it
// builds is the one the records give, and a leaf once integrated is let
// go of.
func TestFeedAcrossProcesses(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ladder.db")
	a := openPath(t, path)
	defer a.Close()
	b := openPath(t, path)
	defer b.Close()
	storetest.AskFed(a, "ws-a")
	storetest.AskFed(b, "ws-a")
	n := 0
	add := func(s *Store, k int) {
		t.Helper()
		for range k {
			e, err := ladder.NewAuditEntry("ws-a", "system", ladder.AuditRoute, fmt.Sprint("item-", n), t0.Add(time.Duration(n)*time.Second), map[string]int{"n": n})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.AppendAudit(ctx, e); err != nil {
				t.Fatal(err)
			}
			n++
		}
	}
	add(a, 3)
	add(b, 2)
	add(a, 4)
	add(b, 1)
	// a was fed positions 0–2 and 5–8, b 3–4 and 9.
	if got := a.TlogFed("ws-a", 0, 100); len(got) != 3 || got[2].Index != 2 {
		t.Fatalf("a's feed from 0: %v, want positions 0 to 2", got)
	}
	if got := a.TlogFed("ws-a", 3, 100); len(got) != 0 {
		t.Fatalf("a's feed from 3 (b's record): %v, want none", got)
	}
	if diff := cmp.Diff(storetest.ReadBack(t, a, "ws-a", 5)[:4], a.TlogFed("ws-a", 5, 100)); diff != "" {
		t.Fatalf("a's feed from 5 differs from the records (-read +fed):\n%s", diff)
	}
	if got := a.TlogFed("ws-a", 5, 2); len(got) != 2 {
		t.Fatalf("a's feed from 5, limit 2: %d leaves", len(got))
	}
	size, err := translog.IntegrateAll(ctx, a, "ws-a")
	if err != nil || size != int64(n) {
		t.Fatalf("IntegrateAll through a: size %d, %v; want %d", size, err, n)
	}
	var mem translog.MemoryReader
	recs, err := a.TlogPending(ctx, "ws-a", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range recs {
		if err := mem.Add(translog.LeafData(rec)); err != nil {
			t.Fatal(err)
		}
	}
	want, err := tlog.TreeHash(size, &mem)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tlog.TreeHash(size, translog.Reader(ctx, a, "ws-a"))
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("tree integrated through a has root %v; its records give %v", got, want)
	}
	if got := a.TlogFed("ws-a", size, 100); len(got) != 0 {
		t.Errorf("a's feed after the tree took every leaf: %v", got)
	}
	if held := a.feed.Held("ws-a"); held != 0 {
		t.Errorf("a's feed still holds %d integrated leaves", held)
	}
}

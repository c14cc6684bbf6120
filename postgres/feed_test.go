package postgres

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/storetest"
)

// TestFeedsMatchRecords: two replicas append to two workspaces at once,
// with ops that append and then fail (rolled back to their savepoint) in
// the batches. Every record on disk was fed, as its leaf, to the one
// replica whose batch committed it, at its position: no leaf of a
// rolled-back op, none at a position another record took, none missing.
func TestFeedsMatchRecords(t *testing.T) {
	schema := newSchema(t)
	replicas := []*Store{openTest(t, schema), openTest(t, schema)}
	for _, s := range replicas {
		storetest.AskFed(s, "ws-a", "ws-b")
	}
	boom := errors.New("boom")
	var wg sync.WaitGroup
	for r, s := range replicas {
		for g := range 6 {
			wg.Go(func() {
				for c := range 12 {
					ws := []string{"ws-a", "ws-b"}[(g+c)%2]
					subject := fmt.Sprintf("r%d-g%d-c%d", r, g, c)
					err := s.write(t.Context(), func(w *wtx) error {
						if err := w.appendAudit(nil, wsEntry(t, ws, subject, map[string]int{"c": c})); err != nil {
							return err
						}
						if c%4 == 3 {
							return boom
						}
						return nil
					})
					if (err != nil) != (c%4 == 3) || (err != nil && !errors.Is(err, boom)) {
						t.Errorf("%s: %v", subject, err)
					}
				}
			})
		}
	}
	wg.Wait()
	for _, ws := range []string{"ws-a", "ws-b"} {
		recs := storetest.ReadBack(t, replicas[0], ws, 0)
		want := map[int64]ladder.FedLeaf{}
		for _, l := range recs {
			want[l.Index] = l
		}
		got := map[int64]ladder.FedLeaf{}
		for r, s := range replicas {
			for from := int64(0); from < int64(len(recs)); {
				fed := s.TlogFed(ws, from, len(recs))
				if len(fed) == 0 {
					from++
					continue
				}
				for _, l := range fed {
					if _, dup := got[l.Index]; dup {
						t.Errorf("%s: position %d fed to replica %d and to another", ws, l.Index, r)
					}
					got[l.Index] = l
				}
				from += int64(len(fed))
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: the replicas' fed leaves differ from the records read back (-read +fed):\n%s", ws, diff)
		}
		if len(recs) != 2*6*12*3/4/2 {
			t.Errorf("%s: %d records, want %d", ws, len(recs), 2*6*12*3/4/2)
		}
	}
}

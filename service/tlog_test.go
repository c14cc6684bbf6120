package service_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/service"
	"github.com/ladderhq/ladder/sqlite"
)

// readBackCounter is a store that counts the records integrations read
// back (TlogPending).
type readBackCounter struct {
	ladder.Store
	read atomic.Int64
}

func (c *readBackCounter) TlogPending(ctx context.Context, ws string, from int64, limit int) ([]ladder.AuditRecord, error) {
	recs, err := c.Store.TlogPending(ctx, ws, from, limit)
	c.read.Add(int64(len(recs)))
	return recs, err
}

// TestIntegrateLogsTakesFedLeaves: the leaves a store fed reach the
// integrator through the service's own wrapping of the store, so the
// server's integration loop (IntegrateLogs) makes leaves of every record
// this process wrote after its first integration, in two workspaces and
// over more than one integration, without reading one back. Records another process wrote
// to the file are read back, after the fed ones before them, and the
// records after them are taken from the feed again. Each time, every
// record is a leaf, and every leaf the one its record gives (AuditVerify
// recomputes them).
func TestIntegrateLogsTakesFedLeaves(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ladder.db")
	st, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	counter := &readBackCounter{Store: st}
	svc, err := service.New(service.Options{Store: counter})
	if err != nil {
		t.Fatal(err)
	}
	n, written := 0, map[string]int64{}
	write := func(s ladder.Store, ws string, k int) {
		t.Helper()
		written[ws] += int64(k)
		for range k {
			e, err := ladder.NewAuditEntry(ws, "system", ladder.AuditCall, fmt.Sprint("call-", n), time.Date(2026, 12, 7, 9, 0, n, 0, time.UTC), map[string]int{"n": n})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.AppendAudit(ctx, e); err != nil {
				t.Fatal(err)
			}
			n++
		}
	}
	integrate := func(wantRead func(int64) bool, what string) {
		t.Helper()
		counter.read.Store(0)
		if err := svc.IntegrateLogs(ctx); err != nil {
			t.Fatal(err)
		}
		if got := counter.read.Load(); !wantRead(got) {
			t.Errorf("%s: %d records read back", what, got)
		}
		res, err := svc.AuditVerify(ctx, ladder.Principal{Workspace: service.AllWorkspaces})
		if err != nil || !res.Intact {
			t.Fatalf("%s: AuditVerify %+v, %v", what, res, err)
		}
		for _, l := range res.Logs {
			if l.Leaves != written[l.Workspace] {
				t.Errorf("%s: workspace %s's log has %d leaves, want its %d records", what, l.Workspace, l.Leaves, written[l.Workspace])
			}
		}
	}
	// The first integration of a workspace reads back what came before it
	// asked: the feed keeps a workspace's leaves only from then on.
	write(st, "ws-a", 1)
	write(st, "ws-b", 1)
	integrate(func(n int64) bool { return n == 2 }, "records written before the first integration")
	write(st, "ws-a", 300) // more than one integration's batch (256)
	write(st, "ws-b", 7)
	integrate(func(n int64) bool { return n == 0 }, "records this process wrote")

	other, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	write(st, "ws-a", 2)
	write(other, "ws-a", 5)
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	write(st, "ws-a", 3)
	integrate(func(n int64) bool { return n >= 5 && n <= 8 }, "2 records of this process, 5 of another, then 3 of this one")
	write(st, "ws-a", 4)
	integrate(func(n int64) bool { return n == 0 }, "records this process wrote after the other's")
}

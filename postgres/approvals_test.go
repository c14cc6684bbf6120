package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ladderhq/ladder"
)

func pendingApproval(id, requestedBy string, life time.Duration, maxPending int) ladder.Approval {
	now := time.Now()
	return ladder.Approval{ID: id, Workspace: "ws-a", Capability: "acme:human", Kind: ladder.ApprovalHumanGate, Status: ladder.ApprovalPending,
		Payload: json.RawMessage(`{"n":1}`), RequestedBy: requestedBy, CreatedAt: now, ExpiresAt: now.Add(life), MaxPending: maxPending}
}

// TestReplicasPendingCap: two replicas create pending approvals for four
// keys at once, each batch mixing keys in its own order. Each key ends with
// exactly the cap: the per-key advisory lock makes count and insert one
// step across replicas, and batches that lock keys in opposite orders are
// retried, not failed.
func TestReplicasPendingCap(t *testing.T) {
	schema := newSchema(t)
	a, b := openTest(t, schema), openTest(t, schema)
	const keys, perKey, maxPending = 4, 60, 10
	var refused atomic.Int32
	created := make([]atomic.Int32, keys)
	var wg sync.WaitGroup
	for i := range keys * perKey {
		s := a
		if i%2 == 1 {
			s = b
		}
		k := i % keys
		wg.Go(func() {
			ap := pendingApproval(fmt.Sprintf("ap_%d", i), fmt.Sprintf("k_%d", k), time.Hour, maxPending)
			_, ok, err := s.CreateApproval(context.Background(), ap, entry(t, ladder.AuditApproval, ap.ID, nil))
			switch {
			case errors.Is(err, ladder.ErrTooManyPending):
				refused.Add(1)
			case err != nil:
				t.Errorf("CreateApproval %s: %v", ap.ID, err)
			case ok:
				created[k].Add(1)
			}
		})
	}
	wg.Wait()
	for k := range keys {
		n := 0
		for _, ap := range must(a.ListApprovals(t.Context(), ladder.ApprovalQuery{Workspace: "ws-a", Status: ladder.ApprovalPending, RequestedBy: fmt.Sprintf("k_%d", k), Limit: 500}))(t) {
			if ap.Status == ladder.ApprovalPending {
				n++
			}
		}
		if created[k].Load() != maxPending || n != maxPending {
			t.Errorf("key k_%d: %d created, %d pending; want %d", k, created[k].Load(), n, maxPending)
		}
	}
	if refused.Load() != keys*(perKey-maxPending) {
		t.Errorf("%d refused, want %d", refused.Load(), keys*(perKey-maxPending))
	}
}

// TestReplicaClockSkew: a replica whose clock is ten minutes behind asks
// for an approval that waits 600 ms and decides it after that, by the
// database's clock: the deadline was counted from the database's clock, the
// decision is ErrExpired, and the other replica reads expired.
func TestReplicaClockSkew(t *testing.T) {
	schema := newSchema(t)
	right := openTest(t, schema)
	behind, err := Open(t.Context(), testDSN(t), Options{Schema: schema, Now: func() time.Time { return time.Now().Add(-10 * time.Minute) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { behind.Close() })
	ap := pendingApproval("ap_skew", "k_agent", 600*time.Millisecond, 0)
	ap.CreatedAt, ap.ExpiresAt = ap.CreatedAt.Add(-10*time.Minute), ap.ExpiresAt.Add(-10*time.Minute)
	got, _ := must2(behind.CreateApproval(t.Context(), ap, entry(t, ladder.AuditApproval, ap.ID, nil)))(t)
	if d := time.Until(got.ExpiresAt); d < 300*time.Millisecond || d > time.Second {
		t.Fatalf("the deadline is %v away, want about 600ms from the database's clock", d)
	}
	if st := must(right.GetApproval(t.Context(), "ws-a", ap.ID))(t).Status; st != ladder.ApprovalPending {
		t.Fatalf("before the deadline: %s", st)
	}
	time.Sleep(time.Until(got.ExpiresAt) + 100*time.Millisecond)
	dec := got
	dec.Status, dec.DecidedBy = ladder.ApprovalExecuting, "k_human"
	if _, err := behind.UpdateApproval(t.Context(), dec, ladder.ApprovalPending, []ladder.AuditEntry{entry(t, ladder.AuditApproval, ap.ID, nil)}); !errors.Is(err, ladder.ErrExpired) {
		t.Fatalf("a decision after the deadline on the replica behind: %v, want ErrExpired", err)
	}
	for _, s := range []*Store{right, behind} {
		if st := must(s.GetApproval(t.Context(), "ws-a", ap.ID))(t).Status; st != ladder.ApprovalExpired {
			t.Errorf("after the deadline a replica reads %s", st)
		}
	}
}

// must2 is must for two values.
func must2[A, B any](x A, y B, err error) func(testing.TB) (A, B) {
	return func(tb testing.TB) (A, B) {
		tb.Helper()
		if err != nil {
			tb.Fatal(err)
		}
		return x, y
	}
}

// TestReplicasExpireOnce: two replicas read the same approvals past their
// deadline at once, by id and in lists: each expiry is stored once, with
// one audit record, and every read says expired.
func TestReplicasExpireOnce(t *testing.T) {
	schema := newSchema(t)
	a, b := openTest(t, schema), openTest(t, schema)
	const n = 20
	var last ladder.Approval
	for i := range n {
		ap := pendingApproval(fmt.Sprintf("ap_%d", i), "k_agent", 300*time.Millisecond, 0)
		last, _ = must2(a.CreateApproval(t.Context(), ap, entry(t, ladder.AuditApproval, ap.ID, map[string]any{"event": "requested"})))(t)
	}
	time.Sleep(time.Until(last.ExpiresAt) + 100*time.Millisecond)
	var wg sync.WaitGroup
	for r := range 8 {
		s := []*Store{a, b}[r%2]
		wg.Go(func() {
			list, err := s.ListApprovals(context.Background(), ladder.ApprovalQuery{Workspace: "ws-a", Status: ladder.ApprovalPending, Limit: 500})
			if err != nil {
				t.Errorf("list: %v", err)
			}
			for _, ap := range list {
				if ap.Status != ladder.ApprovalExpired {
					t.Errorf("list: %s is %s", ap.ID, ap.Status)
				}
			}
		})
		for i := range n {
			wg.Go(func() {
				got, err := s.GetApproval(context.Background(), "ws-a", fmt.Sprintf("ap_%d", i))
				if err != nil || got.Status != ladder.ApprovalExpired {
					t.Errorf("get ap_%d: %s %v", i, got.Status, err)
				}
			})
		}
	}
	wg.Wait()
	expiries := 0
	if err := a.WalkAudit(t.Context(), 0, func(r ladder.AuditRecord) error {
		var d struct{ Event string }
		if json.Unmarshal(r.Data, &d) == nil && d.Event == "expired" {
			expiries++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if expiries != n {
		t.Errorf("%d expiry records for %d approvals", expiries, n)
	}
	if _, err := ladder.VerifyAudit(t.Context(), a); err != nil {
		t.Error(err)
	}
}

package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/config"
	"github.com/ladderhq/ladder/service"
	"github.com/ladderhq/ladder/sqlite"
)

// TestInboxPagesEveryItemOnce builds an inbox of pending approvals, shadow
// proposals (some reviewed) and sampled audits (some reviewed) with many
// routes that are not sampled in between, then pages it with small pages
// and a read budget so small that sources run out of reads mid-page. Every
// item the inbox should show is on exactly one page, newest first, and
// nothing else is.
func TestInboxPagesEveryItemOnce(t *testing.T) {
	ctx := context.Background()
	cfg, err := config.Parse("demo.yaml", config.Demo())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	now := time.Date(2026, 9, 1, 9, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	tick := func() { mu.Lock(); now = now.Add(time.Second); mu.Unlock() }
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "ladder.db"), sqlite.Options{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	parts := cfg.Parts()
	svc, err := service.New(service.Options{Store: st, Workspaces: parts.Workspaces, Rules: parts.Rules, Gates: parts.Gates, AuditSecret: []byte("inbox"), Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.EnsureSteps(ctx, svc.InitialStates()); err != nil {
		t.Fatal(err)
	}
	const ws = "vantrow-bills"
	agent := ladder.Principal{KeyID: "agent1", Workspace: ws, Kind: ladder.KeyAgent}
	human := ladder.Principal{KeyID: "human1", Workspace: ws, Kind: ladder.KeyHuman}

	var want []string // what the inbox shows, oldest first
	call := func(bill string) ladder.CallResult {
		t.Helper()
		raw, _ := json.Marshal(map[string]any{"bill_id": bill, "linehaul_usd": 1850.0, "fuel_surcharge_usd": 212.5, "idempotency_key": "rate-" + bill})
		res, err := svc.CallCapability(ctx, agent, "rates:approveRate", raw)
		tick()
		if err != nil {
			e := ladder.AsError(err)
			id, _ := e.Data["proposal_id"].(string)
			rt, _ := e.Data["route_id"].(string)
			if e.Code != ladder.CodeStepNeedsPerson || id == "" {
				t.Fatalf("call %s: %v", bill, err)
			}
			return ladder.CallResult{ApprovalID: id, RouteID: rt}
		}
		return res
	}
	review := func(routeID string) {
		t.Helper()
		if _, err := svc.Review(ctx, human, routeID, ladder.ReviewRequest{Verdict: "agree"}); err != nil {
			t.Fatalf("review %s: %v", routeID, err)
		}
		tick()
	}
	routes := func(prefix string, n int) {
		t.Helper()
		for i := range n {
			rt, err := svc.Route(ctx, agent, ladder.RouteRequest{Step: "read_bill", Item: fmt.Sprintf("%s-%03d", prefix, i)})
			if err != nil {
				t.Fatal(err)
			}
			tick()
			if rt.Audit {
				if i%2 == 0 {
					review(rt.ID)
				} else {
					want = append(want, rt.ID)
				}
			}
		}
	}
	for i := range 12 {
		want = append(want, call(fmt.Sprintf("B-P%02d", i)).ApprovalID)
		routes(fmt.Sprintf("P%02d", i), 15)
	}
	if _, err := svc.Pin(ctx, human, "bills", "rate_check", ladder.PinRequest{Lane: "shadow", Reason: "compare"}, true); err != nil {
		t.Fatal(err)
	}
	for i := range 12 {
		res := call(fmt.Sprintf("B-S%02d", i))
		if i%3 == 0 {
			review(res.RouteID)
		} else {
			want = append(want, res.ApprovalID)
		}
		routes(fmt.Sprintf("S%02d", i), 15)
	}
	slices.Reverse(want)
	kinds := map[byte]int{}
	for _, id := range want {
		kinds[id[0]]++
	}
	if kinds['a'] == 0 || kinds['r'] == 0 {
		t.Fatalf("the inbox to page lacks approvals or audits: %v", kinds)
	}

	for _, tc := range []struct{ limit, scan int }{{100, 100000}, {5, 100000}, {4, 7}, {1, 3}, {3, 1}} {
		t.Run(fmt.Sprintf("limit %d, scan %d", tc.limit, tc.scan), func(t *testing.T) {
			var got []string
			cursor, pages := "", 0
			for {
				pages++
				if pages > 1000 {
					t.Fatal("the inbox does not end")
				}
				pg, err := service.InboxScanning(svc, ctx, human, cursor, tc.limit, tc.scan)
				if err != nil {
					t.Fatal(err)
				}
				if len(pg.Items) > tc.limit {
					t.Fatalf("a page of %d items, limit %d", len(pg.Items), tc.limit)
				}
				for _, it := range pg.Items {
					// The pending proposals were made in propose; the
					// step is in shadow now.
					if lanes := (ladder.StepLanes{Proposed: ladder.LanePropose, Now: ladder.LaneShadow}); it.Kind == ladder.InboxApproval && it.Lanes != lanes {
						t.Errorf("%s: lanes %+v, want %+v", it.Approval.ID, it.Lanes, lanes)
					}
					if it.Approval != nil {
						got = append(got, it.Approval.ID)
					} else {
						got = append(got, it.Route.ID)
					}
				}
				if cursor = pg.NextCursor; cursor == "" {
					break
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("items over %d pages (-want +got):\n%s", pages, diff)
			}
		})
	}
}

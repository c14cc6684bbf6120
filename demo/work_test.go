package demo_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/demo"
	"github.com/ladderhq/ladder/internal/testenv"
)

// TestSeedWork checks that the seeded demo leaves work in every workspace's
// inbox and gate history, made through the service: approvals of human
// gates and proposals, shadow proposals, sampled audits that carry the
// agent's output, and gate decisions, all named by business items.
func TestSeedWork(t *testing.T) {
	e := testenv.StartWith(t, "", testenv.Options{Seed: true})
	ctx := context.Background()
	w, err := demo.SeedWork(ctx, e.Svc)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(demo.Work{Approvals: 6, Shadows: 2, Audits: 6, Gate: 7}, w); d != "" {
		t.Errorf("SeedWork's counts (-want +got):\n%s", d)
	}

	type counts struct{ Approvals, Shadows, Audits int }
	got := map[string]counts{}
	for _, ws := range []string{"vantrow-bills", "checkcall-loads", "partner-programs"} {
		p := ladder.Principal{Workspace: ws, Kind: ladder.KeyHuman}
		pg, err := e.Svc.Inbox(ctx, p, "", 100)
		if err != nil {
			t.Fatal(err)
		}
		var c counts
		for _, it := range pg.Items {
			switch it.Kind {
			case ladder.InboxApproval:
				c.Approvals++
				if strings.HasPrefix(it.Approval.Item, "rate-") || strings.Contains(it.Approval.Item, "approve-") {
					t.Errorf("%s: approval %s names its idempotency key %q as its item", ws, it.Approval.ID, it.Approval.Item)
				}
			case ladder.InboxShadow:
				c.Shadows++
			case ladder.InboxAudit:
				c.Audits++
				var out map[string]any
				if err := json.Unmarshal(it.Route.Features, &out); err != nil || len(out) == 0 {
					t.Errorf("%s: sampled audit of %s carries no output of the agent: %s", ws, it.Route.Item, it.Route.Features)
				}
				if !strings.HasPrefix(it.Route.Item, "BILL-") && !strings.HasPrefix(it.Route.Item, "LOAD-") {
					t.Errorf("%s: sampled audit names item %q, want a business id", ws, it.Route.Item)
				}
			}
		}
		got[ws] = c
	}
	want := map[string]counts{
		"vantrow-bills":    {Approvals: 3, Shadows: 2, Audits: 4},
		"checkcall-loads":  {Audits: 2},
		"partner-programs": {Approvals: 3},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("inbox items per workspace (-want +got):\n%s", d)
	}
	for _, ws := range []string{"vantrow-bills", "iia-gate"} {
		pg, err := e.Svc.GateHistory(ctx, ws, ladder.GateHistoryRequest{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		states := map[string]bool{}
		for _, d := range pg.Decisions {
			states[d.GateState] = true
		}
		if len(pg.Decisions) < 3 || !states["PASS"] || !states["ESCALATE"] {
			t.Errorf("%s gate history: %d decisions, states %v; want at least 3 with PASS and ESCALATE", ws, len(pg.Decisions), states)
		}
	}
}

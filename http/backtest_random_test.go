package http_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ladderhq/ladder/internal/testenv"
)

// randomConfig has small thresholds, so a few hundred random reviews over
// some weeks move both steps up and down the ladder.
const randomConfig = `
workspaces:
  - id: acme
    queues:
      - id: pay
        steps:
          - id: pay_invoice
            name: Pay the invoice
            money_moving: true
            lane: shadow
            audit_rate: 0.5
            rules: {propose_min_weeks: 1, propose_min_n: 15, propose_lower: 0.7, auto_min_weeks: 1, auto_min_n: 25, auto_lower: 0.8, sev1_clean_weeks: 1}
          - id: read_invoice
            name: Read the invoice
            lane: shadow
            rules: {propose_min_weeks: 1, propose_min_n: 15, propose_lower: 0.75, auto_min_weeks: 1, auto_min_n: 25, auto_lower: 0.85, sev1_clean_weeks: 1}
`

// TestBacktestReplaysRandomHistories drives random histories through the
// REST API of a real store (reviews in every lane with every severity,
// adjudications, outcomes, pins and unpins, at random times) and requires
// the backtest under the rules in force to make exactly the recorded lane
// changes: the same moves, at the same instants, with the same numbers.
// (Before, the backtest evaluated once a week: moves came out at week ends,
// and an import's outcomes were counted as one.) A fixed set of seeds runs
// every time, and a new one; a failure names its seed.
//
// The fixed seeds are known to make the rules move the steps, so a change
// that stops the rules from moving them fails here. A new seed may draw a
// tame history (a person pinning the steps for most of it, say): its replay
// is still compared, but its tameness is logged, not failed, since it says
// nothing about ladder.
func TestBacktestReplaysRandomHistories(t *testing.T) {
	fixed := []uint64{1, 3, 4}
	seeds := append(fixed, rand.Uint64())
	seen := map[string]bool{}
	for i, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			e := testenv.Start(t, randomConfig)
			randomHistory(t, e, seed)
			steps, err := e.Svc.Backtest(context.Background(), "acme", time.Time{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			byRule, rules := 0, map[string]int{}
			for _, st := range steps {
				for _, m := range st.Actual {
					rules[m.Rule]++
					seen[m.Rule] = true
					if !strings.Contains(m.Rule, "by a person") {
						byRule++
					}
				}
				if diff := cmp.Diff(st.Actual, st.Simulated); diff != "" || st.EndActual != st.EndSim {
					t.Errorf("seed %d, %s: the replay differs from what happened (-actual +simulated):\n%s(ends %s, simulated %s)", seed, st.Step, diff, st.EndActual, st.EndSim)
				}
			}
			t.Logf("seed %d: lane changes by rule: %v", seed, rules)
			switch {
			case byRule < 1 && i >= len(fixed):
				t.Logf("seed %d: the rules moved the steps 0 times; only the replay of the person's moves was compared", seed)
			case byRule < 1:
				t.Errorf("seed %d: the rules moved the steps %d times; the history is too tame to test the replay", seed, byRule)
			}
		})
	}
	if len(seen) < 5 {
		t.Errorf("the histories made lane changes by %d rules only (%v); they are too tame to test the replay", len(seen), seen)
	}
}

// randomHistory records a random history of the acme steps through the
// REST API, the clock moving a random time (never zero) before each event.
func randomHistory(t *testing.T, e *testenv.Env, seed uint64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 17))
	agent, human := e.Keys["acme/agent"], e.Keys["acme/human"]
	steps := []string{"pay_invoice", "read_invoice"}
	// The agent's accuracy swings between good and poor spells, so steps
	// climb and fall.
	accuracy := map[string]float64{}
	type reviewed struct{ route, step, verdict string }
	var done []reviewed
	pinned := map[string]bool{}
	item := 0
	review := func(step string) {
		item++
		rt := e.Do("POST", "/v1/route", agent, map[string]any{"step": step, "item": fmt.Sprintf("INV-%d", item)})
		if rt.Status/100 != 2 {
			t.Fatalf("route: %d %s", rt.Status, rt.Raw)
		}
		id := rt.Body["route_id"].(string)
		body := map[string]any{"verdict": "agree"}
		if rng.Float64() >= accuracy[step] {
			body = map[string]any{"verdict": "disagree", "severity": 1 + rng.IntN(3)}
			if rng.IntN(3) > 0 {
				body["severity"] = 2 + rng.IntN(2) // severity 1 is the rarer
			}
		}
		if rng.IntN(5) == 0 {
			body["operator_error"] = rng.IntN(6) == 0
		}
		if r := e.Do("POST", "/v1/routes/"+id+"/review", human, body); r.Status/100 != 2 {
			t.Fatalf("review: %d %s", r.Status, r.Raw)
		}
		done = append(done, reviewed{id, step, body["verdict"].(string)})
	}
	// The first record of each step is made when its state starts, so the
	// replay, which starts a step at its first record, starts it then too.
	for _, s := range steps {
		accuracy[s] = 0.97
		review(s)
	}
	for i := range 600 {
		if i%100 == 0 {
			for _, s := range steps {
				accuracy[s] = []float64{0.97, 0.99, 0.8}[rng.IntN(3)]
			}
		}
		e.Clock.Advance(time.Duration(1+rng.Int64N(int64(5*time.Hour))) / time.Millisecond * time.Millisecond)
		step := steps[rng.IntN(len(steps))]
		switch n := rng.IntN(100); {
		case n < 70:
			review(step)
		case n < 78 && len(done) > 0: // a person overrules an earlier verdict
			d := done[rng.IntN(len(done))]
			v := "agree"
			body := map[string]any{"adjudication": true, "verdict": v}
			if d.verdict == "agree" {
				body = map[string]any{"adjudication": true, "verdict": "disagree", "severity": 1 + rng.IntN(3)}
			}
			if r := e.Do("POST", "/v1/routes/"+d.route+"/review", human, body); r.Status/100 != 2 {
				t.Fatalf("adjudication: %d %s", r.Status, r.Raw)
			}
		case n < 92:
			by := []string{"agent", "person"}[rng.IntN(2)]
			ok := rng.Float64() >= 0.03
			if by == "agent" {
				ok = rng.Float64() >= 0.08
			}
			if r := e.Do("POST", "/v1/outcomes", agent, map[string]any{"step": step, "item": fmt.Sprintf("INV-%d", rng.IntN(item+1)), "handled_by": by, "ok": ok}); r.Status/100 != 2 {
				t.Fatalf("outcome: %d %s", r.Status, r.Raw)
			}
		case n < 94 && !pinned[step]:
			lane := []string{"shadow", "propose", "auto"}[rng.IntN(3)]
			if r := e.Do("POST", "/v1/steps/pay/"+step+"/pin", human, map[string]any{"lane": lane, "reason": "a random pin"}); r.Status/100 != 2 {
				t.Fatalf("pin: %d %s", r.Status, r.Raw)
			}
			pinned[step] = true
		case n < 98 && pinned[step]:
			if r := e.Do("POST", "/v1/steps/pay/"+step+"/unpin", human, map[string]any{"reason": "a random unpin"}); r.Status/100 != 2 {
				t.Fatalf("unpin: %d %s", r.Status, r.Raw)
			}
			pinned[step] = false
		}
	}
}

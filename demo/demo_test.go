package demo_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ladderhq/ladder"

	"github.com/ladderhq/ladder/internal/testenv"
)

// TestDemoFigures checks that the synthetic history gives the figures seed
// 000 shows, computed by the real evidence code.
func TestDemoFigures(t *testing.T) {
	e := testenv.StartWith(t, "", testenv.Options{Seed: true})
	agent := e.Keys["vantrow-bills/agent"]

	steps := e.Do("GET", "/v1/steps", agent, nil)
	var alone []string
	for _, s := range steps.Body["steps"].([]any) {
		s := s.(map[string]any)
		if s["runs_alone"] == true {
			alone = append(alone, s["step"].(string))
		}
	}
	if strings.Join(alone, ",") != "read_bill,post_tms" {
		t.Fatalf("vantrow-bills runs alone: %v, want read_bill and post_tms", alone)
	}

	pack := e.Do("GET", "/v1/steps/bills/post_tms/evidence", agent, nil).Body
	r4 := pack["figures"].(map[string]any)["rolling_4"].(map[string]any)
	if acc := r4["accuracy"].(float64); acc < 0.99 || acc > 1.0 || pack["audit_rate"] != 0.1 {
		t.Fatalf("post_tms: rolling-4 accuracy %v, audit rate %v", acc, pack["audit_rate"])
	}
	if why := pack["why"].(string); !strings.HasPrefix(why, "Audits in the last 2 weeks: ") || !strings.HasSuffix(why, "; the step drops back if the outcome test or the audits turn.") {
		t.Fatalf("post_tms why: %q", why)
	}

	pack = e.Do("GET", "/v1/steps/bills/decide_hold/evidence", agent, nil).Body
	if pack["lane"] != "shadow" || pack["evidence_to_week"] != 14.0 || len(pack["figures"].(map[string]any)["weekly"].([]any)) != 14 {
		t.Fatalf("decide_hold: lane %v, evidence to week %v", pack["lane"], pack["evidence_to_week"])
	}

	// Every demo step sits in the lane the config starts it in, and no rule
	// is due to move it: the figures agree with the lanes.
	for i := range e.Config.Workspaces {
		w := &e.Config.Workspaces[i]
		agentKey := e.Keys[w.ID+"/agent"]
		for _, st := range w.Steps() {
			p := e.Do("GET", "/v1/steps/"+st.Queue+"/"+st.ID+"/evidence", agentKey, nil).Body
			if p["lane"] != string(st.StartLane) {
				t.Errorf("%s/%s: lane %v, config says %s", w.ID, st.ID, p["lane"], st.StartLane)
			}
			if nm, ok := p["next_move"].(map[string]any); ok && strings.Contains(nm["rule"].(string), "due at the next review") {
				t.Errorf("%s/%s: a rule is due: %v", w.ID, st.ID, nm)
			}
		}
	}
}

// TestOperatorErrorIsTheRulesFigure: the pack's operator error is the figure
// the rules compare with, over the same window. For steps in auto that is
// what their promotion to auto recorded (people handle none of their items
// any more); before, the pack showed n 0 beside a promotion that used 160.
func TestOperatorErrorIsTheRulesFigure(t *testing.T) {
	e := testenv.StartWith(t, "", testenv.Options{Seed: true})
	agent := e.Keys["vantrow-bills/agent"]
	for _, step := range []string{"read_bill", "post_tms"} {
		pack := e.Do("GET", "/v1/steps/bills/"+step+"/evidence", agent, nil).Body
		op := pack["figures"].(map[string]any)["operator_error"].(map[string]any)
		var promo map[string]any
		for _, c := range pack["lane_changes"].([]any) {
			if c := c.(map[string]any); c["to"] == "auto" && c["rule"] == "propose_to_auto" {
				promo = c["numbers"].(map[string]any)
			}
		}
		if promo == nil {
			t.Fatalf("%s: no promotion to auto in the pack", step)
		}
		if op["n"] != promo["operator_n"] || op["errors"] != promo["operator_errors"] || op["n"].(float64) == 0 {
			t.Errorf("%s: pack operator error n %v errors %v, promotion used n %v errors %v", step, op["n"], op["errors"], promo["operator_n"], promo["operator_errors"])
		}
	}
}

// TestBacktestReproducesTheDemoHistory: with the rules in force, backtest
// replays the demo's history into the lane changes it recorded, in the same
// ISO weeks, for every step of every workspace, from windows that start
// before the history and inside it. (Before, every move came out one or two
// weeks off: the replay counted weeks in lane from --since, not from when
// the step entered its lane, and dropped the weeks before --since from its
// rolling windows.)
func TestBacktestReproducesTheDemoHistory(t *testing.T) {
	e := testenv.StartWith(t, "", testenv.Options{Seed: true})
	type move struct{ Week, From, To, Rule string }
	moves := func(ms []ladder.BacktestMove) []move {
		var out []move
		for _, m := range ms {
			out = append(out, move{m.ISOWeek, string(m.From), string(m.To), m.Rule})
		}
		return out
	}
	for _, weeks := range []int{15, 12, 9, 6} {
		since := e.Clock.Now().AddDate(0, 0, -7*weeks)
		for _, ws := range e.Svc.WorkspaceIDs() {
			steps, err := e.Svc.Backtest(context.Background(), ws, since, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, st := range steps {
				if diff := cmp.Diff(moves(st.Actual), moves(st.Simulated)); diff != "" || st.EndActual != st.EndSim {
					t.Errorf("since %d weeks, %s/%s: simulated moves differ from what happened (-actual +simulated):\n%s(ends %s, simulated %s)", weeks, ws, st.Step, diff, st.EndActual, st.EndSim)
				}
			}
		}
	}
}

// TestBacktestReplaysLiveMoves: a severity-1 audit failure that demoted a
// step live, and a person's pin and unpin, are replayed in the week they
// happened (before, backtest said post_tms ends in auto after its live
// demotion, and skipped pins).
func TestBacktestReplaysLiveMoves(t *testing.T) {
	e := testenv.StartWith(t, "", testenv.Options{Seed: true})
	agent, human := e.Keys["vantrow-bills/agent"], e.Keys["vantrow-bills/human"]
	rt := e.Do("POST", "/v1/route", agent, map[string]any{"step": "post_tms", "item": "BILL-4242"}).Body
	res := e.Do("POST", "/v1/routes/"+rt["route_id"].(string)+"/review", human, map[string]any{"verdict": "disagree", "severity": 1}).Body
	if res["lane"] != "propose" {
		t.Fatalf("a severity-1 audit failure on post_tms left it in %v: %v", res["lane"], res)
	}
	e.Do("POST", "/v1/steps/bills/match_load/pin", human, map[string]any{"lane": "shadow", "reason": "new carrier format"})
	e.Do("POST", "/v1/steps/bills/match_load/unpin", human, map[string]any{"reason": "format handled"})

	steps, err := e.Svc.Backtest(context.Background(), "vantrow-bills", e.Clock.Now().AddDate(0, 0, -7*15), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range steps {
		if st.Step != "post_tms" && st.Step != "match_load" {
			continue
		}
		if diff := cmp.Diff(st.Actual, st.Simulated, cmp.Comparer(func(a, b ladder.BacktestMove) bool {
			return a.ISOWeek == b.ISOWeek && a.From == b.From && a.To == b.To && a.Rule == b.Rule
		})); diff != "" || st.EndActual != st.EndSim {
			t.Errorf("%s: replay differs from what happened (-actual +simulated):\n%s(ends %s, simulated %s)", st.Step, diff, st.EndActual, st.EndSim)
		}
		if last := st.Actual[len(st.Actual)-1]; (st.Step == "post_tms" && last.Rule != "auto_to_propose_sev1_audit_failure") || (st.Step == "match_load" && last.Rule != "unpinned by a person") {
			t.Errorf("%s: last recorded move %+v", st.Step, last)
		}
	}
}

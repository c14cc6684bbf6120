package demo_test

import (
	"strings"
	"testing"

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

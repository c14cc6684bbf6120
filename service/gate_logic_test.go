package service

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/gate"
)

// releaseEvidence is evidence for score_release_hold on bill, with the
// dispute open or not.
func releaseEvidence(bill string, disputeOpen bool) string {
	return fmt.Sprintf(`{"bill_id":%q,"pod_received":true,"invoice_matches_rate_con":true,"carrier_docs_verified":true,"dispute_open":%t,"hold_reason_cleared_before_release":true}`, bill, disputeOpen)
}

func TestAuthorize(t *testing.T) {
	s := newDemoService(t)
	ctx := context.Background()
	iia := ladder.Principal{KeyID: "agent3", Workspace: "iia-gate", Kind: ladder.KeyAgent}
	type answer struct {
		State  string
		Refuse refusal
	}
	for _, tt := range []struct {
		name string
		p    ladder.Principal
		req  ladder.AuthorizeRequest
		want answer
	}{
		{"evidence that passes", demoAgent, ladder.AuthorizeRequest{Case: "release_payment", PreconditionFn: "score_release_hold", Evidence: json.RawMessage(releaseEvidence("B-1", false))}, answer{State: gate.StatePass}},
		{"an open dispute escalates", demoAgent, ladder.AuthorizeRequest{Case: "release_payment", PreconditionFn: "score_release_hold", Evidence: json.RawMessage(releaseEvidence("B-1", true))}, answer{State: gate.StateEscalate}},
		{"evidence not an object", demoAgent, ladder.AuthorizeRequest{Case: "release_payment", PreconditionFn: "score_release_hold", Evidence: json.RawMessage(`[true]`)}, answer{Refuse: refusal{Code: ladder.CodeEvidenceInvalid, Field: "evidence"}}},
		{"evidence missing a check", demoAgent, ladder.AuthorizeRequest{Case: "release_payment", PreconditionFn: "score_release_hold", Evidence: json.RawMessage(`{"bill_id":"B-1"}`)}, answer{Refuse: refusal{Code: ladder.CodeEvidenceInvalid, Field: "evidence"}}},
		{"a commit only a person makes", iia, ladder.AuthorizeRequest{Case: "ai_investment", PreconditionFn: "team_capability", Evidence: json.RawMessage(`{}`)}, answer{Refuse: refusal{Code: ladder.CodeBypassToHuman, Field: "precondition_fn"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g, err := s.Authorize(ctx, tt.p, tt.req)
			got := answer{State: g.GateState, Refuse: refusalOf(t, err)}
			if got.Refuse.Code == ladder.CodeEvidenceInvalid && strings.HasPrefix(got.Refuse.Field, "evidence") {
				got.Refuse.Field = "evidence" // evidence or evidence.<the field>
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Authorize (-want +got):\n%s", diff)
			}
			if err == nil && (g.DecisionID == "" || g.Authorized != (g.GateState == gate.StatePass) || g.Case != "release_payment") {
				t.Errorf("decision: %+v", g)
			}
		})
	}

	// Four decisions are recorded in the demo workspace's history (two
	// here, two below), the bypass in iia-gate's.
	for _, tt := range []struct {
		name string
		req  ladder.GateHistoryRequest
		want refusal
	}{
		{"limit out of range", ladder.GateHistoryRequest{Limit: -1}, invalid("limit")},
		{"limit over the maximum", ladder.GateHistoryRequest{Limit: MaxGateHistoryLimit + 1}, invalid("limit")},
		{"unknown gate state", ladder.GateHistoryRequest{GateState: "MAYBE"}, invalid("gate_state")},
		{"since not a time", ladder.GateHistoryRequest{Since: "yesterday"}, invalid("since")},
		{"until not a time", ladder.GateHistoryRequest{Until: "2026-13-01"}, invalid("until")},
		{"a cursor of another list", ladder.GateHistoryRequest{Cursor: "ap1:3"}, refusal{Code: ladder.CodeBadCursor, Field: "cursor"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.GateHistory(ctx, demoWS, tt.req)
			if diff := cmp.Diff(tt.want, refusalOf(t, err)); diff != "" {
				t.Errorf("GateHistory (-want +got):\n%s", diff)
			}
		})
	}
	for _, ev := range []string{releaseEvidence("B-2", false), releaseEvidence("B-3", true)} {
		if _, err := s.Authorize(ctx, demoAgent, ladder.AuthorizeRequest{Case: "release_payment", PreconditionFn: "score_release_hold", Evidence: json.RawMessage(ev)}); err != nil {
			t.Fatal(err)
		}
	}
	states := func(req ladder.GateHistoryRequest) []string {
		t.Helper()
		var out []string
		for pages := 0; ; pages++ {
			page, err := s.GateHistory(ctx, demoWS, req)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range page.Decisions {
				out = append(out, d.GateState)
			}
			if !page.HasMore {
				return out
			}
			if pages > 10 {
				t.Fatal("paging does not end")
			}
			req.Cursor = page.NextCursor
		}
	}
	for _, tt := range []struct {
		name string
		req  ladder.GateHistoryRequest
		want []string
	}{
		{"all, newest first", ladder.GateHistoryRequest{}, []string{gate.StateEscalate, gate.StatePass, gate.StateEscalate, gate.StatePass}},
		{"one a page", ladder.GateHistoryRequest{Limit: 1}, []string{gate.StateEscalate, gate.StatePass, gate.StateEscalate, gate.StatePass}},
		{"passes only", ladder.GateHistoryRequest{GateState: gate.StatePass, Limit: 1}, []string{gate.StatePass, gate.StatePass}},
		{"before the first", ladder.GateHistoryRequest{Until: "2026-01-01T00:00:00Z"}, nil},
		{"since the clock's time", ladder.GateHistoryRequest{Since: "2026-09-01T09:00:00Z", GateState: gate.StateEscalate}, []string{gate.StateEscalate, gate.StateEscalate}},
		{"another case", ladder.GateHistoryRequest{Case: "ai_investment"}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, states(tt.req)); diff != "" {
				t.Errorf("gate states (-want +got):\n%s", diff)
			}
		})
	}
	iiaPage, err := s.GateHistory(ctx, "iia-gate", ladder.GateHistoryRequest{})
	if err != nil || len(iiaPage.Decisions) != 1 || iiaPage.Decisions[0].GateState != gate.StateBypassToHuman {
		t.Errorf("iia-gate history: %+v, %v", iiaPage.Decisions, err)
	}
}

// TestGatedCall: a gated call at a step that runs alone runs only on
// evidence that passes for the very bill it names; evidence the gate holds
// leaves an escalation for a person, and evidence naming another bill
// leaves none.
func TestGatedCall(t *testing.T) {
	run := &fakeRunner{}
	s := newDemoService(t, withRunner(run))
	ctx := context.Background()
	if _, err := s.Pin(ctx, demoHuman, "bills", "decide_hold", ladder.PinRequest{Lane: string(ladder.LaneAuto), Reason: "test the gate alone"}, true); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		Status      string
		Refuse      refusal
		HasApproval bool
	}
	for _, tt := range []struct {
		name string
		raw  string
		want answer
	}{
		{"no evidence", `{"bill_id":"B-1"}`, answer{Refuse: invalid("evidence")}},
		{"evidence that passes", `{"bill_id":"B-1","evidence":` + releaseEvidence("B-1", false) + `}`, answer{Status: ladder.CallResultExecuted}},
		{"evidence the gate holds", `{"bill_id":"B-2","evidence":` + releaseEvidence("B-2", true) + `}`, answer{Refuse: refusal{Code: ladder.CodeGateHeld}, HasApproval: true}},
		{"evidence of another bill", `{"bill_id":"B-3","evidence":` + releaseEvidence("B-1", false) + `}`, answer{Refuse: refusal{Code: ladder.CodeGateHeld}}},
		{"evidence too large", `{"bill_id":"B-4","evidence":{"note":"` + strings.Repeat("n", 70<<10) + `"}}`, answer{Refuse: invalid("evidence")}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res, err := s.CallCapability(ctx, demoAgent, "payments:releaseHold", json.RawMessage(tt.raw))
			got := answer{Status: res.Status, Refuse: refusalOf(t, err)}
			if err != nil {
				_, got.HasApproval = ladder.AsError(err).Data["approval_id"]
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("CallCapability (-want +got):\n%s", diff)
			}
		})
	}
	if n := run.ran(); n != 1 || string(run.reqs[0].Payload) != `{"bill_id":"B-1"}` {
		t.Errorf("ran %d calls (%+v), want B-1 once", n, run.reqs)
	}
}

func TestRedactEvidence(t *testing.T) {
	in := map[string]any{
		"api_key":  "abc",
		"Password": "hunter2",
		"token":    "",
		"secret":   7.0,
		"ok":       true,
		"nested":   map[string]any{"access_key": "x", "list": []any{"plain", map[string]any{"private_key": "k"}}},
	}
	want := map[string]any{
		"api_key":  gate.Redacted,
		"Password": gate.Redacted,
		"token":    "",
		"secret":   7.0,
		"ok":       true,
		"nested":   map[string]any{"access_key": gate.Redacted, "list": []any{"plain", map[string]any{"private_key": gate.Redacted}}},
	}
	if diff := cmp.Diff(want, RedactEvidence(in)); diff != "" {
		t.Errorf("RedactEvidence (-want +got):\n%s", diff)
	}
	if in["api_key"] != "abc" {
		t.Error("RedactEvidence changed its input")
	}
}

func TestKeys(t *testing.T) {
	s := newDemoService(t)
	ctx := context.Background()
	token, err := s.Bootstrap(ctx, "")
	if err != nil || token == "" {
		t.Fatalf("Bootstrap on an empty key table: %q, %v", token, err)
	}
	if again, err := s.Bootstrap(ctx, ""); err != nil || again != "" {
		t.Errorf("Bootstrap with keys: %q, %v", again, err)
	}
	admin, err := s.Authenticate(ctx, token)
	if err != nil || admin.Kind != ladder.KeyAdmin || admin.Workspace != AllWorkspaces {
		t.Errorf("bootstrap admin: %+v, %v", admin, err)
	}

	for _, tt := range []struct {
		name string
		req  ladder.KeyRequest
		want refusal
	}{
		{"unknown kind", ladder.KeyRequest{Workspace: demoWS, Kind: "robot"}, refusal{Code: ladder.CodeInvalidArgument}},
		{"agent key over every workspace", ladder.KeyRequest{Workspace: AllWorkspaces, Kind: ladder.KeyAgent}, refusal{Code: ladder.CodeInvalidArgument}},
		{"workspace not in the config", ladder.KeyRequest{Workspace: "nope", Kind: ladder.KeyAgent}, refusal{Code: ladder.CodeInvalidArgument}},
		{"expiry in the past", ladder.KeyRequest{Workspace: demoWS, Kind: ladder.KeyAgent, ExpiresIn: -time.Hour}, refusal{Code: ladder.CodeInvalidArgument}},
		{"agent key", ladder.KeyRequest{Workspace: demoWS, Kind: ladder.KeyAgent, Name: "bot"}, refusal{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := s.CreateKey(ctx, "cli", tt.req)
			got := refusalOf(t, err)
			got.Field = ""
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("CreateKey (-want +got):\n%s", diff)
			}
		})
	}
	agent, agentToken, err := s.CreateKey(ctx, "cli", ladder.KeyRequest{Workspace: demoWS, Kind: ladder.KeyAgent})
	if err != nil {
		t.Fatal(err)
	}
	_, expiringToken, err := s.CreateKey(ctx, "cli", ladder.KeyRequest{Workspace: demoWS, Kind: ladder.KeyHuman, ExpiresIn: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.RevokeKey(ctx, "cli", "partner-programs", agent.ID); refusalOf(t, err).Code != ladder.CodeNotFound {
		t.Errorf("revoking a key of another workspace: %v", err)
	}
	if _, err := s.RevokeKey(ctx, "cli", demoWS, "nope"); refusalOf(t, err).Code != ladder.CodeNotFound {
		t.Errorf("revoking an unknown key: %v", err)
	}
	p, err := s.Authenticate(ctx, agentToken)
	if diff := cmp.Diff(ladder.Principal{KeyID: agent.ID, Workspace: demoWS, Kind: ladder.KeyAgent}, p); diff != "" || err != nil {
		t.Errorf("Authenticate before revocation (-want +got):\n%s%v", diff, err)
	}
	if k, err := s.RevokeKey(ctx, "cli", demoWS, agent.ID); err != nil || k.RevokedAt == nil {
		t.Fatalf("RevokeKey: %+v, %v", k, err)
	}
	keys, err := s.ListKeys(ctx, demoWS)
	if err != nil || len(keys) != 3 {
		t.Errorf("ListKeys(%s): %d keys, %v; want 3", demoWS, len(keys), err)
	}
	if all, err := s.ListKeys(ctx, AllWorkspaces); err != nil || len(all) != 4 {
		t.Errorf("ListKeys(*): %d keys, %v; want 4", len(all), err)
	}

	later, err := New(Options{Store: s.store, Workspaces: nil, Now: func() time.Time { return s.now().Add(2 * time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		s     *Service
		token string
		want  ladder.Code
	}{
		{"no token", s, "", ladder.CodeKeyMissing},
		{"malformed", s, "not-a-key", ladder.CodeKeyInvalid},
		{"revoked", s, agentToken, ladder.CodeKeyInvalid},
		{"unknown key", s, "ldr_nosuchkey_0123456789abcdef", ladder.CodeKeyInvalid},
		{"wrong secret of a live key", s, expiringToken + "x", ladder.CodeKeyInvalid},
		{"before its expiry", s, expiringToken, ""},
		{"expired", later, expiringToken, ladder.CodeKeyInvalid},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.s.Authenticate(ctx, tt.token)
			if got := refusalOf(t, err).Code; got != tt.want {
				t.Errorf("Authenticate: %v, want code %q", err, tt.want)
			}
		})
	}
}

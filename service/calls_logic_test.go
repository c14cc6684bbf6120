package service

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/upstream"
)

// fakeRunner records the calls it executes and answers with err, or with
// {"ok":true}.
type fakeRunner struct {
	mu   sync.Mutex
	reqs []upstream.Request
	err  error
}

func (r *fakeRunner) Execute(_ context.Context, _ ladder.Executor, req upstream.Request) (upstream.Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reqs = append(r.reqs, req)
	if r.err != nil {
		return upstream.Result{Status: 502}, r.err
	}
	return upstream.Result{Body: json.RawMessage(`{"ok":true}`), Status: 200}, nil
}

func (r *fakeRunner) ran() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.reqs)
}

func withRunner(r Runner) func(*Options) { return func(o *Options) { o.Runner = r } }

var partnerAgent = ladder.Principal{KeyID: "agent2", Workspace: "partner-programs", Kind: ladder.KeyAgent}

// TestCallCapabilityRefusals: every refusal on the way to a call names
// its code and field, and nothing runs.
func TestCallCapabilityRefusals(t *testing.T) {
	run := &fakeRunner{}
	s := newDemoService(t, withRunner(run))
	ctx := context.Background()
	for _, tt := range []struct {
		name string
		p    ladder.Principal
		cap  string
		raw  string
		want refusal
	}{
		{"unknown capability", demoAgent, "tms:deleteBill", `{}`, refusal{Code: ladder.CodeUnknownCapability}},
		{"capability of another workspace", demoAgent, "ticket6:readLedger", `{}`, refusal{Code: ladder.CodeUnknownCapability}},
		{"declared, not served", partnerAgent, "ticket7:recordPayoutReceipt", `{}`, refusal{Code: ladder.CodeCapabilityNotServed}},
		{"arguments not an object", demoAgent, "tms:postBill", `"x"`, invalid("arguments")},
		{"payload misses a required field", demoAgent, "tms:postBill", `{"bill_id":"B-1"}`, invalid("payload.amount_usd")},
		{"payload field of the wrong type", demoAgent, "tms:postBill", `{"bill_id":"B-1","amount_usd":"ten"}`, invalid("payload.amount_usd")},
		{"item empty", demoAgent, "tms:postBill", `{"bill_id":"","amount_usd":10}`, invalid("payload.bill_id")},
		{"workspace inside the payload", demoAgent, "tms:postBill", `{"bill_id":"B-1","amount_usd":10,"workspace":"partner-programs"}`, invalid("payload.workspace")},
		{"scope name inside the payload", partnerAgent, "ticket6:readLedger", `{"program":"partner-2027","relationship":"relationship:partner-2027:creator-1","payload":{"Program":"x"}}`, invalid("payload.Program")},
		{"scope of another workspace", partnerAgent, "ticket6:readLedger", `{"program":"partner-2099","relationship":"relationship:partner-2027:creator-1"}`, refusal{Code: ladder.CodeWorkspaceRefused}},
		{"scope field missing", partnerAgent, "ticket6:readLedger", `{"program":"partner-2027"}`, invalid("relationship")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.CallCapability(ctx, tt.p, tt.cap, json.RawMessage(tt.raw))
			if diff := cmp.Diff(tt.want, refusalOf(t, err)); diff != "" {
				t.Errorf("CallCapability(%s, %s) (-want +got):\n%s", tt.cap, tt.raw, diff)
			}
		})
	}
	if n := run.ran(); n != 0 {
		t.Errorf("%d calls ran after refusals", n)
	}
}

// TestCallCapabilityRunsOnce: a call at a step in auto runs once; its
// idempotency key replays the first answer and refuses another payload; a
// failing upstream answers UPSTREAM_FAILED, and its replay says so again
// without running.
func TestCallCapabilityRunsOnce(t *testing.T) {
	run := &fakeRunner{}
	s := newDemoService(t, withRunner(run))
	ctx := context.Background()
	call := func(name, raw string) (ladder.CallResult, error) {
		t.Helper()
		return s.CallCapability(ctx, demoAgent, name, json.RawMessage(raw))
	}
	first, err := call("tms:postBill", `{"bill_id":"B-1","amount_usd":10,"idempotency_key":"post-B-1"}`)
	if err != nil {
		t.Fatal(err)
	}
	if first.Status != ladder.CallResultExecuted || first.Replayed || first.CallID == "" || first.RouteID == "" || string(first.Result) != `{"ok":true}` {
		t.Errorf("first call: %+v", first)
	}
	// The portable name and another spelling of the same payload.
	again, err := call("tms_postBill", `{"payload":{"amount_usd":10},"idempotency_key":"post-B-1","bill_id":"B-1"}`)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ladder.CallResult{Status: ladder.CallResultExecuted, Capability: "tms:postBill", CallID: first.CallID, RouteID: first.RouteID, Replayed: true, Result: first.Result}, again,
		cmpIgnoreMessage); diff != "" {
		t.Errorf("replay (-want +got):\n%s", diff)
	}
	_, err = call("tms:postBill", `{"bill_id":"B-1","amount_usd":11,"idempotency_key":"post-B-1"}`)
	if diff := cmp.Diff(refusal{Code: ladder.CodeIdempotencyKeyUsed, Field: "idempotency_key"}, refusalOf(t, err)); diff != "" {
		t.Errorf("same key, other payload (-want +got):\n%s", diff)
	}
	if n := run.ran(); n != 1 {
		t.Errorf("ran %d times, want once", n)
	}
	if got := run.reqs[0]; got.CallID != first.CallID || got.IdempotencyKey != "post-B-1" || string(got.Payload) != `{"amount_usd":10,"bill_id":"B-1"}` {
		t.Errorf("upstream request: %+v", got)
	}

	run.err = errors.New("connection refused")
	_, err = call("tms:postBill", `{"bill_id":"B-2","amount_usd":10,"idempotency_key":"post-B-2"}`)
	le := ladder.AsError(err)
	if le.Code != ladder.CodeUpstreamFailed || le.Data["call_id"] == nil {
		t.Errorf("failing upstream: %v (%+v)", err, le.Data)
	}
	run.err = nil
	_, err = call("tms:postBill", `{"bill_id":"B-2","amount_usd":10,"idempotency_key":"post-B-2"}`)
	if re := ladder.AsError(err); re.Code != ladder.CodeUpstreamFailed || re.Data["replayed"] != true {
		t.Errorf("replay of a failed call: %v (%+v)", err, re.Data)
	}
	if n := run.ran(); n != 2 {
		t.Errorf("ran %d times, want 2 (the replay of a failure runs nothing)", n)
	}
}

var cmpIgnoreMessage = cmp.Transformer("noMessage", func(r ladder.CallResult) ladder.CallResult { r.Message = ""; return r })

// TestApprovalDecisions: a proposal waits for a person; a rejection needs
// a reason; approving runs it once; a second decision is refused; an agent
// sees only its own approvals.
func TestApprovalDecisions(t *testing.T) {
	run := &fakeRunner{}
	s := newDemoService(t, withRunner(run))
	ctx := context.Background()
	propose := func(bill string) string {
		t.Helper()
		res, err := s.CallCapability(ctx, demoAgent, "rates:approveRate", json.RawMessage(`{"bill_id":"`+bill+`","linehaul_usd":1850,"fuel_surcharge_usd":212.5,"idempotency_key":"rate-`+bill+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != ladder.CallResultApprovalRequested || res.Lane != string(ladder.LanePropose) && res.Lane != "" {
			t.Fatalf("proposal %s: %+v", bill, res)
		}
		return res.ApprovalID
	}
	a1, a2 := propose("B-1"), propose("B-2")
	if again := propose("B-1"); again != a1 {
		t.Errorf("a repeated proposal made approval %s, want %s", again, a1)
	}
	if run.ran() != 0 {
		t.Fatal("a proposal ran")
	}

	other := ladder.Principal{KeyID: "agent9", Workspace: demoWS, Kind: ladder.KeyAgent}
	for _, tt := range []struct {
		name string
		do   func() error
		want refusal
	}{
		{"status of an unknown approval", func() error { _, err := s.ApprovalStatus(ctx, demoHuman, "ap_nope"); return err }, refusal{Code: ladder.CodeApprovalNotFound}},
		{"status of another agent's approval", func() error { _, err := s.ApprovalStatus(ctx, other, a1); return err }, refusal{Code: ladder.CodeApprovalNotFound}},
		{"reject without a reason", func() error { _, err := s.Reject(ctx, demoHuman, a2, ladder.DecideRequest{Reason: " "}); return err }, invalid("reason")},
		{"approve an unknown approval", func() error { _, err := s.Approve(ctx, demoHuman, "ap_nope", ladder.DecideRequest{}); return err }, refusal{Code: ladder.CodeApprovalNotFound}},
		{"approve with a payload not an object", func() error {
			_, err := s.Approve(ctx, demoHuman, a1, ladder.DecideRequest{Payload: json.RawMessage(`[1]`)})
			return err
		}, invalid("payload")},
		{"approve with a scope name in the payload", func() error {
			_, err := s.Approve(ctx, demoHuman, a1, ladder.DecideRequest{Payload: json.RawMessage(`{"bill_id":"B-1","linehaul_usd":1,"fuel_surcharge_usd":1,"workspace":"x"}`)})
			return err
		}, invalid("payload.workspace")},
		{"approve with a payload off its schema", func() error {
			_, err := s.Approve(ctx, demoHuman, a1, ladder.DecideRequest{Payload: json.RawMessage(`{"bill_id":"B-1","linehaul_usd":1}`)})
			return err
		}, invalid("payload.fuel_surcharge_usd")},
		{"retry an approval that did not fail", func() error { _, err := s.Retry(ctx, demoHuman, a1); return err }, refusal{Code: ladder.CodeApprovalClosed}},
		{"retry an unknown approval", func() error { _, err := s.Retry(ctx, demoHuman, "ap_nope"); return err }, refusal{Code: ladder.CodeApprovalNotFound}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, refusalOf(t, tt.do())); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}

	mine, err := s.ApprovalStatus(ctx, demoAgent, a1)
	if err != nil || mine.Status != ladder.ApprovalPending || mine.StepLane != ladder.LanePropose {
		t.Errorf("status of the agent's own approval: %+v, %v", mine, err)
	}
	approved, err := s.Approve(ctx, demoHuman, a1, ladder.DecideRequest{Reason: "rate matches", Payload: json.RawMessage(`{"bill_id":"B-1","linehaul_usd":1800,"fuel_surcharge_usd":212.5}`)})
	if err != nil {
		t.Fatal(err)
	}
	if approved.Status != ladder.ApprovalApproved || approved.DecidedBy != "human1" || string(approved.EditedPayload) != `{"bill_id":"B-1","fuel_surcharge_usd":212.5,"linehaul_usd":1800}` {
		t.Errorf("approved: %+v", approved)
	}
	if n := run.ran(); n != 1 || string(run.reqs[0].Payload) != string(approved.EditedPayload) {
		t.Errorf("approving ran %d calls (%+v), want the edited payload once", n, run.reqs)
	}
	rejected, err := s.Reject(ctx, demoHuman, a2, ladder.DecideRequest{Reason: "wrong carrier"})
	if err != nil || rejected.Status != ladder.ApprovalRejected || rejected.DecisionReason != "wrong carrier" {
		t.Errorf("rejected: %+v, %v", rejected, err)
	}
	for _, id := range []string{a1, a2} {
		_, err := s.Approve(ctx, demoHuman, id, ladder.DecideRequest{})
		if diff := cmp.Diff(refusal{Code: ladder.CodeApprovalClosed}, refusalOf(t, err)); diff != "" {
			t.Errorf("second decision on %s (-want +got):\n%s", id, diff)
		}
	}
	if n := run.ran(); n != 1 {
		t.Errorf("ran %d calls, want 1", n)
	}
	// The decisions are reviews of rate_check: one edited (disagree), one
	// rejected (disagree).
	page, err := s.ListApprovals(ctx, demoHuman, "", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	var statuses []ladder.ApprovalStatus
	for _, v := range page.Approvals {
		statuses = append(statuses, v.Status)
	}
	if diff := cmp.Diff([]ladder.ApprovalStatus{ladder.ApprovalRejected, ladder.ApprovalApproved}, statuses); diff != "" {
		t.Errorf("approvals newest first (-want +got):\n%s", diff)
	}
}

func TestReviewRefusals(t *testing.T) {
	s := newDemoService(t)
	ctx := context.Background()
	r, err := s.Route(ctx, demoAgent, ladder.RouteRequest{Step: "check_accessorials", Item: "B-1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		route string
		req   ladder.ReviewRequest
		want  refusal
	}{
		{"unknown verdict", r.ID, ladder.ReviewRequest{Verdict: "maybe"}, invalid("verdict")},
		{"severity out of range", r.ID, ladder.ReviewRequest{Verdict: "disagree", Severity: 4}, invalid("severity")},
		{"severity on an agreement", r.ID, ladder.ReviewRequest{Verdict: "agree", Severity: 2}, invalid("severity")},
		{"unknown route", "rt_nope", ladder.ReviewRequest{Verdict: "agree"}, refusal{Code: ladder.CodeRouteNotFound}},
		{"correction not JSON", r.ID, ladder.ReviewRequest{Verdict: "disagree", Severity: 2, Correction: json.RawMessage(`{`)}, invalid("correction")},
		{"recorded", r.ID, ladder.ReviewRequest{Verdict: "disagree", Severity: 2, Correction: json.RawMessage(`{"detention_usd": 0}`)}, refusal{}},
		{"reviewed twice", r.ID, ladder.ReviewRequest{Verdict: "agree"}, refusal{Code: ladder.CodeAlreadyReviewed}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.Review(ctx, demoHuman, tt.route, tt.req)
			if diff := cmp.Diff(tt.want, refusalOf(t, err)); diff != "" {
				t.Errorf("Review (-want +got):\n%s", diff)
			}
		})
	}
	pack, err := s.Evidence(ctx, demoWS, "bills", "check_accessorials")
	if err != nil {
		t.Fatal(err)
	}
	if pack.Lane != ladder.LaneShadow || len(pack.RecentDisagreements) != 1 || pack.RecentDisagreements[0].RouteID != r.ID {
		t.Errorf("evidence after one disagreement: lane %s, disagreements %+v", pack.Lane, pack.RecentDisagreements)
	}
}

package service

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ladderhq/ladder"
)

// TestWaitedResult: a call that waited answers with its approval's
// outcome, and as it was while the approval is still open.
func TestWaitedResult(t *testing.T) {
	exp := time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC)
	asked := ladder.CallResult{Status: ladder.CallResultApprovalRequested, Capability: "acme:pay", ApprovalID: "ap_1", ExpiresAt: &exp, Message: "asked", Proposal: json.RawMessage(`{"a":1}`)}
	view := func(st ladder.ApprovalStatus, mod func(*ladder.ApprovalView)) ladder.ApprovalView {
		v := ladder.ApprovalView{Approval: ladder.Approval{ID: "ap_1", Status: st, DecidedBy: "alice"}, Status: st}
		if mod != nil {
			mod(&v)
		}
		return v
	}
	for _, tc := range []struct {
		name   string
		view   ladder.ApprovalView
		status string
		says   string
		result string
		callID string
	}{
		{"pending", view(ladder.ApprovalPending, nil), ladder.CallResultApprovalRequested, "asked", "", ""},
		{"executing", view(ladder.ApprovalExecuting, nil), ladder.CallResultApprovalRequested, "asked", "", ""},
		{"ran", view(ladder.ApprovalApproved, func(v *ladder.ApprovalView) { v.Result, v.CallID = json.RawMessage(`{"ok":true}`), "call_1" }),
			ladder.CallResultExecuted, "approved by alice and the call ran once", `{"ok":true}`, "call_1"},
		{"failed", view(ladder.ApprovalApproved, func(v *ladder.ApprovalView) { v.ExecError, v.CallID = "UPSTREAM_FAILED: down", "call_2" }),
			ladder.CallResultExecutionFailed, "did not run: UPSTREAM_FAILED: down", "", "call_2"},
		{"rejected", view(ladder.ApprovalRejected, func(v *ladder.ApprovalView) { v.DecisionReason = "not this one" }),
			ladder.CallResultRejected, "Reason: not this one", "", ""},
		{"expired", view(ladder.ApprovalExpired, func(v *ladder.ApprovalView) { v.DecidedBy = "" }),
			ladder.CallResultExpired, "nobody decided in time", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := waitedResult(asked, tc.view)
			if got.Status != tc.status || !strings.Contains(got.Message, tc.says) || string(got.Result) != tc.result || got.CallID != tc.callID {
				t.Errorf("got %+v, want status %s saying %q with result %q and call %q", got, tc.status, tc.says, tc.result, tc.callID)
			}
			if diff := cmp.Diff(asked.ApprovalID, got.ApprovalID); diff != "" {
				t.Errorf("approval id (-want +got):\n%s", diff)
			}
		})
	}
}

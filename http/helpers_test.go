package http_test

import (
	"testing"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/internal/testenv"
)

func auditQuery(ws, kind string) ladder.AuditQuery {
	return ladder.AuditQuery{Workspace: ws, Kind: kind, Limit: 500}
}

func mustStep(t *testing.T, e *testenv.Env, id string) ladder.Step {
	t.Helper()
	st, err := e.Svc.FindStep("vantrow-bills", "", id)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func mustState(t *testing.T, e *testenv.Env, queue, step string) ladder.StepState {
	t.Helper()
	s, err := e.Store.GetStepState(t.Context(), ladder.StepKey{Workspace: "vantrow-bills", Queue: queue, Step: step})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func verifyAudit(e *testenv.Env) (int64, error) {
	return ladder.VerifyAudit(e.T.Context(), e.Store)
}

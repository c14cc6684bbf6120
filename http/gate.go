package http

import (
	"net/http"
	"strconv"

	"github.com/ladderhq/ladder"
)

// gateRoutes registers the evidence gate's REST endpoints (DESIGN.md §5):
// the precondition functions, authorize, and the decision history. Agent
// and human keys of the workspace may use them.
func (s *Server) gateRoutes() {
	s.handle("GET /v1/gate/functions", s.auth(s.gateFunctions, ladder.KeyAgent, ladder.KeyHuman))
	s.handle("POST /v1/gate/authorize", s.auth(s.gateAuthorize, ladder.KeyAgent, ladder.KeyHuman))
	s.handle("GET /v1/gate/history", s.auth(s.gateHistory, ladder.KeyAgent, ladder.KeyHuman))
}

func (s *Server) gateFunctions(w http.ResponseWriter, r *http.Request) error {
	v, err := s.svc.GateFunctions(principal(r).Workspace, r.URL.Query().Get("case"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

// gateAuthorize answers 200 with the decision for PASS and ESCALATE alike
// (a verdict, not a refusal; only gate_state PASS authorizes), and a
// refusal for a bypass_to_human commit, unknown names or bad evidence.
func (s *Server) gateAuthorize(w http.ResponseWriter, r *http.Request) error {
	var req ladder.AuthorizeRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	res, err := s.svc.Authorize(r.Context(), principal(r), req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) gateHistory(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	for name := range q {
		switch name {
		case "case", "precondition_fn", "action_id", "gate_state", "since", "until", "limit", "cursor":
		default:
			return &ladder.Error{Code: ladder.CodeInvalidArgument, Message: "The query parameter " + strconv.Quote(name) + " is unknown.",
				Hint: "filter with case, precondition_fn, action_id, gate_state, since, until; page with limit and cursor", Data: map[string]any{"field": name}}
		}
	}
	req := ladder.GateHistoryRequest{Case: q.Get("case"), PreconditionFn: q.Get("precondition_fn"), ActionID: q.Get("action_id"),
		GateState: q.Get("gate_state"), Since: q.Get("since"), Until: q.Get("until"), Cursor: q.Get("cursor")}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 {
			return &ladder.Error{Code: ladder.CodeInvalidArgument, Message: "The limit " + strconv.Quote(l) + " is not a positive whole number.",
				Hint: "send a limit from 1 to 500 (default 50)", Data: map[string]any{"field": "limit"}}
		}
		req.Limit = n
	}
	page, err := s.svc.GateHistory(r.Context(), principal(r).Workspace, req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

package http

import (
	"net/http"

	"github.com/ladderhq/ladder"
)

// ladderRoutes registers the ladder's REST endpoints (routes, reviews,
// outcomes, steps, evidence, pins).
func (s *Server) ladderRoutes() {
	s.handle("POST /v1/route", s.authChecked(s.route, ladder.KeyAgent))
	s.handle("POST /v1/routes/{route_id}/review", s.auth(s.review, ladder.KeyHuman))
	s.handle("POST /v1/outcomes", s.auth(s.outcome, ladder.KeyAgent, ladder.KeyHuman))
	s.handle("GET /v1/steps", s.auth(s.steps, ladder.KeyAgent, ladder.KeyHuman))
	s.handle("GET /v1/steps/{queue}/{step}/evidence", s.auth(s.evidence, ladder.KeyAgent, ladder.KeyHuman))
	s.handle("POST /v1/steps/{queue}/{step}/pin", s.auth(s.pin(true), ladder.KeyHuman))
	s.handle("POST /v1/steps/{queue}/{step}/unpin", s.auth(s.pin(false), ladder.KeyHuman))
}

func (s *Server) route(w http.ResponseWriter, r *http.Request) error {
	var req ladder.RouteRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	rt, err := s.svc.Route(r.Context(), principal(r), req)
	if err != nil {
		return err
	}
	if err := s.confirmKey(r); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, rt)
	return nil
}

func (s *Server) review(w http.ResponseWriter, r *http.Request) error {
	var req ladder.ReviewRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	res, err := s.svc.Review(r.Context(), principal(r), r.PathValue("route_id"), req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, res)
	return nil
}

func (s *Server) outcome(w http.ResponseWriter, r *http.Request) error {
	var req ladder.OutcomeRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	o, err := s.svc.RecordOutcome(r.Context(), principal(r), req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, o)
	return nil
}

func (s *Server) steps(w http.ResponseWriter, r *http.Request) error {
	v, err := s.svc.StepsRunAlone(r.Context(), principal(r).Workspace, r.URL.Query().Get("queue"), s.baseURLFor(r))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

func (s *Server) evidence(w http.ResponseWriter, r *http.Request) error {
	pack, err := s.svc.Evidence(r.Context(), principal(r).Workspace, queueParam(r), r.PathValue("step"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, pack)
	return nil
}

func (s *Server) pin(pin bool) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		var req ladder.PinRequest
		if err := decode(r, &req); err != nil {
			return err
		}
		st, err := s.svc.Pin(r.Context(), principal(r), queueParam(r), r.PathValue("step"), req, pin)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, st)
		return nil
	}
}

// queueParam reads the {queue} path segment; "-" means any queue, for
// callers that know a step by id or name alone.
func queueParam(r *http.Request) string {
	if q := r.PathValue("queue"); q != "-" {
		return q
	}
	return ""
}

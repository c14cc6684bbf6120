package http

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/internal/strictjson"
)

// capabilityRoutes registers capability calls and approvals.
func (s *Server) capabilityRoutes() {
	s.handle("GET /v1/capabilities", s.auth(s.listCapabilities, ladder.KeyAgent, ladder.KeyHuman))
	s.handle("POST /v1/capabilities/{id}/call", s.auth(s.callCapability, ladder.KeyAgent))
	s.handle("GET /v1/approvals", s.auth(s.listApprovals, ladder.KeyHuman))
	s.handle("GET /v1/approvals/{id}", s.auth(s.getApproval, ladder.KeyHuman, ladder.KeyAgent))
	s.handle("POST /v1/approvals/{id}/approve", s.auth(s.decideApproval("approve"), ladder.KeyHuman))
	s.handle("POST /v1/approvals/{id}/reject", s.auth(s.decideApproval("reject"), ladder.KeyHuman))
	s.handle("POST /v1/approvals/{id}/retry", s.auth(s.decideApproval("retry"), ladder.KeyHuman))
}

// listCapabilities lists what the workspace serves: REST's tools/list.
func (s *Server) listCapabilities(w http.ResponseWriter, r *http.Request) error {
	v, err := s.svc.Capabilities(r.Context(), principal(r).Workspace)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

// callCapability takes the same arguments as the capability's MCP tool:
// the payload, the scope fields, evidence and idempotency_key.
func (s *Server) callCapability(w http.ResponseWriter, r *http.Request) error {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return decodeReadErr(err)
	}
	if err := strictjson.Check(body); err != nil {
		// A fault at a path (a duplicate or case-variant key, a number
		// beyond float64) is the field's, as decode reports it.
		if se, ok := err.(*strictjson.Error); ok && se.Path != "" {
			return ladder.InvalidField(se.Path, "The body is not valid strict JSON: "+err.Error()+".", "fix the field "+se.Path+" and resend; nothing was run or recorded")
		}
		return &ladder.Error{Code: ladder.CodeInvalidJSON, Message: "The body is not valid strict JSON: " + err.Error() + ".", Hint: "send one JSON object: the payload, the scope fields, evidence and idempotency_key"}
	}
	// wait is a query parameter, not an argument: the body's extra keys
	// are the payload's.
	wait, err := waitParam(w, r)
	if err != nil {
		return err
	}
	res, err := s.svc.CallCapabilityWait(r.Context(), principal(r), r.PathValue("id"), json.RawMessage(body), wait)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if res.Status == ladder.CallResultApprovalRequested {
		status = http.StatusAccepted
	}
	writeJSON(w, status, res)
	return nil
}

func (s *Server) listApprovals(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	limit := 0
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil {
			return ladder.InvalidField("limit", "The limit is not a number.", "use 1 to 500")
		}
		limit = n
	}
	page, err := s.svc.ListApprovals(r.Context(), principal(r), q.Get("status"), q.Get("cursor"), limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

func (s *Server) getApproval(w http.ResponseWriter, r *http.Request) error {
	wait, err := waitParam(w, r)
	if err != nil {
		return err
	}
	a, err := s.svc.WaitApproval(r.Context(), principal(r), r.PathValue("id"), wait)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, a)
	return nil
}

func (s *Server) decideApproval(verb string) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		var req ladder.DecideRequest
		if verb != "retry" {
			if err := decodeOptional(r, &req); err != nil {
				return err
			}
		}
		var (
			a   ladder.ApprovalView
			err error
		)
		switch verb {
		case "approve":
			a, err = s.svc.Approve(r.Context(), principal(r), r.PathValue("id"), req)
		case "reject":
			a, err = s.svc.Reject(r.Context(), principal(r), r.PathValue("id"), req)
		default:
			a, err = s.svc.Retry(r.Context(), principal(r), r.PathValue("id"))
		}
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, a)
		return nil
	}
}

// decodeOptional is decode for bodies that may be empty.
func decodeOptional(r *http.Request, v any) error {
	if r.ContentLength == 0 {
		return nil
	}
	return decode(r, v)
}

func decodeReadErr(err error) error {
	if _, ok := err.(*http.MaxBytesError); ok {
		return &ladder.Error{Code: ladder.CodeBodyTooLarge, Message: "The body is over 1 MiB.", Hint: "send a smaller body"}
	}
	return ladder.Errorf(ladder.CodeInvalidJSON, "resend the request", "Could not read the body: %v.", err)
}

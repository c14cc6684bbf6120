package http

import (
	"net/http"
	"strconv"
	"time"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/service"
)

type createKeyRequest struct {
	Workspace string `json:"workspace"`
	Kind      string `json:"kind"`
	Name      string `json:"name,omitempty"`
	ExpiresIn string `json:"expires_in,omitempty"` // a Go duration such as "720h"
}

type keyResponse struct {
	ladder.Key
	Token string `json:"token,omitempty"`
}

// adminScope returns the workspace an admin key may manage.
func adminScope(p ladder.Principal) string { return p.Workspace }

func (s *Server) createKey(w http.ResponseWriter, r *http.Request) error {
	var req createKeyRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	p := principal(r)
	if scope := adminScope(p); scope != service.AllWorkspaces && req.Workspace != scope {
		return &ladder.Error{Code: ladder.CodeWorkspaceRefused, Message: "This admin key manages workspace " + scope + " only.", Hint: "create keys for " + scope + ", or use an all-workspaces admin key"}
	}
	kr := ladder.KeyRequest{Workspace: req.Workspace, Kind: ladder.KeyKind(req.Kind), Name: req.Name}
	if req.ExpiresIn != "" {
		d, err := time.ParseDuration(req.ExpiresIn)
		if err != nil || d <= 0 {
			return ladder.InvalidField("expires_in", "The expires_in value is not a positive duration.", `use a Go duration such as "720h"`)
		}
		kr.ExpiresIn = d
	}
	k, token, err := s.svc.CreateKey(r.Context(), p.KeyID, kr)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, keyResponse{Key: k, Token: token})
	return nil
}

func (s *Server) listKeys(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	limit := 0
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil {
			return ladder.InvalidField("limit", "The limit is not a number.", "use 1 to 500")
		}
		limit = n
	}
	page, err := s.svc.ListKeysPage(r.Context(), adminScope(principal(r)), q.Get("cursor"), limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

func (s *Server) revokeKey(w http.ResponseWriter, r *http.Request) error {
	p := principal(r)
	k, err := s.svc.RevokeKey(r.Context(), p.KeyID, adminScope(p), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, k)
	return nil
}

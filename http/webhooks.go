package http

import (
	"net/http"
	"strconv"

	"github.com/ladderhq/ladder"
)

// webhookRoutes serve the delivery state of the workspace's events: the
// list (paged, newest first) and redelivery, for people and operators.
func (s *Server) webhookRoutes() {
	s.handle("GET /v1/webhooks/deliveries", s.auth(s.listDeliveries, ladder.KeyHuman, ladder.KeyAdmin))
	s.handle("POST /v1/webhooks/deliveries/{id}/redeliver", s.auth(s.redeliver, ladder.KeyHuman, ladder.KeyAdmin))
}

func (s *Server) listDeliveries(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	req := ladder.DeliveryListRequest{Workspace: q.Get("workspace"), Status: q.Get("status"), Endpoint: q.Get("endpoint"), EventID: q.Get("event_id"), Cursor: q.Get("cursor")}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil {
			return ladder.InvalidField("limit", "The limit is not a number.", "use 1 to 500")
		}
		req.Limit = n
	}
	page, err := s.svc.ListDeliveries(r.Context(), principal(r), req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

func (s *Server) redeliver(w http.ResponseWriter, r *http.Request) error {
	d, err := s.svc.Redeliver(r.Context(), principal(r), r.URL.Query().Get("workspace"), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}

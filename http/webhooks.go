package http

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/service"
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

// waitParam reads ?wait=SECONDS (0 to 60) of an approval read, and lets
// the answer be written that long after the server's write timeout would
// have cut it.
func waitParam(w http.ResponseWriter, r *http.Request) (time.Duration, error) {
	v := r.URL.Query().Get("wait")
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > int(service.MaxApprovalWait/time.Second) {
		return 0, ladder.InvalidField("wait", fmt.Sprintf("The wait %q is not a number of seconds from 0 to 60.", v), "send wait=30 to wait up to 30 seconds for the decision, or leave it out to answer at once")
	}
	wait := time.Duration(n) * time.Second
	if wait > 0 {
		// The write deadline runs from the request's start; a refusal
		// here only means the answer comes by the server's default.
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(wait + 30*time.Second))
	}
	return wait, nil
}

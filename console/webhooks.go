package console

import (
	"html/template"
	"net/http"

	"github.com/ladderhq/ladder"
)

// deliveriesData is the webhook deliveries page's data.
type deliveriesData struct {
	Filter   ladder.DeliveryListRequest
	Page     ladder.DeliveryPage
	Next     template.URL // the next page's link
	Error    *ladder.Error
	Statuses []string
}

// deliveries lists the workspace's event deliveries, newest first: where
// each event went, how many tries it took, and the dead letters to send
// again (ladder webhooks redeliver).
func (h *Handler) deliveries(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	f := ladder.DeliveryListRequest{Status: q.Get("status"), Endpoint: q.Get("endpoint"), Cursor: q.Get("cursor"), Limit: 25}
	d := deliveriesData{Filter: f, Statuses: []string{"pending", "delivered", "dead"}}
	status := http.StatusOK
	pg, err := h.svc.ListDeliveries(r.Context(), principalOf(r), f)
	if err != nil {
		e, shown := filterRefusal(err)
		if !shown {
			return err
		}
		d.Error, status = e, http.StatusBadRequest
	}
	d.Page = pg
	if pg.NextCursor != "" {
		d.Next = nextPage("/console/webhooks", q, pg.NextCursor)
	}
	h.render(w, r, status, "webhooks", page{Title: "Webhook deliveries", Nav: "webhooks", Data: d})
	return nil
}

// redeliver sends a dead or failing delivery of the person's workspace
// again now, its tries counted anew (ladder webhooks redeliver).
func (h *Handler) redeliver(w http.ResponseWriter, r *http.Request) error {
	d, err := h.svc.Redeliver(r.Context(), principalOf(r), "", r.PathValue("id"))
	if err != nil {
		if ladder.AsError(err).Code == ladder.CodeNotFound {
			return errNotFound
		}
		return err
	}
	http.Redirect(w, r, "/console/webhooks?status=pending&done=redelivered#"+d.ID, http.StatusSeeOther)
	return nil
}

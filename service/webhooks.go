package service

import (
	"context"
	"errors"
	"fmt"

	"github.com/ladderhq/ladder"
)

// deliveryCursor pages GET /v1/webhooks/deliveries.
var deliveryCursor = cursor{"dl1:", "pass next_cursor from the previous page unchanged, or leave cursor out for the newest deliveries"}

// deliveryScope is the workspace whose deliveries p may see: its own, or
// the one named by an operator's all-workspaces admin key.
func (s *Service) deliveryScope(p ladder.Principal, workspace string) (string, error) {
	switch {
	case p.Workspace == AllWorkspaces && workspace == "":
		return "", argError("workspace", "is required with an all-workspaces admin key", "name the workspace whose deliveries to read (?workspace=ID, --workspace ID)")
	case p.Workspace == AllWorkspaces:
		if _, ok := s.Workspace(workspace); !ok {
			return "", argError("workspace", fmt.Sprintf("%q is not a workspace of this server", workspace), "name a workspace the config declares")
		}
		return workspace, nil
	case workspace != "" && workspace != p.Workspace:
		return "", &ladder.Error{Code: ladder.CodeWorkspaceRefused, Message: "This key reads the deliveries of workspace " + p.Workspace + " only.",
			Hint: "leave workspace out, or use a key of that workspace"}
	}
	return p.Workspace, nil
}

// ListDeliveries returns one page of a workspace's event deliveries, newest
// first: status pending, delivered or dead ("" for all), endpoint a
// webhook's name ("" for all).
func (s *Service) ListDeliveries(ctx context.Context, p ladder.Principal, req ladder.DeliveryListRequest) (ladder.DeliveryPage, error) {
	ws, err := s.deliveryScope(p, req.Workspace)
	if err != nil {
		return ladder.DeliveryPage{}, err
	}
	limit := req.Limit
	switch {
	case limit == 0:
		limit = ladder.DefaultPageLimit
	case limit < 0 || limit > 500:
		return ladder.DeliveryPage{}, argError("limit", fmt.Sprintf("%d is out of range", limit), "use 1 to 500 (default 50)")
	}
	switch ladder.DeliveryStatus(req.Status) {
	case "", ladder.DeliveryPending, ladder.DeliveryDelivered, ladder.DeliveryDead:
	default:
		return ladder.DeliveryPage{}, argError("status", fmt.Sprintf("%q is not allowed; allowed values: pending, delivered, dead", req.Status), "leave status out for every delivery")
	}
	q := ladder.DeliveryQuery{Workspace: ws, Status: ladder.DeliveryStatus(req.Status), EventID: req.EventID, Limit: limit + 1}
	if req.Endpoint != "" {
		q.Endpoint = ws + "/" + req.Endpoint
	}
	if req.Cursor != "" {
		if q.BeforeSeq, err = deliveryCursor.decode(req.Cursor); err != nil {
			return ladder.DeliveryPage{}, err
		}
	}
	rows, err := s.store.ListDeliveries(ctx, q)
	if err != nil {
		return ladder.DeliveryPage{}, storeErr("list deliveries", err)
	}
	page := ladder.DeliveryPage{Deliveries: rows}
	if len(rows) > limit {
		page.Deliveries = rows[:limit]
		page.NextCursor = deliveryCursor.encode(rows[limit-1].Seq)
	}
	if page.Deliveries == nil {
		page.Deliveries = []ladder.Delivery{}
	}
	return page, nil
}

// Redeliver makes a delivery of the caller's workspace pending and due now
// again, its tries counted anew: a dead letter sent again once the
// receiver is fixed, or a delivered event sent once more.
func (s *Service) Redeliver(ctx context.Context, p ladder.Principal, workspace, id string) (ladder.Delivery, error) {
	ws, err := s.deliveryScope(p, workspace)
	if err != nil {
		return ladder.Delivery{}, err
	}
	d, err := s.store.Redeliver(ctx, ws, id)
	if errors.Is(err, ladder.ErrNotFound) {
		return ladder.Delivery{}, &ladder.Error{Code: ladder.CodeNotFound, Message: fmt.Sprintf("No delivery %s in workspace %s.", id, ws),
			Hint: "list the deliveries with GET /v1/webhooks/deliveries (ladder webhooks list) and pass a delivery_id from it"}
	}
	if err != nil {
		return ladder.Delivery{}, storeErr("redeliver", err)
	}
	return d, nil
}

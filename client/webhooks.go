package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/ladderhq/ladder"
)

// Deliveries returns one page of the workspace's event deliveries, newest
// first (GET /v1/webhooks/deliveries).
func (c *Client) Deliveries(ctx context.Context, req ladder.DeliveryListRequest) (ladder.DeliveryPage, error) {
	q := url.Values{}
	for k, v := range map[string]string{"workspace": req.Workspace, "status": req.Status, "endpoint": req.Endpoint, "event_id": req.EventID, "cursor": req.Cursor} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if req.Limit > 0 {
		q.Set("limit", strconv.Itoa(req.Limit))
	}
	path := "/v1/webhooks/deliveries"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var p ladder.DeliveryPage
	return p, c.do(ctx, http.MethodGet, path, nil, &p)
}

// Redeliver makes a delivery pending and due now again.
func (c *Client) Redeliver(ctx context.Context, workspace, id string) (ladder.Delivery, error) {
	path := "/v1/webhooks/deliveries/" + url.PathEscape(id) + "/redeliver"
	if workspace != "" {
		path += "?workspace=" + url.QueryEscape(workspace)
	}
	var d ladder.Delivery
	return d, c.do(ctx, http.MethodPost, path, nil, &d)
}

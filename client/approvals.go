package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"

	"github.com/ladderhq/ladder"
)

// Approvals lists the workspace's approvals, newest first (human key).
func (c *Client) Approvals(ctx context.Context, status, cursor string, limit int) (ladder.ApprovalPage, error) {
	q := url.Values{}
	if status != "" {
		q.Set("status", status)
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var p ladder.ApprovalPage
	path := "/v1/approvals"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return p, c.do(ctx, http.MethodGet, path, nil, &p)
}

// Approve approves a request, optionally with an edited payload.
func (c *Client) Approve(ctx context.Context, id string, payload json.RawMessage, reason string) (ladder.ApprovalView, error) {
	var a ladder.ApprovalView
	return a, c.do(ctx, http.MethodPost, "/v1/approvals/"+url.PathEscape(id)+"/approve", ladder.DecideRequest{Payload: payload, Reason: reason}, &a)
}

// Reject rejects a request with a reason.
func (c *Client) Reject(ctx context.Context, id, reason string) (ladder.ApprovalView, error) {
	var a ladder.ApprovalView
	return a, c.do(ctx, http.MethodPost, "/v1/approvals/"+url.PathEscape(id)+"/reject", ladder.DecideRequest{Reason: reason}, &a)
}

// Retry runs an approved call again whose execution failed.
func (c *Client) Retry(ctx context.Context, id string) (ladder.ApprovalView, error) {
	var a ladder.ApprovalView
	return a, c.do(ctx, http.MethodPost, "/v1/approvals/"+url.PathEscape(id)+"/retry", nil, &a)
}

// CallCapability calls a capability over REST with the same arguments its
// MCP tool takes.
func (c *Client) CallCapability(ctx context.Context, id string, args map[string]any) (ladder.CallResult, error) {
	var r ladder.CallResult
	return r, c.do(ctx, http.MethodPost, "/v1/capabilities/"+url.PathEscape(id)+"/call", args, &r)
}

// ApprovalStatus tells what became of one approval (GET
// /v1/approvals/{id}); an agent key sees only its own requests.
func (c *Client) ApprovalStatus(ctx context.Context, id string) (ladder.ApprovalView, error) {
	var a ladder.ApprovalView
	return a, c.do(ctx, http.MethodGet, "/v1/approvals/"+url.PathEscape(id), nil, &a)
}
